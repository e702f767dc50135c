"""Cached analysis results (the CLI's JSON), served without numpy, pandas or pyarrow.

A warm `analyze` is one stat, one small read of the stat index, one read of the result and a
checksum: no parse, no analysis, no heavy import. An entry is a header line (JSON: a format tag,
the body's checksum and the notes the command printed on stderr) followed by the body, exactly the
text the command printed; a checksum mismatch (a damaged file) drops the entry so it is rebuilt.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from .keys import file_digest, hash_text, known_digest, result_entry_name
from .store import CacheStore

_TAG = "stepscope-result/1"


@dataclass(frozen=True)
class CachedResult:
    text: str  # what the command printed on stdout (the JSON contract)
    notes: tuple[str, ...] = ()  # what it printed on stderr, one line each


def cached_result(
    path: str | os.PathLike,
    key: str,
    store: CacheStore | None = None,
    known_only: bool = False,
) -> CachedResult | None:
    """The cached answer for this file's content under `key` (analysis/result_key.py: every input that shapes the
    answer), or None (a miss or a damaged entry).

    `known_only`: look only through the stat index, never hash the file. The command line's fast path uses it:
    a file the index does not know is almost always a first open, whose full path reads and hashes it anyway,
    so hashing it here too would read it twice."""
    store = store or CacheStore()
    try:
        digest = known_digest(store, path) if known_only else file_digest(store, path)
    except OSError:
        return None
    if digest is None:
        return None
    name = result_entry_name(digest, key)
    raw = store.read_bytes("results", name)
    if raw is None:
        return None
    result = _decode(raw)
    if result is None:
        store.discard("results", name)
    return result


def store_result(
    path: str | os.PathLike,
    key: str,
    text: str,
    notes: tuple[str, ...] | list[str] = (),
    store: CacheStore | None = None,
) -> bool:
    """Remember an answer for this file (its content hash must already be in the stat index)."""
    store = store or CacheStore()
    digest = known_digest(store, path)
    if digest is None:  # the file changed while it was analysed, or the cache is not writable
        return False
    header = json.dumps({"tag": _TAG, "sum": hash_text(text), "notes": list(notes)})
    data = (header + "\n" + text).encode()
    return store.put_bytes("results", result_entry_name(digest, key), data) is not None


def _decode(raw: bytes) -> CachedResult | None:
    head, sep, body = raw.partition(b"\n")
    try:
        header = json.loads(head)
        text = body.decode()
    except (ValueError, UnicodeDecodeError):
        return None
    if not sep or not isinstance(header, dict) or header.get("tag") != _TAG or header.get("sum") != hash_text(text):
        return None
    notes = header.get("notes")
    return CachedResult(text, tuple(str(n) for n in notes) if isinstance(notes, list) else ())
