"""Parsed Timelines cached as column files (trace_cache/column_file.py: Arrow IPC), memory-mapped back, keyed by
the trace's content.

What is cached is the reader's output before the run.json beside the file is attached: that file may change on its
own, so it is read fresh each time (it is small). A big trace's Timeline, once written, is mapped back from its
file (`MAPPED_ROWS`): the frame built in memory is freed and the analysis reads the file's pages, as a cache hit
does, so the frame is not held twice.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from stepscope.parsers import Timeline
from stepscope.parsers.kineto.pieces import Progress
from stepscope.parsers.limits import ReadLimits
from stepscope.parsers.load import load_trace, parse_trace_bytes, read_trace_file
from .column_file import NotCacheableError, map_written, read_entry, write_entry
from .keys import (
    FileDigest,
    hash_bytes,
    hash_bytes_sampled,
    hash_file_sampled,
    known_digest,
    known_file_digest,
    limits_tag,
    remember_digest,
    timeline_entry_name,
)
from .store import CacheStore

MAPPED_ROWS = 1 << 20  # a Timeline of this many events or more is mapped back from its entry once written
_DAMAGED = (OSError, NotCacheableError, ValueError, KeyError, TypeError, RecursionError)


def _entry_name(digest: str, limits: ReadLimits | None) -> str:
    limits = limits or ReadLimits.from_env()
    return timeline_entry_name(digest, limits_tag(_limit_values(limits)))


def _limit_values(limits: ReadLimits) -> list:
    """What an entry's name keeps of the limits it was read under (the budget's events only where one is set)."""
    values = [limits.max_file_bytes, limits.max_decompressed_bytes, limits.max_events]
    return values if limits.piece_events is None else [*values, limits.piece_events]


def save_timeline(store: CacheStore, digest: str, timeline: Timeline, limits: ReadLimits | None = None) -> bool:
    """Write the Timeline's entry (atomically), for the limits it was read under; False when it cannot be cached."""
    name = _entry_name(digest, limits)
    try:
        written = store.put("timelines", name, lambda handle: write_entry(handle, timeline, key=name))
    except NotCacheableError:
        return False
    return written is not None


def load_timeline(store: CacheStore, digest: str, limits: ReadLimits | None = None) -> Timeline | None:
    """The cached Timeline (memory-mapped) read under these limits, or None when absent; a damaged or foreign
    entry is removed."""
    name = _entry_name(digest, limits)
    path = store.get("timelines", name)
    if path is None:
        return None
    import pyarrow as pa  # only for a hit: a miss (a first open) does not pay for the import

    try:
        return read_entry(path, key=name)
    except (pa.ArrowException, *_DAMAGED):
        store.discard("timelines", name)
        return None


def _stored(store: CacheStore, digest: str, timeline: Timeline, limits: ReadLimits) -> Timeline:
    """The Timeline after its entry is written: a big one mapped back from the file just written (see the module),
    the one in memory when the entry could not be written or mapped."""
    if len(timeline.events) < MAPPED_ROWS:
        save_timeline(store, digest, timeline, limits)
        return timeline
    name = _entry_name(digest, limits)
    mapped: list[Timeline] = []

    def write(handle) -> None:
        import pyarrow as pa  # write_entry imported it

        write_entry(handle, timeline, key=name)
        try:
            mapped.append(map_written(handle, key=name))
        except (pa.ArrowException, *_DAMAGED):
            pass  # the frame in memory serves

    try:
        written = store.put("timelines", name, write)
    except NotCacheableError:
        return timeline
    return mapped[0] if written is not None and mapped else timeline


def load_trace_cached(
    path: str | os.PathLike,
    limits: ReadLimits | None = None,
    use_cache: bool = True,
    store: CacheStore | None = None,
    *,
    meanwhile: Callable[[], object] | None = None,
    progress: Progress | None = None,
) -> Timeline:
    """Like parsers.load_trace, through the cache: a hit maps the Arrow file, a miss parses and stores.
    Raises TraceError like load_trace. `meanwhile`, `progress`: as parsers.load_trace says."""
    path = Path(path)
    if not use_cache:
        return load_trace(path, limits, meanwhile=meanwhile, progress=progress)
    return open_trace_cached(path, limits, store, meanwhile=meanwhile, progress=progress)[1]


def open_trace_cached(
    path: str | os.PathLike,
    limits: ReadLimits | None = None,
    store: CacheStore | None = None,
    *,
    meanwhile: Callable[[], object] | None = None,
    progress: Progress | None = None,
) -> tuple[str, Timeline]:
    """(the file's content hash, its Timeline) through the cache; see load_trace_cached.

    On a miss a big plain JSON trace is read in pieces by two processes (parsers.load.read_trace_file) while
    this one hashes the file (blake3 on every core); content already cached under another name or stat stops
    that parse. Any other file is read once: its bytes are hashed, then parsed. The hash is recorded in the
    stat index only when the file is unchanged from before the first read to after the last one, and it is
    always the hash of this path's own bytes. A caller that keys its own caches by content gets the hash
    without reading the file again. Everything this open knows lives in its own _Opening: opens running at
    once in other threads share nothing with it."""
    path = Path(path)
    store = store or CacheStore()
    limits = limits or ReadLimits.from_env()
    known = known_digest(store, path)  # checked against the file's bytes (its sample): never served otherwise
    cached = load_timeline(store, known, limits) if known is not None else None
    if cached is not None:
        if progress is not None:
            progress(1.0)  # all there is to read: a mapped entry
        return known, cached
    digest, timeline = _Opening(path, limits, store).read(meanwhile, progress)
    return digest, timeline


class _Opening:
    """One open of a file the cache does not answer at once: the file's stat before it is read, and the digest
    of its own bytes once taken (from the file while the child decodes, or from the bytes read whole). A digest
    is only ever taken from this file's bytes, or from the stat index for the file state `before` saw when the
    read is of the file in pieces (checked unchanged after it): a stat index entry is never used for bytes in
    hand."""

    def __init__(self, path: Path, limits: ReadLimits, store: CacheStore) -> None:
        self.path, self.limits, self.store = path, limits, store
        try:
            self.before: os.stat_result | None = os.stat(os.path.realpath(path))
        except OSError:
            self.before = None  # the read words the error
        self.digest: FileDigest | None = None
        self.read_whole = False
        self.look_up = True  # whether the content's entry is looked for (not when reading again after a miss)

    def read(self, meanwhile: Callable[[], object] | None, progress: Progress | None) -> tuple[str, Timeline]:
        def work() -> bool:  # the caller's own work while the child decodes never stops the read
            if meanwhile is not None:
                meanwhile()
            return False

        timeline = read_trace_file(self.path, self.limits, meanwhile=work, cached=self.is_cached, progress=progress)
        if timeline is None:  # the content has an entry: this file is a copy, or was touched
            digest = self._recorded_digest()
            found = load_timeline(self.store, digest, self.limits)
            if found is not None:
                return digest, found
        elif self._recorded():
            digest = self._recorded_digest()
            return digest, _stored(self.store, digest, timeline, self.limits)
        # The entry found was damaged (and is gone), or the file changed while read in pieces: read it whole, once.
        again = _Opening(self.path, self.limits, self.store)
        again.look_up = False
        timeline = read_trace_file(self.path, self.limits, cached=again.is_cached, whole=True)
        if timeline is None or again.digest is None:  # is_cached hashed the bytes, and never stops when not looking
            raise RuntimeError("the whole read of the file took no digest")
        return again.digest.digest, _stored(self.store, again.digest.digest, timeline, self.limits)

    def is_cached(self, raw: bytes | bytearray | None) -> bool:
        """read_trace_file's content check: this file's digest, from the file (raw None: while the child decodes)
        or from the bytes read whole; whether that content already has an entry."""
        if raw is None:
            self.digest = self._hash_file()
            if self.digest is None:
                return False  # unreadable now: the decoding goes on, and what comes after words the error
        else:
            self.read_whole = True
            self.digest = hash_bytes_sampled(raw)  # blake3 on every core: a few hundredths of a second per 100 MB
            self._remember()
        name = _entry_name(self.digest.digest, self.limits)
        return self.look_up and self.store.get("timelines", name) is not None

    def _recorded(self) -> bool:
        """Whether the digest is the one of the bytes just parsed: always for a file read whole (hashed from those
        bytes); for pieces, when the file did not change from before the read to now (the hash and the pieces
        were read apart). Records it in the stat index when so."""
        if self.read_whole:
            return True
        if self.digest is None:  # no child was forked: the hash was not taken meanwhile
            self.digest = self._hash_file()
        return self._remember()

    def _hash_file(self) -> FileDigest | None:
        """The file's digest: from the stat index when it holds this file as `before` saw it (recorded from its
        bytes moments ago by the answer's look-up, and the read is checked against `before` afterwards), else
        from its bytes. Hashing 1.3 GB a second time cost the reading process 0.5 s of its core."""
        try:
            if self.before is not None:
                known = known_file_digest(self.store, self.path, self.before)
                if known is not None:
                    return known
            return hash_file_sampled(self.path)
        except OSError:
            return None

    def _recorded_digest(self) -> str:
        if self.digest is None:
            raise RuntimeError("no digest was taken")  # read_trace_file asks is_cached before any stop
        if not self.read_whole:
            self._remember()  # a copy of cached content: the next open of it hashes nothing
        return self.digest.digest

    def _remember(self) -> bool:
        if self.before is None or self.digest is None:
            return False
        return remember_digest(self.store, self.path, self.digest, self.before)


def parse_bytes_cached(data: bytes, limits: ReadLimits | None = None, store: CacheStore | None = None) -> Timeline:
    """An upload's Timeline through the cache (keyed by the bytes as uploaded)."""
    store = store or CacheStore()
    limits = limits or ReadLimits.from_env()
    digest = hash_bytes(data)
    cached = load_timeline(store, digest, limits)
    if cached is None:
        cached = parse_trace_bytes(data, limits)
        save_timeline(store, digest, cached, limits)
    return cached
