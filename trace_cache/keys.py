"""Cache keys: content hashes, version constants, and the stat index that saves rehashing big files.

Standard library (plus blake3 when installed) only: the warm command-line path imports this.

What a key covers:
- a Timeline entry: the trace file's bytes (blake3, else sha256), PARSER_VERSION, and a stamp of the
  parsers' source files (path, size, mtime), so an edited parser never serves an old parse even when
  nobody bumped the constant;
- a result entry: the trace's content hash and a key of everything else that shaped the answer, built by
  analysis/result_key.py from whole objects (the options, the model, the read limits, the run.json beside the
  trace, this machine's stored figures, a stamp of every source file of the package).

The stat index maps (real path, size, mtime_ns, ctime_ns, inode, device) to the content hash, so a warm
run hashes nothing: any write to the file changes mtime or ctime (ctime cannot be set back by a user),
a copy or a replace changes the inode. The file is statted again after hashing, and the index is only
written when both stats agree, so a file changing while it is read is never recorded.

An entry is never trusted on its stat alone. It also holds a sample hash (the file's size, its first and last
64 KB and 16 blocks of 4 KB between them), taken from the same open file as the content hash
(FileDigest), and is served only while the file's bytes still give that sample: 18 reads of the file's cached
pages, a few tenths of a millisecond, and still no numpy. An entry whose digest came from other bytes (another
file's open, a hand-written entry, an older format, a rewrite the stat did not show) disagrees with this file's
sample, is dropped and the file is hashed again. What the sample cannot see: a change confined to the bytes between
its blocks under an unchanged stat, or an entry forged with this file's own sample; only hashing the whole file
would, which would cost a warm run more than everything else it does (see README, "The cache").
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from stepscope.contracts.safe_read import open_regular
from .store import CacheStore

PARSER_VERSION = 3  # bump whenever a reader's output (the Timeline) changes (2: grid/block, ranks; 3: memory)
REPO = Path(__file__).resolve().parents[1]
PARSER_SOURCES = ("parsers", "trace_cache")
_CHUNK = 256 << 10  # bytes hashed at a time from a file: read into a buffer that stays in the core's L2 cache

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
    hash_bytes of its content."""
    return hash_file_sampled(path).digest


@dataclass(frozen=True)
class FileDigest:
    """A file's content hash and its sample hash (see the module), both from one read of one open file: what the
    stat index records, so that an entry can be checked against the file's bytes before it is served."""

    digest: str
    sample: str


def hash_file_sampled(path: str | os.PathLike) -> FileDigest:
    """The content hash of a file's bytes as stored, and its sample from the same open file. Read in small chunks
    into one reused buffer, on one core: no fresh memory is faulted in for a big file, the copy out of the page
    cache lands in the core's cache where the hash reads it (measured on this project's VM, 1.1 GB: 0.36-0.44 s,
    where 8 MB chunks on two threads took 0.46-1.06 s, and they compete with the second decoding process)."""
    with open(open_regular(path), "rb", buffering=0) as handle:  # a FIFO or a device: refused, never blocks
        size = os.fstat(handle.fileno()).st_size
        hasher = new_hasher(threads=1)
        buffer = bytearray(min(_CHUNK, max(size, 1)))
        view = memoryview(buffer)
        while n := handle.readinto(buffer):
            hasher.update(view[:n])
        return FileDigest(_named(hasher), _sample_of_file(handle.fileno()))


def hash_bytes_sampled(data: bytes | bytearray | memoryview) -> FileDigest:
    """hash_bytes and the sample of a file whose bytes as stored are `data`."""
    view = memoryview(data)
    return FileDigest(hash_bytes(data), _sample_hash(len(view), (view[a:b] for a, b in _sample_regions(len(view)))))


_SAMPLE_EDGE = 64 << 10  # bytes sampled at each end of a file (a trace's head, its last events and tail keys)
_SAMPLE_BLOCK = 4 << 10
_SAMPLE_BLOCKS = 16  # blocks sampled between the ends, evenly spread


def _sample_regions(size: int) -> list[tuple[int, int]]:
    """The [start, end) ranges a file of this size is sampled at: all of it when small."""
    if size <= 2 * _SAMPLE_EDGE + _SAMPLE_BLOCKS * _SAMPLE_BLOCK:
        return [(0, size)]
    span = size - 2 * _SAMPLE_EDGE - _SAMPLE_BLOCK
    middle = [_SAMPLE_EDGE + span * (2 * k + 1) // (2 * _SAMPLE_BLOCKS) for k in range(_SAMPLE_BLOCKS)]
    return [(0, _SAMPLE_EDGE), *((m, m + _SAMPLE_BLOCK) for m in middle), (size - _SAMPLE_EDGE, size)]


def _sample_hash(size: int, parts) -> str:
    hasher = new_hasher()
    hasher.update(size.to_bytes(8, "little"))
    for part in parts:
        hasher.update(part)
    return "s-" + hasher.hexdigest()[:32]


def _sample_of_file(fd: int) -> str:
    size = os.fstat(fd).st_size
    return _sample_hash(size, (os.pread(fd, b - a, a) for a, b in _sample_regions(size)))


def file_sample(path: str | os.PathLike) -> str | None:
    """The sample hash of the file's bytes now (see the module), or None when it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return _sample_of_file(fd)
    except OSError:
        return None
    finally:
        os.close(fd)


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
    """The content hash recorded for this exact file state (now, or as `st` saw it), or None; an entry whose
    sample disagrees with the file's bytes now is dropped, never served (see the module)."""
    known = known_file_digest(store, path, st)
    return None if known is None else known.digest


def known_file_digest(
    store: CacheStore, path: str | os.PathLike, st: os.stat_result | None = None
) -> FileDigest | None:
    """known_digest with its sample: what hash_file_sampled would give for this file state, without reading it
    all again (the front door hashes a file to look for its answer before the read looks for its entry)."""
    named = _stat_name(path, st)
    if named is None:
        return None
    entry = _read_entry(store.read_bytes("stat", named[0]))
    if entry is None:  # absent, damaged, or of the older format that held no sample
        return None
    if file_sample(os.path.realpath(path)) != entry.sample:
        store.discard("stat", named[0])
        return None
    return entry


def _read_entry(raw: bytes | None) -> FileDigest | None:
    parts = raw.decode("ascii", errors="replace").split() if raw else []
    if len(parts) != 2 or not parts[0].startswith(("b3-", "sha256-")) or not parts[1].startswith("s-"):
        return None
    return FileDigest(*parts)


def remember_digest(store: CacheStore, path: str | os.PathLike, digest: FileDigest, before: os.stat_result) -> bool:
    """Record path -> digest when the file is unchanged since `before` was taken (ahead of reading it); whether it
    was unchanged (a cache that cannot be written records nothing, and still says so). `digest` must come from
    this path's own bytes (hash_file_sampled or hash_bytes_sampled of what was read from it)."""
    named = _stat_name(path)
    if named is None or not _same_stat(before, named[1]):
        return False
    store.put_bytes("stat", named[0], f"{digest.digest} {digest.sample}\n".encode("ascii"))
    return True


def file_digest(store: CacheStore, path: str | os.PathLike) -> str:
    """The content hash through the stat index, hashing (and recording) the file when it is not known."""
    digest = known_digest(store, path)
    if digest is not None:
        return digest
    before = os.stat(os.path.realpath(path))
    hashed = hash_file_sampled(path)
    remember_digest(store, path, hashed, before)
    return hashed.digest


def limits_tag(values) -> str:
    """A short tag of the read limits in force (their values, or the raw environment variables)."""
    return hash_text(json.dumps([str(v) for v in values]))[-8:]


def timeline_entry_name(digest: str, limits: str = "") -> str:
    """`limits`: limits_tag of the ReadLimits the file is read under."""
    return f"{digest}-p{PARSER_VERSION}-{source_stamp(PARSER_SOURCES)}{'-l' + limits if limits else ''}.arrow"


def result_entry_name(digest: str, key: str) -> str:
    """The name of a cached answer: the trace's content and the key of everything else that shaped it
    (analysis/result_key.py builds it from whole objects: options, model, limits, run.json, code)."""
    if not key or not all(c.isalnum() for c in key):
        raise ValueError("a result key is letters and digits")
    return f"{digest}-{key}.json"
