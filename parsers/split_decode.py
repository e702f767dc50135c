"""Decode a big Chrome-trace JSON in pieces cut at event boundaries, shared with a forked process.

Why: typed msgspec decoding plus column building is most of a big trace's load time and runs on one
core. The event array is cut into pieces of a few MB; this process and a forked child take pieces
from a shared queue (a pipe holding the piece numbers), so the work balances itself even while this
process spends time on other things (importing pandas for the frame, say). Each piece becomes its
own small set of columns; only one piece of structs is alive at a time in each process, so memory
stays near the file plus the columns. The child shares the file's bytes (copy-on-write) and sends its
pieces' columns back as raw numpy buffers behind a msgpack header (no pickle).

Where to cut is proved by parsing, not guessed. The head before the "traceEvents" key must parse as
an object that the key continues, and the key must be followed by ':' and '['. Each piece ends at a
candidate '}' ',' '{' comma and must parse as a JSON array of events. A piece that starts at a proven
boundary and parses proves that its end comma lies between two top-level events (a comma inside a
string or a nested value leaves the piece unterminated or unbalanced), so the next piece starts at a
proven boundary too: the pieces are accepted in file order, from the '[' on. A piece that does not
parse is joined to the pieces after it (their own results, from an unproven start, are dropped) a few
times; anything else (an error in the file, a value out of range, a child that dies) falls back to
the one-process reader, which also gives the precise error message. The last piece is decoded as
'{"traceEvents":[' + the rest of the file, which also yields any keys after the array.

A big plain file is not read whole: each process reads the pieces it takes straight from the file
(parsers.file_pieces), so the reading is shared too. A buffer already in memory (an upload, a gunzipped
file) is decoded in place when writable: the bytes just before and after a piece are set to '[' and ']'
for the decode and put back after, so no piece is copied.
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import signal
import struct
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import msgspec
import msgspec.structs

from ..contracts.safe_read import open_regular
from .errors import TraceError
from .file_pieces import FileChangedError, FileSource
from .kineto_schema import _AnyEvent, _TraceDoc

if TYPE_CHECKING:
    import numpy as np

    from .chrome_trace import _ColumnBuilder

MIN_SPLIT_BYTES = 16 << 20  # below this the one-process reader is as fast
PIECE_BYTES = 8 << 20  # JSON text decoded at once: about 40k Kineto events
HEAD_BYTES = (1 << 20) + 4096  # the traceEvents key is looked for in the first MB
MAX_PIECES = 1024  # piece numbers (4 bytes each) must fit the queue pipe in one atomic write
RETRIES = 3  # a piece that does not parse is joined to up to this many following pieces
_CUT = re.compile(rb"\}\s*,\s*\{")
_KEY = b'"traceEvents"'
_OPEN = re.compile(rb'"traceEvents"\s*:\s*\[')
_PREFIX = b'{"traceEvents":['
_KEY_AGAIN = re.compile(rb'"traceEvents"\s*:')
_CODE_TABLES = (("kind", "kinds"), ("name", "names"), ("input_dims", "dims"))  # column, its builder table
_OPEN_BRACKET, _CLOSE_BRACKET = ord("["), ord("]")


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


def split_workers() -> int:
    """Processes to decode with: STEPSCOPE_PARSE_WORKERS (1: no fork), else 2 when there are 2+ CPUs."""
    raw = os.environ.get("STEPSCOPE_PARSE_WORKERS", "")
    if raw.strip().isdigit():
        return max(1, int(raw))
    return 2 if (os.cpu_count() or 1) >= 2 else 1


def _next_cut(data, start: int) -> int | None:
    """A candidate comma between two objects at or after `start` in a buffer, or None."""
    match = _CUT.search(data, start)
    if match is None:
        return None
    return match.start() + bytes(data[match.start() : match.end()]).index(b",")


def _array_start(head_bytes: bytes) -> tuple[int, _TraceDoc]:
    """The offset just after the '[' of the top-level traceEvents array, proved as the module says, and
    the document's keys before it, from the file's first HEAD_BYTES."""
    key = head_bytes.find(_KEY, 0, 1 << 20)  # Kineto writes the event list after a small head
    opening = _OPEN.match(head_bytes, key) if key >= 0 else None
    if opening is None:
        raise SplitNotPossibleError("no traceEvents key near the start")
    try:
        head = _HEAD_DECODER.decode(b"".join((head_bytes[:key], b'"traceEvents":[]}')))
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        raise SplitNotPossibleError("the head before traceEvents is not an object prefix") from None
    return opening.end(), head


def _plan(data, first: int) -> list[tuple[int, int | None]]:
    """(start, end comma) of each piece; the last one's end is None (it runs to the end of the file).

    The last pieces get smaller (a quarter of what is left, down to a quarter piece), so the two processes
    run out of work at about the same time rather than one waiting for the other's last full piece."""
    size = max(PIECE_BYTES, (len(data) - first) // (MAX_PIECES - 64) + 1)  # the smaller last ones fit in 64
    pieces, start = [], first
    while True:
        step = max(size // 4, min(size, (len(data) - start) // 4))
        if start + step >= len(data):
            cut = None
        elif isinstance(data, FileSource):
            cut = data.next_cut(_CUT, start + step)
        else:
            cut = _next_cut(data, start + step)
        pieces.append((start, cut))
        if cut is None:
            return pieces
        start = cut + 1


class _Piece:
    """One decoded stretch of events: its own small column builder, event count and (last piece) the doc's tail."""

    __slots__ = ("builder", "count", "tail")

    def __init__(self, builder: _ColumnBuilder, count: int, tail=None) -> None:
        self.builder, self.count, self.tail = builder, count, tail


def _decode(data, start: int, stop: int | None) -> _Piece | None:
    """The events from `start` (just after '[' or a proven comma) to the comma `stop` (None: to the end of the
    file), or None when that text does not parse as events. Raises SplitNotPossibleError for what only the
    one-process reader handles (invalid UTF-8, values out of range)."""
    from .chrome_trace import _ColumnBuilder  # numpy: after the fork, in each process

    tail = None
    try:
        if isinstance(data, FileSource):  # the piece read from the file, between the bytes it needs
            if stop is None:
                tail = _TAIL_DECODER.decode(_single_event_list(data.framed(start, len(data), _PREFIX, b"")))
                events, tail.traceEvents = tail.traceEvents or [], None
            else:
                events = _PIECE_DECODER.decode(data.framed(start, stop, b"[", b"]"))
        elif stop is None:
            tail = _TAIL_DECODER.decode(_single_event_list(b"".join((_PREFIX, memoryview(data)[start:]))))
            events, tail.traceEvents = tail.traceEvents or [], None
        elif isinstance(data, bytearray):
            events = _decode_in_place(data, start, stop)
        else:
            events = _PIECE_DECODER.decode(b"".join((b"[", memoryview(data)[start:stop], b"]")))
    except UnicodeDecodeError:  # the one-process reader replaces invalid UTF-8 and counts it
        raise SplitNotPossibleError("invalid UTF-8 in the events") from None
    except (msgspec.DecodeError, RecursionError):  # ValidationError included
        return None
    builder = _ColumnBuilder()
    if events:
        try:
            builder.add_batch(events)
        except TraceError:  # a value out of range: the one-process reader says which events, with file offsets
            raise SplitNotPossibleError("a value out of range") from None
    return _Piece(builder, len(events), tail)


def _single_event_list(tail: bytes) -> bytes:
    """The last piece (the end of the event list and the document's last keys) when no second "traceEvents" key
    follows the list. A document with the key twice is read as json.load reads it, the last list winning, by
    the one-process reader (SplitNotPossibleError): the answer never depends on the file's size. Only this piece
    can hold a second list: any other is proven to parse as a list of events alone. (A "traceEvents" key nested
    in an event's args also sends the file there: slower, the same answer.)"""
    if _KEY_AGAIN.search(tail, len(_PREFIX)):
        raise SplitNotPossibleError("the document has a second traceEvents key")
    return tail


def _decode_in_place(data: bytearray, start: int, stop: int) -> list:
    """Decode data[start:stop] as an array without copying it: the byte before it (the '[' or a comma) and the
    comma after it are turned into brackets for the decode and put back after, so the caller's bytes end as
    they were (a forked child writes only its own copy-on-write pages)."""
    before, after = data[start - 1], data[stop]
    data[start - 1], data[stop] = _OPEN_BRACKET, _CLOSE_BRACKET
    try:
        return _PIECE_DECODER.decode(memoryview(data)[start - 1 : stop + 1])  # Raw args may still point into it
    finally:
        data[start - 1], data[stop] = before, after


def _take_pieces(data, pieces: list, numbers, max_events: int, publish=None) -> dict[int, _Piece | None]:
    """Decode the pieces whose numbers `numbers` yields (the shared queue, or all of them in one process).

    `publish(number, piece)`, when given (the child), hands each piece on as soon as it is decoded instead of
    keeping it."""
    done: dict[int, _Piece | None] = {}
    events = 0
    for i in numbers:
        piece = _decode(data, *pieces[i])
        events += piece.count if piece is not None else 0
        if events > max_events:  # the one-process reader counts them and words the error
            raise SplitNotPossibleError("over the event limit")
        if publish is None:
            done[i] = piece
        else:
            publish(i, piece)
    return done


def _queue(fd: int):
    """Piece numbers from the queue pipe until it is empty. Every number was written before the fork in one
    write, and a read of 4 bytes from a pipe holding them returns exactly one number to exactly one reader."""
    while True:
        raw = os.read(fd, 4)
        if len(raw) < 4:
            return
        yield struct.unpack("<I", raw)[0]


def decode_in_two(box: list[bytes | bytearray], max_events: int = 1 << 62) -> tuple[_TraceDoc, _ColumnBuilder, int]:
    """(the document's other fields, a column builder holding every event, the event count).

    `box` holds the file's bytes, and should hold the only reference: once every event is decoded
    the box is emptied, so the bytes are freed before the frame is built. Raises
    SplitNotPossibleError (the box still full) when the file is small or its layout cannot be proved.
    """
    data = box[0]
    head, ordered = _decode_pieces(data, bytes(data[:HEAD_BYTES]), max_events)
    del data
    result = _joined(head, ordered, max_events)
    box.clear()  # every event is decoded: the file's bytes can go before the frame is built
    return result


def decode_file_in_two(path: str | os.PathLike, max_events: int = 1 << 62) -> tuple[_TraceDoc, _ColumnBuilder, int]:
    """decode_in_two for a file on disk, read piece by piece by the processes that decode them (no whole-file
    buffer). Raises SplitNotPossibleError when the file is small, not a plain JSON object, changes size while
    it is read, or cannot be read or split; the caller then reads it whole (and gets the precise error)."""
    try:
        fd = open_regular(path)  # a regular file only (a FIFO swapped in after the stat would block)
    except OSError:
        raise SplitNotPossibleError("cannot open the file") from None
    try:
        source = FileSource(fd, os.fstat(fd).st_size)
        head, ordered = _decode_pieces(source, source.head(HEAD_BYTES), max_events)
        source.check_unchanged_size()
    except (OSError, FileChangedError) as exc:
        raise SplitNotPossibleError(f"the file could not be read in pieces: {exc}") from None
    finally:
        os.close(fd)
    return _joined(head, ordered, max_events)


def _decode_pieces(data, head_bytes: bytes, max_events: int) -> tuple[_TraceDoc, list[_Piece]]:
    """The document's keys before the events and the decoded pieces in file order (see the module).
    `data`: the bytes or the FileSource; `head_bytes`: its first HEAD_BYTES."""
    if len(data) < MIN_SPLIT_BYTES:
        raise SplitNotPossibleError("not worth splitting")
    if not head_bytes[:64].lstrip().startswith(b"{"):
        raise SplitNotPossibleError("not a JSON object")
    first, head = _array_start(head_bytes)
    pieces = _plan(data, first)
    with _no_garbage_collection():
        if split_workers() < 2 or not hasattr(os, "fork") or len(pieces) < 2:
            done = _take_pieces(data, pieces, range(len(pieces)), max_events)
        else:
            done = _decode_with_child(data, pieces, max_events)
        return head, _prove(data, pieces, done)


def _joined(head: _TraceDoc, ordered: list[_Piece], max_events: int) -> tuple[_TraceDoc, _ColumnBuilder, int]:
    builder, count, tail = _merge_all(ordered)
    if builder.duration_events == 0:
        raise SplitNotPossibleError("no duration events")  # the one-process reader says what the file holds
    if count > max_events:
        raise SplitNotPossibleError("over the event limit")
    for field in _DOC_FIELDS:
        if tail is not None and getattr(tail, field.name) is not None:  # keys after the list win, as in one pass
            setattr(head, field.name, getattr(tail, field.name))
    head.traceEvents = None
    return head, builder, count


@contextlib.contextmanager
def _no_garbage_collection() -> Iterator[None]:
    """The cycle collector paused while events are decoded: every piece allocates tens of thousands of
    containers (lists, structs' args) that trigger collections, none of which can find a cycle."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _decode_with_child(data, pieces: list, max_events: int) -> dict[int, _Piece | None]:
    """Both processes take pieces from the queue; the child's come back through a shared file (see _Results)."""
    queue_read, queue_write = os.pipe()
    os.write(queue_write, b"".join(struct.pack("<I", i) for i in range(len(pieces))))
    os.close(queue_write)
    results = _Results()
    pid = os.fork()
    if pid == 0:  # the child: decode pieces, write each one's columns as it is done, leave without cleanup handlers
        code = 1
        try:
            results.as_writer()
            _take_pieces(data, pieces, _queue(queue_read), max_events, publish=results.publish)
            code = 0
        except BaseException:  # any failure: the parent sees a non-zero exit and falls back
            pass
        finally:
            os._exit(code)
    try:
        results.as_reader()
        _work_while_the_child_decodes()
        done = _take_pieces(data, pieces, _queue(queue_read), max_events)
        records = results.records()  # until the child closes its end: it has written every piece
        _, status = os.waitpid(pid, 0)
        pid = 0
        received = results.collect(records) if status == 0 else None
        if received is None:
            raise SplitNotPossibleError("the child could not decode its pieces")
        done.update(received)
    except BaseException:
        if pid:
            _stop(pid)
        raise
    finally:
        results.close()
        os.close(queue_read)
    return done


_MEANWHILE: list[Callable[[], object]] = []  # see while_decoding


@contextlib.contextmanager
def while_decoding(work: Callable[[], object]) -> Iterator[None]:
    """Within this block, a big file's decoding also runs `work` (imports the caller needs next, say) in this
    process right after the child is forked: the child is decoding meanwhile, and the shared queue hands it
    more pieces, so the work costs about half its time. Works of nested blocks run innermost first; an
    exception from one stops the decoding and reaches the caller. Not run when no child is forked (small
    files, one worker)."""
    _MEANWHILE.append(work)
    try:
        yield
    finally:
        _MEANWHILE.remove(work)


def _work_while_the_child_decodes() -> None:
    for work in reversed(_MEANWHILE):
        work()
    if "pandas" not in sys.modules:  # the frame needs it
        import pandas  # noqa: F401


def _prove(data, pieces: list, done: dict[int, _Piece | None]) -> list[_Piece]:
    """The pieces in file order, each starting where the one before it was proven to end (see the module).

    A piece that did not parse is decoded again joined to the next pieces, whose own results are dropped."""
    ordered: list[_Piece] = []
    i = 0
    while i < len(pieces):
        start, _ = pieces[i]
        piece, last = done.get(i), i
        while piece is None and last < min(i + RETRIES, len(pieces) - 1):
            last += 1
            piece = _decode(data, start, pieces[last][1])
        if piece is None:
            raise SplitNotPossibleError("a piece does not parse")
        ordered.append(piece)
        i = last + 1
    return ordered


def _merge_all(ordered: list[_Piece]) -> tuple[_ColumnBuilder, int, object]:
    """One builder from the pieces' builders, in file order (first labels in the file win, as in one pass)."""
    from .chrome_trace import _ColumnBuilder

    builder = _ColumnBuilder()
    count = 0
    for piece in ordered:
        _merge(builder, piece.builder)
        count += piece.count
    for parts in builder.parts.values():
        parts.reverse()  # the builder keeps its batches last-first
    return builder, count, ordered[-1].tail if ordered else None


def _merge(builder: _ColumnBuilder, piece: _ColumnBuilder) -> None:
    """Fold a piece's columns into the builder: remap its string codes and string ids to the builder's."""
    import numpy as np

    columns = {c: (v[0] if len(v) == 1 else np.concatenate(v[::-1])) for c, v in piece.parts.items() if v}
    for col, attribute in _CODE_TABLES:  # string codes: the piece's table -> the builder's
        own, table = getattr(piece, attribute), getattr(builder, attribute)
        remap = np.fromiter((table.setdefault(s, len(table)) for s in own), np.int64, len(own))
        if col in columns and len(columns[col]):
            columns[col] = remap[columns[col]]
    id_map = {
        piece_id: builder.string_ids.setdefault(label, -(1 << 40) - len(builder.string_ids))
        for label, piece_id in piece.string_ids.items()
    }
    for col in ("pid", "tid"):
        if col in columns:
            columns[col] = _remap_ids(columns[col], id_map)
    # Pieces come in file order: labels already set by an earlier piece win, as in the one-process reader.
    for p, name in piece.process_names.items():
        builder.process_names.setdefault(id_map.get(p, p), name)
    for (p, t), name in piece.thread_names.items():
        builder.thread_names.setdefault((id_map.get(p, p), id_map.get(t, t)), name)
    for (p, t), order in piece.sort_order.items():
        builder.sort_order.setdefault((id_map.get(p, p), None if t is None else id_map.get(t, t)), order)
    builder.unknown_categories.update(piece.unknown_categories)  # Counter.update adds the counts
    builder.skipped.update(piece.skipped)
    builder.duration_events += piece.duration_events
    builder.invalid_utf8 += piece.invalid_utf8
    builder.wide_ids += piece.wide_ids
    for col, array in columns.items():
        builder.parts[col].append(array)


def _remap_ids(values: np.ndarray, id_map: dict[int, int]) -> np.ndarray:
    import numpy as np

    changed = {k: v for k, v in id_map.items() if k != v}
    if not changed or not len(values):
        return values
    keys = np.array(sorted(changed), dtype=np.int64)
    targets = np.array([changed[k] for k in keys.tolist()], dtype=np.int64)
    pos = np.clip(np.searchsorted(keys, values), 0, len(keys) - 1)
    hit = keys[pos] == values
    return np.where(hit, targets[pos], values)


def _stop(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


# --- the child's pieces, through a shared file -------------------------------------------------------------------


_RECORD = struct.Struct("<QQQ")  # piece number, header offset, header length (MAX_PIECES of them fit a pipe)


class _Results:
    """The child's decoded pieces, handed to this process as it goes.

    The child appends each piece to an unnamed shared file (memfd; a temporary file where there is none) right
    after decoding it: a msgpack header (string tables, counts) padded to 8 bytes, then its int64 columns. A
    24-byte record per piece (number, offset, header length) goes through a pipe, in one atomic write. This
    process maps the file once the child is done: the columns are read-only views of it, not copies. So the
    child's pieces cost this process nothing while it decodes its own, and nothing is copied at the end."""

    def __init__(self) -> None:
        self.records_read, self.records_write = os.pipe()
        try:
            self.fd = os.memfd_create("stepscope-pieces", getattr(os, "MFD_CLOEXEC", 0))
            self._file = None
        except (AttributeError, OSError):
            import tempfile

            self._file = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
            self.fd = self._file.fileno()
        self._end = 0

    def as_writer(self) -> None:
        os.close(self.records_read)
        self.records_read = -1

    def as_reader(self) -> None:
        os.close(self.records_write)
        self.records_write = -1

    def publish(self, index: int, piece: _Piece | None) -> None:
        if piece is None:
            header, columns = {"index": index, "parsed": False}, {}
        else:
            header, columns = _piece_header(index, piece)
        blob = msgspec.msgpack.encode(header)
        start = self._end
        self._write(blob + b"\0" * (-len(blob) % 8))  # padded: the columns after it start 8-byte aligned
        for array in columns.values():
            self._write(memoryview(array).cast("B"))
        os.write(self.records_write, _RECORD.pack(index, start, len(blob)))

    def _write(self, data) -> None:
        view = memoryview(data)
        while view:
            n = os.pwrite(self.fd, view, self._end)
            self._end += n
            view = view[n:]

    def records(self) -> list[tuple[int, int, int]] | None:
        """Every record the child wrote, once it has closed its end; None when they are not whole records."""
        raw = bytearray()
        while chunk := os.read(self.records_read, 1 << 16):
            raw += chunk
        if len(raw) % _RECORD.size:
            return None
        return [_RECORD.unpack_from(raw, i) for i in range(0, len(raw), _RECORD.size)]

    def collect(self, records: list[tuple[int, int, int]] | None) -> dict[int, _Piece | None] | None:
        """The child's pieces, rebuilt as builders whose columns are views of the mapped file; None if garbled."""
        import mmap

        import numpy as np

        if records is None:
            return None
        size = os.fstat(self.fd).st_size
        region = mmap.mmap(self.fd, size, access=mmap.ACCESS_READ) if size else b""
        done: dict[int, _Piece | None] = {}
        try:
            for index, offset, blob_length in records:
                header = msgspec.msgpack.decode(region[offset : offset + blob_length])
                if not header["parsed"]:
                    done[index] = None
                    continue
                columns, position = {}, offset + blob_length + (-blob_length % 8)
                for name, length in header["columns"]:
                    if position + 8 * length > size:
                        return None
                    columns[name] = np.frombuffer(region, dtype=np.int64, count=length, offset=position)
                    position += 8 * length
                done[index] = _rebuilt(header, columns)
        except (msgspec.DecodeError, KeyError, TypeError, ValueError):
            return None
        return done

    def close(self) -> None:
        for fd in (self.records_read, self.records_write):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        if self._file is not None:
            self._file.close()
        else:
            with contextlib.suppress(OSError):
                os.close(self.fd)  # a mapping made from it stays valid


def _piece_header(index: int, piece: _Piece) -> tuple[dict, dict[str, np.ndarray]]:
    import numpy as np

    b = piece.builder
    columns = {
        c: np.ascontiguousarray(v[0] if len(v) == 1 else np.concatenate(v[::-1]), dtype=np.int64)
        for c, v in b.parts.items()
        if v
    }
    header = {
        "index": index,
        "parsed": True,
        "count": piece.count,
        "tail": msgspec.json.encode(piece.tail) if piece.tail is not None else None,
        "duration_events": b.duration_events,
        "columns": [[c, len(a)] for c, a in columns.items()],
        "kinds": list(b.kinds),
        "names": list(b.names),
        "dims": list(b.dims),
        "string_ids": [[s, i] for s, i in b.string_ids.items()],
        "process_names": [[p, n] for p, n in b.process_names.items()],
        "thread_names": [[p, t, n] for (p, t), n in b.thread_names.items()],
        "sort_order": [[p, t, o] for (p, t), o in b.sort_order.items()],
        "unknown_categories": dict(b.unknown_categories),
        "skipped": dict(b.skipped),
        "invalid_utf8": b.invalid_utf8,
        "wide_ids": b.wide_ids,
    }
    return header, columns


def _rebuilt(header: dict, columns: dict[str, np.ndarray]) -> _Piece:
    from .chrome_trace import _ColumnBuilder

    b = _ColumnBuilder()
    for col, array in columns.items():
        b.parts[col].append(array)
    b.kinds = {s: i for i, s in enumerate(header["kinds"])}
    b.names = {s: i for i, s in enumerate(header["names"])}
    b.dims = {s: i for i, s in enumerate(header["dims"])}
    b.string_ids = {s: i for s, i in header["string_ids"]}
    b.process_names = {p: n for p, n in header["process_names"]}
    b.thread_names = {(p, t): n for p, t, n in header["thread_names"]}
    b.sort_order = {(p, t): o for p, t, o in header["sort_order"]}
    b.unknown_categories.update(header["unknown_categories"])
    b.skipped.update(header["skipped"])
    b.duration_events = header["duration_events"]
    b.invalid_utf8 = header["invalid_utf8"]
    b.wide_ids = header["wide_ids"]
    tail = _TAIL_DECODER.decode(header["tail"]) if header["tail"] is not None else None
    return _Piece(b, header["count"], tail)
