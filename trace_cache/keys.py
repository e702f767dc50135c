"""Cache keys: content hashes, version constants, and the stat index that saves rehashing big files.

Standard library (plus blake3 when installed) only: the warm command-line path imports this.

What a key covers:
- a Timeline entry: the trace file's bytes (blake3, else sha256), PARSER_VERSION, and a stamp of the
  parsers' source files (path, size, mtime), so an edited parser never serves an old parse even when
  nobody bumped the constant;
- a result entry: the same plus the analysis options, the run.json beside the trace (it feeds the
  device and roofline) and a stamp of the analysis and command-line sources, plus RESULT_VERSION.

The stat index maps (real path, size, mtime_ns, ctime_ns, inode, device) to the content hash, so a warm
run hashes nothing: any write to the file changes mtime or ctime (ctime cannot be set back by a user),
a copy or a replace changes the inode. The file is statted again after hashing, and the index is only
written when both stats agree, so a file changing while it is read is never recorded.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..contracts.run_record import MAX_BYTES as RUN_RECORD_MAX_BYTES
from ..contracts.safe_read import open_regular, read_regular
from .store import CacheStore

PARSER_VERSION = 2  # bump whenever a reader's output (the Timeline) changes (2: grid/block columns, ranks meta)
RESULT_VERSION = 1  # bump whenever the analyze JSON changes for the same Timeline and options
REPO = Path(__file__).resolve().parents[1]
PARSER_SOURCES = ("parsers", "trace_cache")
RESULT_SOURCES = ("parsers", "trace_cache", "analysis", "contracts", "app/cli", "app/cli_cached.py")
_CHUNK = 8 << 20  # bytes hashed at a time from a file
# The read limits (parsers.limits) decide whether a file is refused: an entry made under other limits is not used,
# so a lowered limit refuses a cached trace exactly as it refuses a fresh one.
LIMIT_ENVS = ("STEPSCOPE_MAX_FILE_MB", "STEPSCOPE_MAX_DECOMPRESSED_MB", "STEPSCOPE_MAX_EVENTS")

try:  # ~10x faster than sha256 on one core; both are cryptographic, so a crafted file cannot collide
    from blake3 import blake3 as _blake3
except ImportError:  # pragma: no cover - blake3 is in requirements.txt
    _blake3 = None


_PARALLEL_HASH_BYTES = 8 << 20  # above this a trace's bytes are hashed on every core (blake3 splits the input)


def new_hasher(threads: int = 1):
    if _blake3 is None:
        import hashlib

        return hashlib.sha256()
    return _blake3(max_threads=_blake3.AUTO if threads > 1 else 1)


def hash_bytes(data: bytes | bytearray | memoryview) -> str:
    """The content hash; a big buffer is hashed with all cores (same digest: blake3's tree does not change)."""
    hasher = new_hasher(threads=2 if len(data) > _PARALLEL_HASH_BYTES else 1)
    hasher.update(data)
    return _named(hasher)


def hash_text(text: str) -> str:
    return hash_bytes(text.encode("utf-8", "surrogatepass"))  # a path may hold bytes that are not UTF-8


def _named(hasher) -> str:
    return ("b3-" if _blake3 is not None else "sha256-") + hasher.hexdigest()[:48]


def hash_file(path: str | os.PathLike) -> str:
    """Content hash of a file's bytes as stored (compressed files are hashed compressed); the same digest as
    hash_bytes of its content. Read in chunks into one reused buffer: no fresh memory is faulted in for a big
    file, which would cost more than the hashing."""
    with open(open_regular(path), "rb", buffering=0) as handle:  # a FIFO or a device: refused, never blocks
        size = os.fstat(handle.fileno()).st_size
        hasher = new_hasher(threads=2 if size > _PARALLEL_HASH_BYTES else 1)
        buffer = bytearray(min(_CHUNK, max(size, 1)))
        view = memoryview(buffer)
        while n := handle.readinto(buffer):
            hasher.update(view[:n])
    return _named(hasher)


def source_stamp(parts: tuple[str, ...]) -> str:
    """A short hash of the (path, size, mtime_ns) of every .py file under the given repo parts."""
    rows = []
    for part in parts:
        root = REPO / part
        files = [root] if root.suffix == ".py" else sorted(root.rglob("*.py")) if root.is_dir() else []
        for file in files:
            try:
                st = file.stat()
            except OSError:
                continue
            rows.append(f"{file.relative_to(REPO)}:{st.st_size}:{st.st_mtime_ns}")
    return hash_text("\n".join(rows))[-16:]


def _stat_name(path: str | os.PathLike, st: os.stat_result | None = None) -> tuple[str, os.stat_result] | None:
    try:
        real = os.path.realpath(path)
        st = st or os.stat(real)
    except OSError:
        return None
    ident = "\0".join(map(str, (real, *stat_identity(st))))
    return hash_text(ident) + ".txt", st


def stat_identity(st: os.stat_result) -> tuple[int, ...]:
    """What says a file is unchanged without reading it: size, mtime, ctime, inode, device."""
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev


def _same_stat(a: os.stat_result, b: os.stat_result) -> bool:
    return stat_identity(a) == stat_identity(b)


def known_digest(store: CacheStore, path: str | os.PathLike, st: os.stat_result | None = None) -> str | None:
    """The content hash recorded for this exact file state (now, or as `st` saw it), or None."""
    named = _stat_name(path, st)
    if named is None:
        return None
    raw = store.read_bytes("stat", named[0])
    text = raw.decode("ascii", errors="replace").strip() if raw else ""
    return text if text.startswith(("b3-", "sha256-")) else None


def remember_digest(store: CacheStore, path: str | os.PathLike, digest: str, before: os.stat_result) -> bool:
    """Record path -> digest when the file is unchanged since `before` was taken (ahead of reading it); whether it
    was unchanged (a cache that cannot be written records nothing, and still says so)."""
    named = _stat_name(path)
    if named is None or not _same_stat(before, named[1]):
        return False
    store.put_bytes("stat", named[0], digest.encode("ascii"))
    return True


def file_digest(store: CacheStore, path: str | os.PathLike) -> str:
    """The content hash through the stat index, hashing (and recording) the file when it is not known."""
    digest = known_digest(store, path)
    if digest is not None:
        return digest
    before = os.stat(os.path.realpath(path))
    digest = hash_file(path)
    remember_digest(store, path, digest, before)
    return digest


def sidecar_digest(trace_path: str | os.PathLike) -> str:
    """What the run.json beside a trace contributes to a result key ("none" when there is none)."""
    sidecar = Path(trace_path).with_name("run.json")
    try:
        return hash_bytes(read_regular(sidecar, RUN_RECORD_MAX_BYTES))  # as the one reader reads it
    except OSError:  # absent, not a regular file (a FIFO never blocks this), or too large: not read at all
        return "none"


def limits_tag(values) -> str:
    """A short tag of the read limits in force (their values, or the raw environment variables)."""
    return hash_text(json.dumps([str(v) for v in values]))[-8:]


def env_limits_tag() -> str:
    return limits_tag(os.environ.get(name, "") for name in LIMIT_ENVS)


def timeline_entry_name(digest: str, limits: str = "") -> str:
    """`limits`: limits_tag of the ReadLimits the file is read under."""
    return f"{digest}-p{PARSER_VERSION}-{source_stamp(PARSER_SOURCES)}{'-l' + limits if limits else ''}.arrow"


def result_entry_name(digest: str, trace_path: str | os.PathLike | None, options: dict, command: str) -> str:
    """The name of a cached result: content, run.json, options, command and code versions."""
    key = json.dumps(
        {
            "command": command,
            "options": options,
            "limits": env_limits_tag(),  # the command line reads under the environment's limits
            "run_json": sidecar_digest(trace_path) if trace_path is not None else "none",
            "versions": [PARSER_VERSION, RESULT_VERSION, source_stamp(RESULT_SOURCES)],
        },
        sort_keys=True,
        default=str,
    )
    return f"{digest}-{hash_text(key)[-24:]}.json"
