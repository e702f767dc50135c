"""Cached analysis results (the CLI's JSON), served without numpy, pandas or pyarrow.

A warm `analyze` is one stat, one small read of the stat index, one read of the result and a
checksum: no parse, no analysis, no heavy import. An entry is a header line (JSON: a format tag,
the body's checksum and the notes the command printed on stderr) followed by the body, exactly the
text the command printed; a checksum mismatch (a damaged file) drops the entry so it is rebuilt.

An entry is bound to its key: the header holds the name the entry was stored under (the trace's content hash and
the answer's key), and a read under any other name is a miss. Why: the checksum and the contract's shape say the
body is some whole answer, not that it is this trace's; two entries swapped on disk (or one copied over another)
would otherwise serve another trace's steps and findings with exit 0.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from .keys import file_digest, hash_text, known_digest, result_entry_name
from .store import CacheStore

RESULT_TAG = "stepscope-result/2"  # 2: the header binds the entry's name


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
    result = _decode(raw, name)
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
    name = result_entry_name(digest, key)
    header = json.dumps({"tag": RESULT_TAG, "entry": name, "sum": hash_text(text), "notes": list(notes)})
    data = (header + "\n" + text).encode()
    return store.put_bytes("results", name, data) is not None


def _decode(raw: bytes, name: str) -> CachedResult | None:
    """The entry's answer when its header is this format's, names this entry and checks its body; else None."""
    head, sep, body = raw.partition(b"\n")
    try:
        header = json.loads(head)
        text = body.decode()
    except (ValueError, UnicodeDecodeError):
        return None
    if not sep or not isinstance(header, dict) or header.get("tag") != RESULT_TAG or header.get("entry") != name:
        return None  # another format, or another trace's (or key's) answer under this name
    if header.get("sum") != hash_text(text):
        return None
    if not is_analyze_result(text):
        return None  # a valid checksum over something else: a miss, never served or rendered
    notes = header.get("notes")
    return CachedResult(text, tuple(str(n) for n in notes) if isinstance(notes, list) else ())


# The analyze --json contract's shape (DESIGN.md), as far as anything that serves or renders a cached body reads
# it: a key's type (object: anything), a literal string, a test (a function), a list's item shape ([shape]), an
# object's own keys ({key: shape}; "key?" may be absent or null; "*": every value of a mapping), alternatives
# (a tuple). Keys are only ever added to the contract, so more
# keys are fine; a missing one or one of another type is not a result. NUMBER is an int or float, never a bool.
NUMBER, NULL = "number", type(None)


def _not_ok(status) -> bool:
    return isinstance(status, str) and status != "ok"


_ROOFLINE_ROW = {"category": str, "time_us": NUMBER, "bytes": NUMBER, "floor_us": NUMBER, "pct_of_roofline?": NUMBER}
_ANATOMY = {
    "step?": int,
    "step_kind?": str,
    "unit?": str,
    "categories?": {"*": {"kernels": int, "time_us": NUMBER}},
    "layers?": int,
    "layer_us?": {"*": (NUMBER, NULL)},
    "head_us?": NUMBER,
    "tail_us?": NUMBER,
    "evidence?": str,
    "roofline?": (
        {
            "status": "ok",
            **dict.fromkeys(("model", "hardware", "context", "batch"), object),
            "memory_gb_s": NUMBER,
            "categories": [_ROOFLINE_ROW],
            "overhead_total_us": NUMBER,
        },
        {"status?": _not_ok},
    ),
    "notes?": [str],
}
ANALYZE_SHAPE = {
    "format": str,
    "device": (str, NULL),
    "events": int,
    "requests": int,
    "segmentation": {"method": str, "confidence": NUMBER, "warnings": [str], "evidence": [str]},
    "steps": [
        {
            "kind": str,
            "request": int,
            "index": int,
            "start_us": NUMBER,
            "end_us": NUMBER,
            "kernels": int,
            "launches": int,
            "gpu_busy_us": NUMBER,
            "gpu_idle_us": NUMBER,
        }
    ],
    "summary": {"anatomy?": _ANATOMY},
    "findings": [{"id": str, "severity": str, "title": str, "detail": str}],
}


def is_analyze_result(text: str) -> bool:
    """Whether a cached body is an analyze --json object: the contract's keys, of the right types (a body whose
    checksum is valid may still be anything). Parses the JSON once; no numpy, no pandas."""
    try:
        return fits(json.loads(text), ANALYZE_SHAPE)
    except (ValueError, RecursionError):
        return False


def fits(value, shape) -> bool:
    """Whether a decoded JSON value has the shape (see ANALYZE_SHAPE's comment)."""
    if isinstance(shape, tuple):
        return any(fits(value, option) for option in shape)
    if shape == NUMBER:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if isinstance(shape, str):  # a literal string value
        return value == shape
    if isinstance(shape, type):
        return isinstance(value, shape) and not (shape is int and isinstance(value, bool))
    if callable(shape):
        return shape(value)
    if isinstance(shape, list):
        return isinstance(value, list) and all(fits(item, shape[0]) for item in value)
    if not isinstance(value, dict):
        return False
    if "*" in shape:
        return all(fits(item, shape["*"]) for item in value.values())
    for key, sub in shape.items():
        name = key.removesuffix("?")
        if name not in value:
            if name == key:
                return False
        elif not (name != key and value[name] is None) and not fits(value[name], sub):
            return False
    return True
