"""Decode a big Chrome-trace JSON in two processes, one half of the event list each.

Why: typed msgspec decoding plus column building is most of a big trace's load time and is
single-threaded; a forked child shares the file's bytes (copy-on-write) and decodes the second
half of the event array while this process decodes the first, so the load takes about half the
time on two cores. The child sends back compact columns (raw numpy buffers and a msgpack header,
no pickle), which are merged into the parent's column builder.

Where to cut is checked by parsing, not guessed: the cut is a ``}`` ``,`` ``{`` near the middle,
the part from the ``"traceEvents"`` key to the cut must parse as ``{"traceEvents": [e1, ..., ek]}``
with no other key, and the head before the key must parse as an object that the key continues.
Together these prove that the cut lies between two top-level events of the one traceEvents array,
so ``{"traceEvents": [`` + the rest is exactly the remaining events (and any keys after the array).
Anything else (a cut inside a string or a nested array, an unusual layout, an error in either half,
a child that dies) falls back to the one-process reader, which also gives the precise error message.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import signal
import struct

import msgspec
import numpy as np

from parsers.chrome_trace import _AnyEvent, _ColumnBuilder, _DeviceProps, _TraceDoc

MIN_SPLIT_BYTES = 48 << 20  # below this a fork costs more than it saves
CHUNK_EVENTS = 32_768  # structs turned into columns per step
_CUT = re.compile(rb"\}\s*,\s*\{")
_KEY = b'"traceEvents"'
_PREFIX = b'{"traceEvents":['
_INT_COLUMNS = ("ts", "dur", "pid", "tid", "device", "stream", "correlation", "external_id")
_CODE_COLUMNS = ("kind", "name", "input_dims")


class _FirstHalf(msgspec.Struct, forbid_unknown_fields=True):
    traceEvents: list[_AnyEvent]  # noqa: N815 - the file's key


class _SecondHalf(msgspec.Struct):
    traceEvents: list[_AnyEvent] | None = None  # noqa: N815
    deviceProperties: list[_DeviceProps] | None = None  # noqa: N815
    baseTimeNanoseconds: int | None = None  # noqa: N815
    schemaVersion: int | str | None = None  # noqa: N815
    traceName: str | None = None  # noqa: N815


_HEAD_DECODER = msgspec.json.Decoder(_TraceDoc)
_FIRST_DECODER = msgspec.json.Decoder(_FirstHalf)
_SECOND_DECODER = msgspec.json.Decoder(_SecondHalf)


class SplitNotPossibleError(Exception):
    """The split path could not be used; the caller reads the file in one process instead."""


def split_workers() -> int:
    """Processes to decode with: STEPSCOPE_PARSE_WORKERS (1 turns the split off), else 2 when there are 2+ CPUs."""
    raw = os.environ.get("STEPSCOPE_PARSE_WORKERS", "")
    if raw.strip().isdigit():
        return max(1, int(raw))
    return 2 if (os.cpu_count() or 1) >= 2 else 1


def find_cut(data: bytes | bytearray | memoryview) -> tuple[int, int] | None:
    """(position of the "traceEvents" key, position of a comma between two objects near the middle), or None."""
    key = bytes(data[: 1 << 20]).find(_KEY)  # Kineto writes the event list after a small head
    if key < 0:
        return None
    match = _CUT.search(data, len(data) // 2)
    if match is None or match.start() <= key:
        return None
    return key, match.start() + bytes(data[match.start() : match.end()]).index(b",")


def decode_in_two(data: bytes | bytearray) -> tuple[_TraceDoc, _ColumnBuilder, int]:
    """(the document's other fields, a column builder holding every event, the event count).

    Raises SplitNotPossibleError when the split is not possible or not provably at an event boundary.
    """
    if not hasattr(os, "fork") or len(data) < MIN_SPLIT_BYTES or split_workers() < 2:
        raise SplitNotPossibleError("not worth splitting")
    if not bytes(data[:64]).lstrip().startswith(b"{"):
        raise SplitNotPossibleError("not a JSON object")
    cut = find_cut(data)
    if cut is None:
        raise SplitNotPossibleError("no cut found")
    key, comma = cut
    try:
        head = _HEAD_DECODER.decode(b"".join((memoryview(data)[:key], b'"traceEvents":[]}')))
    except (msgspec.DecodeError, RecursionError):
        raise SplitNotPossibleError("the head before traceEvents is not an object prefix") from None
    read_fd, write_fd = os.pipe()
    with contextlib.suppress(OSError):  # a bigger pipe buffer: fewer round trips for the child's columns
        fcntl.fcntl(write_fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    pid = os.fork()
    if pid == 0:  # the child: decode the second half, send its columns, leave without cleanup handlers
        code = 1
        try:
            os.close(read_fd)
            _send(write_fd, *_second_half(data, comma))
            code = 0
        except BaseException:  # any failure: the parent sees a non-zero exit and falls back
            pass
        finally:
            os._exit(code)
    os.close(write_fd)
    try:
        builder, first_count = _first_half(data, key, comma)
        payload = _receive(read_fd)
        _, status = os.waitpid(pid, 0)
        pid = 0
        if status != 0 or payload is None:
            raise SplitNotPossibleError("the second half could not be decoded")
        tail_doc, second_count = _merge(builder, payload)
    except BaseException:
        if pid:
            _stop(pid)
        raise
    finally:
        os.close(read_fd)
    for field in ("deviceProperties", "baseTimeNanoseconds", "schemaVersion", "traceName"):
        if getattr(tail_doc, field) is not None:  # keys after the event list, as a one-pass decode would see them
            setattr(head, field, getattr(tail_doc, field))
    if builder.duration_events == 0:
        raise SplitNotPossibleError("no duration events")  # the one-process reader says what the file holds instead
    head.traceEvents = None
    return head, builder, first_count + second_count


def _stop(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def _first_half(data: bytes | bytearray, key: int, comma: int) -> tuple[_ColumnBuilder, int]:
    try:
        doc = _FIRST_DECODER.decode(b"".join((b"{", memoryview(data)[key:comma], b"]}")))
    except (msgspec.DecodeError, RecursionError):  # ValidationError included: the cut is not between events
        raise SplitNotPossibleError("the cut is not between two events") from None
    return _columns(doc.traceEvents)


def _second_half(data: bytes | bytearray, comma: int) -> tuple[_SecondHalf, _ColumnBuilder, int]:
    doc = _SECOND_DECODER.decode(b"".join((_PREFIX, memoryview(data)[comma + 1 :])))
    events = doc.traceEvents or []
    doc.traceEvents = None
    builder, count = _columns(events)
    return doc, builder, count


def _columns(events: list) -> tuple[_ColumnBuilder, int]:
    """Columns from decoded structs, freeing them chunk by chunk from the end (no list shifting)."""
    count = len(events)
    builder = _ColumnBuilder()
    while events:
        start = (len(events) - 1) // CHUNK_EVENTS * CHUNK_EVENTS
        builder.add_batch(events[start:])
        del events[start:]
    return builder, count


# --- the child's columns over a pipe: a msgpack header, then the raw column buffers --------------------------


def _send(fd: int, doc: _SecondHalf, builder: _ColumnBuilder, count: int) -> None:
    columns = {c: np.ascontiguousarray(np.concatenate(v[::-1]) if v else np.zeros(0, np.int64), dtype=np.int64)
               for c, v in builder.parts.items()}
    header = {
        "doc": msgspec.json.encode(doc),
        "count": count,
        "duration_events": builder.duration_events,
        "columns": [[c, len(a)] for c, a in columns.items()],
        "kinds": list(builder.kinds),
        "names": list(builder.names),
        "dims": list(builder.dims),
        "string_ids": [[s, i] for s, i in builder.string_ids.items()],
        "process_names": [[p, n] for p, n in builder.process_names.items()],
        "thread_names": [[p, t, n] for (p, t), n in builder.thread_names.items()],
        "sort_order": [[p, t, o] for (p, t), o in builder.sort_order.items()],
        "unknown_categories": dict(builder.unknown_categories),
        "skipped": dict(builder.skipped),
    }
    blob = msgspec.msgpack.encode(header)
    with os.fdopen(fd, "wb", buffering=0) as out:
        _write_all(out, struct.pack("<Q", len(blob)) + blob)
        for array in columns.values():
            _write_all(out, memoryview(array).cast("B"))


def _write_all(out, data) -> None:
    view = memoryview(data)
    while view:
        view = view[out.write(view) :]


def _receive(fd: int) -> tuple[dict, dict[str, np.ndarray]] | None:
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 22)
        if not chunk:
            break
        chunks.append(chunk)
    raw = b"".join(chunks)
    del chunks
    if len(raw) < 8:
        return None
    (size,) = struct.unpack_from("<Q", raw)
    try:
        header = msgspec.msgpack.decode(raw[8 : 8 + size])
    except msgspec.DecodeError:
        return None
    offset, columns = 8 + size, {}
    for name, length in header["columns"]:
        end = offset + 8 * length
        if end > len(raw):
            return None
        columns[name] = np.frombuffer(raw, dtype=np.int64, count=length, offset=offset)
        offset = end
    return header, columns


def _merge(builder: _ColumnBuilder, payload: tuple[dict, dict[str, np.ndarray]]) -> tuple[_SecondHalf, int]:
    """Fold the child's columns into the parent's builder: remap its string codes and string ids to the parent's."""
    header, columns = payload
    tables = {"kind": builder.kinds, "name": builder.names, "input_dims": builder.dims}
    lists = {"kind": header["kinds"], "name": header["names"], "input_dims": header["dims"]}
    for col in _CODE_COLUMNS:
        table = tables[col]
        remap = np.fromiter((table.setdefault(s, len(table)) for s in lists[col]), np.int64, len(lists[col]))
        codes = columns[col]
        columns[col] = remap[codes] if len(codes) else codes
    id_map = {
        child_id: builder.string_ids.setdefault(label, -(1 << 40) - len(builder.string_ids))
        for label, child_id in header["string_ids"]
    }
    for col in ("pid", "tid"):
        columns[col] = _remap_ids(columns[col], id_map)
    # The first half comes first in the file: its metadata wins, as in the one-process reader.
    for p, name in header["process_names"]:
        builder.process_names.setdefault(id_map.get(p, p), name)
    for p, t, name in header["thread_names"]:
        builder.thread_names.setdefault((id_map.get(p, p), id_map.get(t, t)), name)
    for p, t, order in header["sort_order"]:
        key = (id_map.get(p, p), None if t is None else id_map.get(t, t))
        builder.sort_order.setdefault(key, order)
    builder.unknown_categories.update(header["unknown_categories"])
    builder.skipped.update(header["skipped"])
    builder.duration_events += header["duration_events"]
    for col, parts in builder.parts.items():
        parts.insert(0, columns[col])  # parts are kept last-first; the second half is last in the file
    return _SECOND_DECODER.decode(header["doc"]), header["count"]


def _remap_ids(values: np.ndarray, id_map: dict[int, int]) -> np.ndarray:
    changed = {k: v for k, v in id_map.items() if k != v}
    if not changed or not len(values):
        return values
    keys = np.array(sorted(changed), dtype=np.int64)
    targets = np.array([changed[k] for k in keys.tolist()], dtype=np.int64)
    pos = np.clip(np.searchsorted(keys, values), 0, len(keys) - 1)
    hit = keys[pos] == values
    return np.where(hit, targets[pos], values)
