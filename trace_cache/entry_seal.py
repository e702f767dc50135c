"""A Timeline entry's seal: a content hash of everything before it, checked before the entry is mapped back.

Why: Arrow's own validation catches codes outside their dictionaries and offsets out of bounds, not a changed
timestamp or duration, so a bit flipped on disk (or by anyone who can write the cache folder) would silently
change the answer. The seal makes any change to an entry a miss: the trace is read again. blake3 hashes on
every core at several GB/s, so checking a hit costs a few milliseconds per 100 MB of entry; the warm command line
never pays it (it answers from the result cache without the Timeline).

Layout: the entry's bytes, then 32 bytes of blake3 of them, then the 16-byte magic.
"""

from __future__ import annotations

import mmap
import os
from typing import TYPE_CHECKING, BinaryIO

from .keys import new_hasher

if TYPE_CHECKING:
    import pyarrow as pa

SEAL_MAGIC = b"stepscope-seal/1"
_DIGEST_BYTES = 32
SEAL_BYTES = _DIGEST_BYTES + len(SEAL_MAGIC)
_PARALLEL = 8 << 20  # bytes above which the hash uses every core (same digest either way)


class BrokenSealError(ValueError):
    """The entry has no seal, or its bytes no longer match it."""


def _digest(data) -> bytes:
    view = memoryview(data)
    hasher = new_hasher(threads=2 if len(view) > _PARALLEL else 1)
    hasher.update(view)
    return hasher.digest()[:_DIGEST_BYTES]


def seal(handle: BinaryIO) -> None:
    """Append the seal of everything written to `handle` so far (a file opened for writing at its end)."""
    handle.flush()
    size = handle.tell()
    if size == 0:
        handle.write(_digest(b"") + SEAL_MAGIC)
        return
    with mmap.mmap(os.dup(handle.fileno()), size, access=mmap.ACCESS_READ) as mapped:
        digest = _digest(mapped)
    handle.write(digest + SEAL_MAGIC)


def sealed(data: bytes) -> bytes:
    """`data` with its seal: what seal() appends, for bytes held in memory."""
    return data + _digest(data) + SEAL_MAGIC


def unsealed(entry: pa.Buffer) -> pa.Buffer:
    """The entry's bytes without the seal (a slice: nothing copied), once they match it."""
    body = entry.size - SEAL_BYTES
    if body < 0 or entry.slice(body + _DIGEST_BYTES).to_pybytes() != SEAL_MAGIC:
        raise BrokenSealError("the cache entry has no seal")
    content = entry.slice(0, body)
    if _digest(content) != entry.slice(body, _DIGEST_BYTES).to_pybytes():
        raise BrokenSealError("the cache entry's bytes do not match its seal")
    return content
