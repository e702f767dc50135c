"""Parsed Timelines cached as Arrow IPC files, memory-mapped back, keyed by the trace's content.

Why Arrow IPC: the frame is columns of int64 and categoricals; an IPC file maps straight into numpy
arrays (no copy, no decode), so reopening a 1M-event trace costs milliseconds. Categoricals are
stored as dictionary arrays (codes + the distinct strings once); the metadata (TraceMeta) is JSON in
the schema's metadata. The numpy columns of a loaded frame are read-only views of the mapped file,
which suits a Timeline (treated as immutable; analysis derives new frames).

What is cached is the reader's output before the run.json beside the file is attached: that file
may change on its own, so it is read fresh each time (it is small).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..parsers import Timeline, TraceError
from ..parsers.limits import ReadLimits, decode_container, read_file_bytes, read_trace_bytes
from ..parsers.load import _parse, read_in_pieces
from ..parsers.run_sidecar import attach_run_json
from ..parsers.split_decode import while_decoding
from ..parsers.timeline import DeviceInfo, TraceMeta
from .keys import (
    PARSER_VERSION,
    hash_bytes,
    hash_file,
    known_digest,
    limits_tag,
    remember_digest,
    timeline_entry_name,
)
from .store import CacheStore

if TYPE_CHECKING:
    import pyarrow as pa

_META_KEY = b"stepscope"


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
        "devices": [[d.ordinal, d.name, d.sm_count, d.memory_bytes] for d in meta.devices.values()],
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
    meta = {"parser_version": PARSER_VERSION, "meta": meta_to_json(timeline.meta), "columns": list(frame.columns)}
    schema = pa.schema(fields, metadata={_META_KEY: json.dumps(meta).encode()})
    return pa.Table.from_arrays(arrays, schema=schema)


def table_to_timeline(table: pa.Table) -> Timeline:
    import pandas as pd
    import pyarrow as pa

    raw = json.loads((table.schema.metadata or {}).get(_META_KEY, b"null"))
    if not isinstance(raw, dict) or raw.get("parser_version") != PARSER_VERSION:
        raise NotCacheableError("another parser version")
    data = {}
    for name in raw["columns"]:
        col = table.column(name)
        chunk = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
        if pa.types.is_dictionary(chunk.type):
            codes = chunk.indices.to_numpy(zero_copy_only=True)
            data[name] = pd.Categorical.from_codes(codes, categories=chunk.dictionary.to_pylist(), validate=False)
        else:
            data[name] = chunk.to_numpy(zero_copy_only=True)
    frame = pd.DataFrame(data, copy=False)
    return Timeline(events=frame, meta=meta_from_json(raw["meta"]))


def _entry_name(digest: str, limits: ReadLimits | None) -> str:
    limits = limits or ReadLimits.from_env()
    return timeline_entry_name(
        digest, limits_tag([limits.max_file_bytes, limits.max_decompressed_bytes, limits.max_events])
    )


def save_timeline(store: CacheStore, digest: str, timeline: Timeline, limits: ReadLimits | None = None) -> bool:
    """Write the Timeline's entry (atomically), for the limits it was read under; False when it cannot be cached."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    try:
        table = timeline_to_table(timeline)
    except (NotCacheableError, pa.ArrowException, TypeError, ValueError):
        return False

    def write(handle) -> None:
        with ipc.new_file(handle, table.schema) as writer:
            writer.write_table(table)

    return store.put("timelines", _entry_name(digest, limits), write) is not None


def load_timeline(store: CacheStore, digest: str, limits: ReadLimits | None = None) -> Timeline | None:
    """The cached Timeline (memory-mapped) read under these limits, or None when absent; a damaged or foreign
    entry is removed."""
    name = _entry_name(digest, limits)
    path = store.get("timelines", name)
    if path is None:
        return None
    import pyarrow as pa  # only for a hit: a miss (a first open) does not pay for the import
    import pyarrow.ipc as ipc

    try:
        table = ipc.open_file(pa.memory_map(str(path))).read_all()
        table.validate(full=True)  # codes within their dictionaries, offsets in bounds
        return table_to_timeline(table)
    except (OSError, pa.ArrowException, NotCacheableError, ValueError, KeyError, TypeError, RecursionError):
        store.discard("timelines", name)  # RecursionError: metadata JSON nested too deep for the decoder
        return None


def load_trace_cached(
    path: str | os.PathLike,
    limits: ReadLimits | None = None,
    use_cache: bool = True,
    store: CacheStore | None = None,
) -> Timeline:
    """Like parsers.load_trace, through the cache: a hit maps the Arrow file, a miss parses and stores.
    Raises TraceError like load_trace."""
    path = Path(path)
    if not use_cache:
        from ..parsers import load_trace

        return load_trace(path, limits)
    return open_trace_cached(path, limits, store)[1]


def open_trace_cached(
    path: str | os.PathLike,
    limits: ReadLimits | None = None,
    store: CacheStore | None = None,
) -> tuple[str, Timeline]:
    """(the file's content hash, its Timeline) through the cache; see load_trace_cached.

    On a miss a big plain JSON trace is read in pieces by two processes (parsers.load.read_in_pieces) while
    this one hashes the file (blake3 on every core); content already cached under another name or stat stops
    that parse. Any other file is read once: its bytes are hashed, then parsed. The hash is recorded in the
    stat index only when the file is unchanged from before the first read to after the last one. A caller
    that keys its own caches by content gets the hash without reading the file again."""
    path = Path(path)
    store = store or CacheStore()
    limits = limits or ReadLimits.from_env()
    known = known_digest(store, path)
    if known is not None:
        cached = load_timeline(store, known, limits)
        if cached is not None:
            return known, attach_run_json(cached, path)
    found = _read_in_pieces_hashing(path, limits, store)
    if found is not None:
        return found[0], attach_run_json(found[1], path)
    raw, before = _read_raw(path, limits)
    if known is not None and known == known_digest(store, path, before):
        digest = known  # the stat index knows this exact file state (taken before the read): no second hash
    else:
        digest = hash_bytes(raw)
        remember_digest(store, path, digest, before)
    cached = load_timeline(store, digest, limits)  # the same content under another name or an older stat
    if cached is None:
        owned = [decode_container(raw, limits)]
        del raw
        cached = _parse(owned, limits)  # the reader drops the bytes as soon as it can
        save_timeline(store, digest, cached, limits)  # a few hundredths of a second: pyarrow came with pandas
    return digest, attach_run_json(cached, path)


class _ContentCachedError(Exception):
    """The file's content already has an entry: the parse in progress is not needed."""

    def __init__(self, digest: str) -> None:
        super().__init__(digest)
        self.digest = digest


def _read_in_pieces_hashing(path: Path, limits: ReadLimits, store: CacheStore) -> tuple[str, Timeline] | None:
    """(hash, Timeline) of a big plain JSON file read in pieces, from the parse or from the cache; None when the
    file is not read that way or changed while it was read (the caller then reads it whole)."""
    try:
        before = os.stat(os.path.realpath(path))
    except OSError:
        return None
    hashed: list[str] = []

    def hash_meanwhile() -> None:  # runs in this process while the forked child decodes
        hashed.append(hash_file(path))
        if store.get("timelines", _entry_name(hashed[0], limits)) is not None:
            raise _ContentCachedError(hashed[0])

    try:
        with while_decoding(hash_meanwhile):
            timeline = read_in_pieces(path, limits)
    except _ContentCachedError as known:
        timeline = load_timeline(store, known.digest, limits)
        if timeline is None:  # the entry was damaged and is gone: read the file whole
            return None
        remember_digest(store, path, known.digest, before)
        return known.digest, timeline
    except OSError:
        return None
    if timeline is None:
        return None
    digest = hashed[0] if hashed else hash_file(path)  # no child was forked: the hash was not taken meanwhile
    if not remember_digest(store, path, digest, before):
        return None  # the file changed: the hash and the pieces may be of different contents
    save_timeline(store, digest, timeline, limits)
    return digest, timeline


def parse_bytes_cached(data: bytes, limits: ReadLimits | None = None, store: CacheStore | None = None) -> Timeline:
    """An upload's Timeline through the cache (keyed by the bytes as uploaded)."""
    store = store or CacheStore()
    limits = limits or ReadLimits.from_env()
    digest = hash_bytes(data)
    cached = load_timeline(store, digest, limits)
    if cached is None:
        cached = _parse([decode_container(bytes(data), limits)], limits)
        save_timeline(store, digest, cached, limits)
    return cached


def _read_raw(path: Path, limits: ReadLimits) -> tuple[bytes, os.stat_result]:
    """The file's bytes as stored and its stat before reading; the limits' errors come from read_trace_bytes."""
    try:
        before = os.stat(os.path.realpath(path))
        if before.st_size <= limits.max_file_bytes and path.is_file():
            return read_file_bytes(path, limits.max_file_bytes), before
    except OSError:
        pass
    read_trace_bytes(path, limits)  # raises the one-line TraceError for what is wrong
    raise TraceError(f"cannot read {path.name}")  # it became readable in between: treat as a failure
