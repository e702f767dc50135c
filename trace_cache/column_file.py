"""The cache's column file: a Timeline as an Arrow IPC file, written with pyarrow's IPC writer and read back
memory-mapped (trace_cache/timelines.py keeps these files by content).

Why Arrow IPC: the frame is columns of int64 and categoricals; an IPC file maps straight into numpy arrays (no copy,
no decode), so reopening a 1M-event trace costs milliseconds. Categoricals are stored as dictionary arrays (codes +
the distinct strings once); the metadata (TraceMeta) is JSON in the schema's metadata. The numpy columns of a loaded
frame are read-only views of the mapped file, which suits a Timeline (treated as immutable).

A Timeline with a memory table (parsers.memory_table) has a second table of another length: the file is then the
events' IPC file, the memory table's IPC file, the offset of the second and a 16-byte trailer, and both are mapped
back from the one file (`entry_tables`). Every file ends with a seal (entry_seal): a changed byte is a miss.

The seal says an entry is whole, not whose it is: the schema's metadata also holds the name the entry was written
under (the trace's content hash, the parser version and limits), and a read under another name is a miss, so two
entries swapped on disk never give one trace the other's Timeline. The metadata's JSON is checked by its shape
(META_SHAPE) before it is used: valid JSON of another shape (a list, a number, a field of another type, a missing
key) is a damaged entry, never an internal error or a wrong value later in the analysis.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import TYPE_CHECKING

from stepscope.parsers import Timeline
from stepscope.parsers.memory_table import MEMORY_COLUMNS
from stepscope.parsers.timeline import DeviceInfo, TraceMeta
from .entry_seal import SEAL_BYTES, SealingWriter, sealed_size
from .keys import PARSER_VERSION
from .results import NULL, fits

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

_META_KEY = b"stepscope"
_MEMORY_TRAILER = b"stepscope-memory"  # the file's last 16 bytes when a memory table follows the events
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


def timeline_to_table(timeline: Timeline, key: str) -> pa.Table:
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
    schema = pa.schema(fields, metadata=_schema_metadata(timeline.meta, list(frame.columns), timeline.memory, key))
    return pa.Table.from_arrays(arrays, schema=schema)


def _schema_metadata(meta: TraceMeta, columns: list[str], memory: pd.DataFrame | None, key: str) -> dict[bytes, bytes]:
    """What an entry's schema says besides its columns: the parser version, the entry's name (its key), the
    Timeline's meta, the columns' order and the memory table's length."""
    raw = {
        "parser_version": PARSER_VERSION,
        "entry": key,
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


_DEVICE = [(int, str, NULL)]  # ordinal, name, SMs, memory, compute major/minor, warp size (ints or null)
META_SHAPE = {
    "source_format": str,
    "event_count": int,
    "base_time_ns": (int, NULL),
    "devices": [_DEVICE],
    "device_keys": [int],
    "process_names": [[object]],
    "thread_names": [[object]],
    "sort_order": [[object]],
    "id_labels": [[object]],
    "unknown_categories": {"*": int},
    "skipped": {"*": int},
    "warnings": [str],
    "extra": dict,
}
_PAIRS = {"process_names": 2, "thread_names": 3, "sort_order": 3, "id_labels": 2}


def _fits_meta(meta: object) -> bool:
    """Whether an entry's stored meta has the shape meta_to_json writes (rows of the right length included)."""
    if not fits(meta, META_SHAPE) or not isinstance(meta, dict):
        return False
    if len(meta["devices"]) != len(meta["device_keys"]) or any(len(d) != 7 for d in meta["devices"]):
        return False
    return all(len(row) == width for key, width in _PAIRS.items() for row in meta[key])


def table_to_timeline(table: pa.Table, memory: pa.Table | None, key: str) -> Timeline:
    """The Timeline of an entry's tables, when its metadata is this parser's, names entry `key` and has the shape
    written; NotCacheableError otherwise."""
    raw = json.loads((table.schema.metadata or {}).get(_META_KEY, b"null"))
    if not isinstance(raw, dict) or raw.get("parser_version") != PARSER_VERSION:
        raise NotCacheableError("another parser version")
    if raw.get("entry") != key:
        raise NotCacheableError("the entry was written under another name (another trace's, or other limits)")
    if not _fits_meta(raw.get("meta")) or not fits(raw.get("columns"), [str]):
        raise NotCacheableError("the entry's metadata is not of the shape written")
    if not (raw.get("memory_rows") is None or fits(raw["memory_rows"], int)):
        raise NotCacheableError("the entry's memory table length is not a count")
    frame = frame_of_table(table, raw["columns"])
    rows = raw.get("memory_rows")
    if (rows is None) != (memory is None):
        raise NotCacheableError("the entry's memory table is missing or unexpected")
    memory_frame = table_to_memory(memory, rows) if memory is not None else None
    return Timeline(events=frame, meta=meta_from_json(raw["meta"]), memory=memory_frame)


def write_entry(handle, timeline: Timeline, *, key: str) -> None:
    """The Timeline's column file into an open binary file (the store's temporary, placed whole after): the events'
    IPC file, the memory table's, the seal; `key` is the entry's name, kept inside it (see the module). Raises
    NotCacheableError when the Timeline holds what Arrow/JSON cannot hold exactly."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    try:
        table = timeline_to_table(timeline, key)
        memory = memory_to_table(timeline.memory) if timeline.memory is not None else None
    except (pa.ArrowException, TypeError, ValueError) as exc:
        raise NotCacheableError(str(exc)) from None
    sink = SealingWriter(handle)
    with ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    del table  # its arrays are the frame's own (no copy): nothing to free but the references
    _append_memory(sink, memory)
    sink.seal()


def map_written(handle, *, key: str) -> Timeline:
    """The Timeline of the entry write_entry just wrote to `handle` (still open), mapped from that same file.

    Why no seal check or full validation, which read_entry does: these are this process's own bytes, in a private
    file it has not yet placed, so checking them would only read hundreds of MB back for nothing."""
    import mmap

    import pyarrow as pa

    handle.flush()
    content = pa.py_buffer(mmap.mmap(handle.fileno(), handle.tell() - SEAL_BYTES, access=mmap.ACCESS_READ))
    table, memory = entry_tables(content)
    return table_to_timeline(table, memory, key)


def read_entry(path: Path, *, key: str) -> Timeline:
    """The Timeline of a column file, memory-mapped, once it matches its seal, was written under `key` and its
    tables are valid. Raises OSError, pyarrow.ArrowException, NotCacheableError, ValueError, KeyError, TypeError or
    RecursionError (metadata JSON nested too deep) for a damaged or foreign file."""
    table, memory = entry_tables(_mapped_content(path))
    table.validate(full=True)  # codes within their dictionaries, offsets in bounds
    return table_to_timeline(table, memory, key)


def _append_memory(handle, memory: pa.Table | None) -> None:
    """The memory table's IPC file after the events', then where it starts and the trailer (see _entry_tables)."""
    import pyarrow.ipc as ipc

    if memory is not None:
        start = handle.tell()
        with ipc.new_file(handle, memory.schema) as writer:
            writer.write_table(memory)
        handle.write(_OFFSET.pack(start) + _MEMORY_TRAILER)


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


def entry_tables(entry: pa.Buffer) -> tuple[pa.Table, pa.Table | None]:
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


def frame_of_table(table: pa.Table, columns: list[str]) -> pd.DataFrame:
    """The frame of an IPC table read from a mapping: numpy views of its buffers (no copy), dictionaries as
    categoricals (codes in the file's type)."""
    import pandas as pd
    import pyarrow as pa

    data = {}
    for name in columns:
        col = table.column(name)
        chunk = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
        if pa.types.is_dictionary(chunk.type):
            codes = chunk.indices.to_numpy(zero_copy_only=True)
            data[name] = pd.Categorical.from_codes(codes, categories=chunk.dictionary.to_pylist(), validate=False)
        else:
            data[name] = chunk.to_numpy(zero_copy_only=True)
    return pd.DataFrame(data, copy=False)
