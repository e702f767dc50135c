"""A Timeline entry's seal: a content hash of everything before it, checked before the entry is mapped back.

Why: Arrow's own validation catches codes outside their dictionaries and offsets out of bounds, not a changed
timestamp or duration, so a bit flipped on disk (or by anyone who can write the cache folder) would silently
change the answer. The seal makes any change to an entry a miss: the trace is read again. blake3 hashes on
every core at several GB/s, so checking a hit costs a few milliseconds per 100 MB of entry; the warm command line
never pays it (it answers from the result cache without the Timeline).

The hash reads the file in chunks into one reused buffer rather than through the mapping: pages of a mapping
would count in the process's resident set (a big trace's entry is gigabytes), pages read stay in the page cache.

Layout: the entry's bytes, then 32 bytes of blake3 of them, then the 16-byte magic.
"""

from __future__ import annotations

import os
from typing import BinaryIO

from .keys import new_hasher

SEAL_MAGIC = b"stepscope-seal/1"
_DIGEST_BYTES = 32
SEAL_BYTES = _DIGEST_BYTES + len(SEAL_MAGIC)
_PARALLEL = 8 << 20  # bytes above which the hash uses every core (same digest either way)
_CHUNK = 8 << 20


class BrokenSealError(ValueError):
    """The entry has no seal, or its bytes no longer match it."""


def _digest_of_fd(fd: int, size: int) -> bytes:
    """blake3 of the first `size` bytes of the open file, read with pread (the file's offset is left alone)."""
    hasher = new_hasher(threads=2 if size > _PARALLEL else 1)
    buffer = bytearray(min(_CHUNK, max(size, 1)))
    view = memoryview(buffer)
    done = 0
    while done < size:
        n = os.preadv(fd, [view[: min(len(buffer), size - done)]], done)
        if n <= 0:
            raise BrokenSealError("the cache entry is shorter than it was")
        hasher.update(view[:n])
        done += n
    return hasher.digest()[:_DIGEST_BYTES]


class SealingWriter:
    """A new entry's file, hashed as it is written, so that its seal costs no second read of its bytes (a big
    trace's entry is hundreds of MB, just written: reading it back cost 0.06-0.2 s of the cold path). Writers such
    as pyarrow's IPC writer take it for the file; `seal()` then appends the seal."""

    def __init__(self, handle: BinaryIO) -> None:
        if handle.tell() != 0:
            raise ValueError("a sealed entry is written from its first byte")
        self.handle = handle
        self._hasher = new_hasher(threads=2)

    def write(self, data) -> int:
        self._hasher.update(data)
        return self.handle.write(data)

    def tell(self) -> int:
        return self.handle.tell()

    def flush(self) -> None:
        self.handle.flush()

    @property
    def closed(self) -> bool:
        return self.handle.closed

    def seal(self) -> None:
        """Append the seal of everything written so far."""
        self.handle.write(self._hasher.digest()[:_DIGEST_BYTES] + SEAL_MAGIC)


def sealed(data: bytes) -> bytes:
    """`data` with its seal: what seal() appends, for bytes held in memory."""
    hasher = new_hasher(threads=2 if len(data) > _PARALLEL else 1)
    hasher.update(data)
    return data + hasher.digest()[:_DIGEST_BYTES] + SEAL_MAGIC


def sealed_size(fd: int) -> int:
    """The size of the open entry's content (its bytes before the seal), once they match the seal."""
    size = os.fstat(fd).st_size - SEAL_BYTES
    if size < 0:
        raise BrokenSealError("the cache entry has no seal")
    tail = os.pread(fd, SEAL_BYTES, size)
    if tail[_DIGEST_BYTES:] != SEAL_MAGIC:
        raise BrokenSealError("the cache entry has no seal")
    if _digest_of_fd(fd, size) != tail[:_DIGEST_BYTES]:
        raise BrokenSealError("the cache entry's bytes do not match its seal")
    return size
