"""Decode a big Chrome-trace JSON in pieces cut at event boundaries, the second half in a forked process.

Why: typed msgspec decoding plus column building is most of a big trace's load time and runs on one
core. Decoding the event array piece by piece (a few MB each) keeps only one piece of structs alive,
so memory stays near the file plus the columns, and needs no pass that splits the array into raw
slices first. A forked child shares the file's bytes (copy-on-write) and decodes the second half
while this process decodes the first; it sends back compact columns (raw numpy buffers and a msgpack
header, no pickle), merged into this process's column builder.

Where to cut is proved by parsing, not guessed. The head before the "traceEvents" key must parse as
an object that the key continues, and the key must be followed by ':' and '['; from there each piece
is the text up to a later '}' ',' '{' comma, and it must parse as a JSON array of events. A piece
that parses proves that its end comma lies between two top-level events of the array (a comma inside
a string or a nested value leaves the piece unterminated or unbalanced), so the next piece starts in
the same state. The last piece is decoded as '{"traceEvents":[' + the rest of the file, which also
yields any keys after the array. A piece that does not parse is extended to the next candidate comma
a few times (a cut inside a string); anything else (an error in the file, a child that dies) falls
back to the one-process reader, which also gives the precise error message.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import signal
import struct

import msgspec
import msgspec.structs
import numpy as np
from stepscope.parsers.chrome_trace import _AnyEvent, _ColumnBuilder, _TraceDoc
from stepscope.parsers.errors import TraceError

MIN_SPLIT_BYTES = 48 << 20  # below this the one-process reader is as fast
PIECE_BYTES = 8 << 20  # JSON text decoded at once: about 40k Kineto events
FIRST_SHARE = 0.46  # of the file decoded here: this process also merges and builds the frame
RETRIES = 3  # a piece that does not parse is extended to the next candidate cut this many times
_CUT = re.compile(rb"\}\s*,\s*\{")
_KEY = b'"traceEvents"'
_OPEN = re.compile(rb'"traceEvents"\s*:\s*\[')
_PREFIX = b'{"traceEvents":['
_CODE_COLUMNS = ("kind", "name", "input_dims")


# The document's keys after the event list, as the one-process reader's _TraceDoc reads them (whatever it reads).
_DOC_FIELDS = [f for f in msgspec.structs.fields(_TraceDoc) if f.name != "traceEvents"]
_Tail = msgspec.defstruct(
    "_Tail",
    [("traceEvents", list[_AnyEvent] | None, msgspec.field(default=None, name="traceEvents"))]
    + [(f.name, f.type, msgspec.field(default=None, name=f.encode_name)) for f in _DOC_FIELDS],
)


_HEAD_DECODER = msgspec.json.Decoder(_TraceDoc)
_PIECE_DECODER = msgspec.json.Decoder(list[_AnyEvent])
_TAIL_DECODER = msgspec.json.Decoder(_Tail)


class SplitNotPossibleError(Exception):
    """The piecewise path could not be used; the caller reads the file in one process instead."""


class _PieceBuilder(_ColumnBuilder):
    """Pieces arrive in file order (the base builder expects batches last-first): columns are put
    in the base order at the end, and metadata events are read once, in file order, at the end."""

    def __init__(self) -> None:
        super().__init__()
        self.metadata_events: list = []

    def _read_metadata(self, evs: list) -> None:
        self.metadata_events.extend(evs)

    def finish(self) -> None:
        for parts in self.parts.values():
            parts.reverse()
        super()._read_metadata(self.metadata_events)
        self.metadata_events = []


def split_workers() -> int:
    """Processes to decode with: STEPSCOPE_PARSE_WORKERS (1: no fork), else 2 when there are 2+ CPUs."""
    raw = os.environ.get("STEPSCOPE_PARSE_WORKERS", "")
    if raw.strip().isdigit():
        return max(1, int(raw))
    return 2 if (os.cpu_count() or 1) >= 2 else 1


def _next_cut(data, start: int, stop: int | None) -> int | None:
    """A candidate comma between two objects at or after `start` (and before `stop`), or None."""
    match = _CUT.search(data, start, len(data) if stop is None else stop)
    if match is None:
        return None
    return match.start() + bytes(data[match.start() : match.end()]).index(b",")


def _array_start(data) -> tuple[int, _TraceDoc]:
    """The offset just after the '[' of the top-level traceEvents array, proved as the module says, and
    the document's keys before it."""
    key = bytes(data[: 1 << 20]).find(_KEY)  # Kineto writes the event list after a small head
    opening = _OPEN.match(data, key) if key >= 0 else None
    if opening is None:
        raise SplitNotPossibleError("no traceEvents key near the start")
    try:
        head = _HEAD_DECODER.decode(b"".join((memoryview(data)[:key], b'"traceEvents":[]}')))
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        raise SplitNotPossibleError("the head before traceEvents is not an object prefix") from None
    return opening.end(), head


def _decode_range(data, start: int, stop: int | None, builder: _PieceBuilder) -> tuple[int, _Tail | None]:
    """Decode the events from `start` (just after '[' or a proved comma) to the comma `stop` (None: to the end).

    Returns (events decoded, the document's keys after the array when the range runs to the end).
    """
    count = 0
    while True:
        cut = stop
        if stop is None or start + PIECE_BYTES < stop:
            cut = _next_cut(data, start + PIECE_BYTES, stop) or stop
        for _ in range(RETRIES + 1):
            if cut is None:  # the last piece: the rest of the file, with what follows the array
                try:
                    tail = _TAIL_DECODER.decode(b"".join((_PREFIX, memoryview(data)[start:])))
                except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
                    raise SplitNotPossibleError("the last piece does not parse") from None
                events, tail.traceEvents = tail.traceEvents or [], None
                _add(builder, events)
                return count + len(events), tail
            try:
                events = _PIECE_DECODER.decode(b"".join((b"[", memoryview(data)[start:cut], b"]")))
                break
            except UnicodeDecodeError:  # invalid UTF-8: the one-process reader replaces it and counts it
                raise SplitNotPossibleError("invalid UTF-8 in the events") from None
            except (msgspec.DecodeError, RecursionError):  # ValidationError included
                if cut == stop:
                    raise SplitNotPossibleError("the cut between the halves is not between two events") from None
                cut = _next_cut(data, cut + 1, stop) or stop
        else:
            raise SplitNotPossibleError("a piece does not parse")
        count += len(events)
        _add(builder, events)
        start = cut + 1
        if cut == stop:
            return count, None


def _add(builder: _PieceBuilder, events: list) -> None:
    if events:
        try:
            builder.add_batch(events)
        except TraceError:  # a value out of range: the one-process reader says which events, with file offsets
            raise SplitNotPossibleError("a value out of range") from None


def decode_in_two(box: list[bytes | bytearray]) -> tuple[_TraceDoc, _ColumnBuilder, int]:
    """(the document's other fields, a column builder holding every event, the event count).

    `box` holds the file's bytes, and should hold the only reference: once every event is decoded
    the box is emptied, so the bytes are freed before the frame is built. Raises
    SplitNotPossibleError (the box still full) when the file is small or its layout cannot be proved.
    """
    data = box[0]
    if len(data) < MIN_SPLIT_BYTES:
        raise SplitNotPossibleError("not worth splitting")
    if not bytes(data[:64]).lstrip().startswith(b"{"):
        raise SplitNotPossibleError("not a JSON object")
    first, head = _array_start(data)
    builder = _PieceBuilder()
    middle = _next_cut(data, max(first, int(len(data) * FIRST_SHARE)), None)
    if split_workers() < 2 or not hasattr(os, "fork") or middle is None:
        count, tail = _decode_range(data, first, None, builder)
        if builder.duration_events == 0:
            raise SplitNotPossibleError("no duration events")  # the one-process reader says what the file holds
        box.clear()
        return _finish(head, builder, count, tail)
    read_fd, write_fd = os.pipe()
    with contextlib.suppress(OSError):  # a bigger pipe buffer: fewer round trips for the child's columns
        fcntl.fcntl(write_fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    pid = os.fork()
    if pid == 0:  # the child: decode the second half, send its columns, leave without cleanup handlers
        code = 1
        try:
            os.close(read_fd)
            child = _PieceBuilder()
            child_count, tail = _decode_range(data, middle + 1, None, child)
            child.finish()
            _send(write_fd, tail, child, child_count)
            code = 0
        except BaseException:  # any failure: the parent sees a non-zero exit and falls back
            pass
        finally:
            os._exit(code)
    os.close(write_fd)
    try:
        count, _ = _decode_range(data, first, middle, builder)
        builder.finish()
        payload = _receive(read_fd)
        _, status = os.waitpid(pid, 0)
        pid = 0
        if status != 0 or payload is None:
            raise SplitNotPossibleError("the second half could not be decoded")
        if builder.duration_events + payload[0]["duration_events"] == 0:
            raise SplitNotPossibleError("no duration events")
        del data
        box.clear()  # every event is decoded: the file's bytes can go before the columns are merged
        tail, second_count = _merge(builder, payload)
    except BaseException:
        if pid:
            _stop(pid)
        raise
    finally:
        os.close(read_fd)
    return _finish(head, builder, count + second_count, tail, finished=True)


def _finish(head: _TraceDoc, builder: _PieceBuilder, count: int, tail: _Tail | None, finished: bool = False) -> tuple:
    if not finished:
        builder.finish()
    for field in _DOC_FIELDS:
        if tail is not None and getattr(tail, field.name) is not None:  # keys after the list win, as in one pass
            setattr(head, field.name, getattr(tail, field.name))
    head.traceEvents = None
    return head, builder, count


def _stop(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


# --- the child's columns over a pipe: a msgpack header, then the raw column buffers --------------------------


def _send(fd: int, doc: _Tail, builder: _ColumnBuilder, count: int) -> None:
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
        "invalid_utf8": builder.invalid_utf8,
        "wide_ids": builder.wide_ids,
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
    raw = bytearray()
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        raw += chunk
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


def _merge(builder: _ColumnBuilder, payload: tuple[dict, dict[str, np.ndarray]]) -> tuple[_Tail, int]:
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
    builder.unknown_categories.update(header["unknown_categories"])  # Counter.update adds the counts
    builder.skipped.update(header["skipped"])
    builder.duration_events += header["duration_events"]
    builder.invalid_utf8 += header["invalid_utf8"]
    builder.wide_ids += header["wide_ids"]
    for col, parts in builder.parts.items():
        parts.insert(0, columns[col])  # parts are kept last-first; the second half is last in the file
    return _TAIL_DECODER.decode(header["doc"]), header["count"]


def _remap_ids(values: np.ndarray, id_map: dict[int, int]) -> np.ndarray:
    changed = {k: v for k, v in id_map.items() if k != v}
    if not changed or not len(values):
        return values
    keys = np.array(sorted(changed), dtype=np.int64)
    targets = np.array([changed[k] for k in keys.tolist()], dtype=np.int64)
    pos = np.clip(np.searchsorted(keys, values), 0, len(keys) - 1)
    hit = keys[pos] == values
    return np.where(hit, targets[pos], values)
