"""Parsed Timelines cached as Arrow IPC files, memory-mapped back, keyed by the trace's content.

Why Arrow IPC: the frame is columns of int64 and categoricals; an IPC file maps straight into numpy
arrays (no copy, no decode), so reopening a 1M-event trace costs milliseconds. Categoricals are
stored as dictionary arrays (codes + the distinct strings once); the metadata (TraceMeta) is JSON in
the schema's metadata. The numpy columns of a loaded frame are read-only views of the mapped file,
which suits a Timeline (treated as immutable; analysis derives new frames).

What is cached is the reader's output before the run.json beside the file is attached: that file
may change on its own, so it is read fresh each time (it is small).

A Timeline with a memory table (parsers.memory_table) has a second table of another length: the entry is then the
events' IPC file, the memory table's IPC file, the offset of the second and a 16-byte trailer, and both are mapped
back from the one file (see _entry_tables). Every entry ends with a seal (entry_seal): a changed byte is a miss.
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..parsers import Timeline
from ..parsers.limits import ReadLimits
from ..parsers.load import load_trace, parse_trace_bytes, read_trace_file
from ..parsers.memory_table import MEMORY_COLUMNS
from ..parsers.split_decode import Progress
from ..parsers.timeline import DeviceInfo, TraceMeta
from .entry_seal import SEAL_BYTES, seal, sealed_size
from .keys import (
    PARSER_VERSION,
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

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from ..parsers.column_file import ColumnFile, ColumnSpec

_META_KEY = b"stepscope"
_MEMORY_TRAILER = b"stepscope-memory"  # the entry's last 16 bytes when a memory table follows the events
_OFFSET = struct.Struct("<Q")


class NotCacheableError(Exception):
    """The Timeline holds something Arrow/JSON cannot hold exactly; it is simply not cached."""


def meta_to_json(meta: TraceMeta) -> dict:
    extra = dict(meta.extra)
    if json.loads(json.dumps(extra)) != extra:
        raise NotCacheableError("metadata extra does not round-trip through JSON")
    return {
        "source_format": meta.source_format,
        "event_count": meta.event_count,
        "base_time_ns": meta.base_time_ns,
        "devices": [
            [d.ordinal, d.name, d.sm_count, d.memory_bytes, d.compute_major, d.compute_minor, d.warp_size]
            for d in meta.devices.values()
        ],
        "device_keys": list(meta.devices),
        "process_names": [[k, v] for k, v in meta.process_names.items()],
        "thread_names": [[p, t, v] for (p, t), v in meta.thread_names.items()],
        "sort_order": [[p, t, v] for (p, t), v in meta.sort_order.items()],
        "id_labels": [[k, v] for k, v in meta.id_labels.items()],
        "unknown_categories": meta.unknown_categories,
        "skipped": meta.skipped,
        "warnings": list(meta.warnings),
        "extra": extra,
    }


def meta_from_json(raw: dict) -> TraceMeta:
    devices = {k: DeviceInfo(*d) for k, d in zip(raw["device_keys"], raw["devices"], strict=True)}
    return TraceMeta(
        source_format=raw["source_format"],
        event_count=raw["event_count"],
        base_time_ns=raw["base_time_ns"],
        devices=devices,
        process_names={k: v for k, v in raw["process_names"]},
        thread_names={(p, t): v for p, t, v in raw["thread_names"]},
        sort_order={(p, t): v for p, t, v in raw["sort_order"]},
        id_labels={k: v for k, v in raw["id_labels"]},
        unknown_categories=raw["unknown_categories"],
        skipped=raw["skipped"],
        warnings=tuple(raw["warnings"]),
        extra=raw["extra"],
    )


def timeline_to_table(timeline: Timeline) -> pa.Table:
    import pandas as pd
    import pyarrow as pa

    frame = timeline.events
    if not isinstance(frame.index, pd.RangeIndex) or frame.index.start != 0 or frame.index.step != 1:
        raise NotCacheableError("the frame's index is not 0..n-1")
    arrays, fields = [], []
    for name in frame.columns:
        col = frame[name]
        if isinstance(col.dtype, pd.CategoricalDtype):
            cats = col.cat.categories
            array = pa.DictionaryArray.from_arrays(pa.array(col.cat.codes.to_numpy()), pa.array(list(cats)))
        elif col.dtype.kind in "biuf":
            array = pa.array(col.to_numpy())
        else:
            raise NotCacheableError(f"column {name} of type {col.dtype} is not cached")
        arrays.append(array)
        fields.append(pa.field(str(name), array.type))
    schema = pa.schema(fields, metadata=_schema_metadata(timeline.meta, list(frame.columns), timeline.memory))
    return pa.Table.from_arrays(arrays, schema=schema)


def _schema_metadata(meta: TraceMeta, columns: list[str], memory: pd.DataFrame | None) -> dict[bytes, bytes]:
    """What an entry's schema says besides its columns: the parser version, the Timeline's meta, the columns'
    order and the memory table's length."""
    raw = {
        "parser_version": PARSER_VERSION,
        "meta": meta_to_json(meta),
        "columns": columns,
        "memory_rows": None if memory is None else len(memory),
    }
    return {_META_KEY: json.dumps(raw).encode()}


def memory_to_table(memory: pd.DataFrame) -> pa.Table:
    """The memory table's int64 columns as an Arrow table."""
    import pyarrow as pa

    if list(memory.columns) != list(MEMORY_COLUMNS) or any(memory[c].dtype.kind != "i" for c in MEMORY_COLUMNS):
        raise NotCacheableError("the memory table is not the one parsers.memory_table describes")
    return pa.Table.from_arrays([pa.array(memory[c].to_numpy()) for c in MEMORY_COLUMNS], names=list(MEMORY_COLUMNS))


def table_to_memory(table: pa.Table, rows: int) -> pd.DataFrame:
    """The memory table back, its columns read-only views of the mapped entry."""
    import pandas as pd

    if table.column_names != list(MEMORY_COLUMNS) or table.num_rows != rows:
        raise NotCacheableError("the entry's memory table does not match its events")
    data = {}
    for name in MEMORY_COLUMNS:
        col = table.column(name)
        data[name] = (col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()).to_numpy(zero_copy_only=True)
    return pd.DataFrame(data, copy=False)


def table_to_timeline(table: pa.Table, memory: pa.Table | None = None) -> Timeline:
    from ..parsers.column_file import frame_of_table

    raw = json.loads((table.schema.metadata or {}).get(_META_KEY, b"null"))
    if not isinstance(raw, dict) or raw.get("parser_version") != PARSER_VERSION:
        raise NotCacheableError("another parser version")
    frame = frame_of_table(table, raw["columns"])
    rows = raw.get("memory_rows")
    if (rows is None) != (memory is None):
        raise NotCacheableError("the entry's memory table is missing or unexpected")
    memory_frame = table_to_memory(memory, rows) if memory is not None else None
    return Timeline(events=frame, meta=meta_from_json(raw["meta"]), memory=memory_frame)


def _entry_name(digest: str, limits: ReadLimits | None) -> str:
    limits = limits or ReadLimits.from_env()
    return timeline_entry_name(digest, limits_tag(_limit_values(limits)))


def _limit_values(limits: ReadLimits) -> list:
    """What an entry's name keeps of the limits it was read under (the budget's events only where one is set)."""
    values = [limits.max_file_bytes, limits.max_decompressed_bytes, limits.max_events]
    return values if limits.piece_events is None else [*values, limits.piece_events]


def save_timeline(store: CacheStore, digest: str, timeline: Timeline, limits: ReadLimits | None = None) -> bool:
    """Write the Timeline's entry (atomically), for the limits it was read under; False when it cannot be cached."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    try:
        table = timeline_to_table(timeline)
        memory = memory_to_table(timeline.memory) if timeline.memory is not None else None
    except (NotCacheableError, pa.ArrowException, TypeError, ValueError):
        return False

    def write(handle) -> None:
        with ipc.new_file(handle, table.schema) as writer:
            writer.write_table(table)
        _append_memory(handle, memory)
        seal(handle)

    return store.put("timelines", _entry_name(digest, limits), write) is not None


def _append_memory(handle, memory: pa.Table | None) -> None:
    """The memory table's IPC file after the events', then where it starts and the trailer (see _entry_tables)."""
    import pyarrow.ipc as ipc

    if memory is not None:
        start = handle.tell()
        with ipc.new_file(handle, memory.schema) as writer:
            writer.write_table(memory)
        handle.write(_OFFSET.pack(start) + _MEMORY_TRAILER)


def load_timeline(store: CacheStore, digest: str, limits: ReadLimits | None = None) -> Timeline | None:
    """The cached Timeline (memory-mapped) read under these limits, or None when absent; a damaged or foreign
    entry is removed."""
    name = _entry_name(digest, limits)
    path = store.get("timelines", name)
    if path is None:
        return None
    import pyarrow as pa  # only for a hit: a miss (a first open) does not pay for the import

    try:
        table, memory = _entry_tables(_mapped_content(path))
        table.validate(full=True)  # codes within their dictionaries, offsets in bounds
        return table_to_timeline(table, memory)
    except (OSError, pa.ArrowException, NotCacheableError, ValueError, KeyError, TypeError, RecursionError):
        store.discard("timelines", name)  # RecursionError: metadata JSON nested too deep for the decoder
        return None


def _mapped_content(path: Path) -> pa.Buffer:
    """The entry's content, memory-mapped, once it matches its seal (entry_seal.BrokenSealError, a ValueError,
    otherwise). The seal is checked on the same open file that is then mapped: a rename in between changes
    nothing."""
    import mmap

    import pyarrow as pa

    fd = os.open(path, os.O_RDONLY)
    try:
        size = sealed_size(fd)
        if size == 0:
            raise NotCacheableError("the cache entry is empty")
        return pa.py_buffer(mmap.mmap(fd, size, access=mmap.ACCESS_READ))
    finally:
        os.close(fd)


def _entry_tables(entry: pa.Buffer) -> tuple[pa.Table, pa.Table | None]:
    """(the events table, the memory table or None) of a mapped entry: slices of one buffer, nothing copied."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    end = entry.size - len(_MEMORY_TRAILER)
    if end < _OFFSET.size or entry.slice(end).to_pybytes() != _MEMORY_TRAILER:
        return ipc.open_file(pa.BufferReader(entry)).read_all(), None
    (start,) = _OFFSET.unpack(entry.slice(end - _OFFSET.size, _OFFSET.size).to_pybytes())
    if not 0 < start < end - _OFFSET.size:
        raise NotCacheableError("the entry's memory table offset is out of range")
    events = ipc.open_file(pa.BufferReader(entry.slice(0, start))).read_all()
    memory = ipc.open_file(pa.BufferReader(entry.slice(start, end - _OFFSET.size - start))).read_all()
    memory.validate(full=True)
    return events, memory


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


class EntrySink:
    """Where the frame of a trace read in pieces is written (parsers.piece_merge.FrameSink): this cache's entry
    file, laid out by parsers.column_file and filled in place, under a temporary name until the open knows the
    content hash (commit), removed otherwise (discard). The Timeline returned is mapped from that file, as a cache
    hit is: the frame is never held in memory beside it. Anything that stops the entry (metadata that JSON cannot
    hold, an unwritable cache, a full disk) answers None: the frame is then built in memory as before."""

    def __init__(self, store: CacheStore) -> None:
        self.store = store
        self.path: Path | None = None

    def __call__(self, meta: TraceMeta, memory, specs: list[ColumnSpec], rows: int) -> _EntryTarget | None:
        import pyarrow as pa

        try:
            metadata = _schema_metadata(meta, [s.name for s in specs], memory)
            memory_table = memory_to_table(memory) if memory is not None else None
        except (NotCacheableError, pa.ArrowException, TypeError, ValueError):
            return None
        try:
            fd, name = self.store.temporary("timelines")
        except OSError:
            return None
        from ..parsers.column_file import ColumnFile

        self.path = Path(name)
        file = ColumnFile(fd, specs, rows, metadata)
        try:
            file.open()
        except (OSError, pa.ArrowException):
            file.close()
            os.close(fd)
            self.discard()
            return None
        return _EntryTarget(self, fd, file, memory_table)

    def commit(self, name: str) -> bool:
        """Give the written entry its name (atomically); False when nothing was written."""
        if self.path is None:
            return False
        placed = self.store.place("timelines", name, self.path)
        self.path = None
        return placed

    def discard(self) -> None:
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()
            self.path = None


class _EntryTarget:
    """One entry being written: the columns' arrays, then the memory table and the Timeline mapped back."""

    def __init__(self, sink: EntrySink, fd: int, file: ColumnFile, memory: pa.Table | None) -> None:
        self.sink, self.fd, self.file, self.memory = sink, fd, file, memory

    def array(self, name: str):
        return self.file.array(name)

    def finish(self) -> Timeline | None:
        import pyarrow as pa

        self.file.close()
        try:
            with open(self.fd, "r+b", closefd=True) as handle:
                handle.seek(self.file.end)
                handle.truncate()
                _append_memory(handle, self.memory)
                seal(handle)
            path = self.sink.path
            if path is None:
                return None
            mapped = pa.memory_map(str(path)).read_buffer()  # just written and sealed: mapped without the check
            table, memory = _entry_tables(mapped.slice(0, mapped.size - SEAL_BYTES))
            table.validate(full=True)
            return table_to_timeline(table, memory)
        except (OSError, pa.ArrowException, NotCacheableError, ValueError, KeyError, TypeError):
            self.sink.discard()
            return None


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

        sink = EntrySink(self.store)  # a trace read in pieces is written straight into its entry's file
        try:
            timeline = read_trace_file(
                self.path, self.limits, meanwhile=work, cached=self.is_cached, progress=progress, sink=sink
            )
            if timeline is None:  # the content has an entry: this file is a copy, or was touched
                digest = self._recorded_digest()
                found = load_timeline(self.store, digest, self.limits)
                if found is not None:
                    return digest, found
            elif self._recorded():
                digest = self._recorded_digest()
                if not sink.commit(_entry_name(digest, self.limits)):
                    save_timeline(self.store, digest, timeline, self.limits)  # a few hundredths of a second
                return digest, timeline
        finally:
            sink.discard()  # nothing once committed
        # The entry found was damaged (and is gone), or the file changed while read in pieces: read it whole, once.
        again = _Opening(self.path, self.limits, self.store)
        again.look_up = False
        timeline = read_trace_file(self.path, self.limits, cached=again.is_cached, whole=True)
        if timeline is None or again.digest is None:  # is_cached hashed the bytes, and never stops when not looking
            raise RuntimeError("the whole read of the file took no digest")
        save_timeline(self.store, again.digest.digest, timeline, self.limits)
        return again.digest.digest, timeline

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
