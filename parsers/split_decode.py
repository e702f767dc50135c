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
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import msgspec
import msgspec.structs

from ..contracts import settings
from ..contracts.safe_read import open_regular
from . import scanner
from .errors import TraceError
from .file_pieces import FileChangedError, FileSource
from .kineto_schema import _AnyEvent, _TraceDoc
from .piece_channel import PieceChannel

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


class OverEventLimitError(SplitNotPossibleError):
    """More events than the read may hold: counted, or estimated from the first piece (events per byte) before the
    rest is decoded. The one-process reader words the error; a read bounded by the memory budget says so."""

    def __init__(self, events: int) -> None:
        super().__init__("over the event limit")
        self.events = events


# A file whose first piece, scaled to the file's size, holds this many times the limit is refused before the rest
# is decoded (real traces' events are much alike in size; the exact count is checked at the end either way).
_ESTIMATE_MARGIN = 1.25


class DecodeStoppedError(Exception):
    """The caller's `meanwhile` returned True (it has what it needs: the content is cached, say): decoding stopped."""


# Work for the calling process while the other one decodes (imports it needs next, hashing the file): it then costs
# about half its time. Returning True stops the decoding (DecodeStoppedError). Run only when a second process decodes.
Meanwhile = Callable[[], object]
Progress = Callable[[float], None]  # the fraction of the pieces decoded so far: 0 once they are planned, then up to 1


def split_workers() -> int:
    """Processes to decode with: STEPSCOPE_PARSE_WORKERS (1: no fork), else 2 when there are 2+ CPUs."""
    return settings.positive_int("STEPSCOPE_PARSE_WORKERS", 2 if (os.cpu_count() or 1) >= 2 else 1)


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


def _decode(data, start: int, stop: int | None, scan: bool = False) -> _Piece | None:
    """The events from `start` (just after '[' or a proven comma) to the comma `stop` (None: to the end of the
    file), or None when that text does not parse as events. Raises SplitNotPossibleError for what only the
    one-process reader handles (invalid UTF-8, values out of range). `scan`: the compiled scanner reads the piece
    (parsers.scanner), unless it gives it up; msgspec reads the last one (the document's other keys follow it)."""
    from .chrome_trace import _ColumnBuilder  # numpy: after the fork, in each process
    from .piece_merge import narrow_run, sort_run

    if scan and stop is not None:
        scanned = _scanned(data, start, stop)
        if scanned is not None:
            return scanned
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
        sort_run(builder.parts)  # each process sorts its own pieces by time: the join is then one pass
        narrow_run(builder.parts)
    return _Piece(builder, len(events), tail)


def _scanned(data, start: int, stop: int) -> _Piece | None:
    """The events from `start` to the comma `stop`, read by the compiled scanner, or None when it gives the piece
    up (msgspec then reads it, and words any error). Raises SplitNotPossibleError as _decode does."""
    import numpy as np

    from . import scanned_piece

    compiled = scanner.load()
    if compiled is None:
        return None
    from .chrome_trace import _ColumnBuilder
    from .piece_merge import narrow_run, sort_run

    if isinstance(data, FileSource):
        view = data.framed(start, stop, b"", b"")
        array, lo, hi = np.frombuffer(view, dtype=np.uint8), 0, len(view)
    else:
        array, lo, hi = np.frombuffer(data, dtype=np.uint8), start, stop
    piece = scanned_piece.scan_piece(compiled, array, lo, hi)
    if piece is None:
        return None
    builder = _ColumnBuilder()
    try:
        builder.add_scanned(piece)
    except TraceError:  # a value out of range: the one-process reader says which events
        raise SplitNotPossibleError("a value out of range") from None
    sort_run(builder.parts)
    narrow_run(builder.parts)
    return _Piece(builder, piece.events)


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


def _take_pieces(
    data, pieces: list, numbers, max_events: int, publish=None, progress=None, scan: bool = False
) -> dict[int, _Piece | None]:
    """Decode the pieces whose numbers `numbers` yields (the shared queue, or all of them in one process); `scan`: as
    _decode says.

    `publish(number, piece)`, when given (the other process), hands each piece on as soon as it is decoded instead
    of keeping it; `progress(count)`, when given, hears how many this process has decoded after each one."""
    done: dict[int, _Piece | None] = {}
    events = 0
    for count, i in enumerate(numbers, 1):
        piece = _decode(data, *pieces[i], scan=scan)
        events += piece.count if piece is not None else 0
        if events > max_events:  # the one-process reader counts them and words the error
            raise OverEventLimitError(events)
        if count == 1 and piece is not None and publish is None:  # this process estimates; the other only counts
            _check_estimate(piece.count, pieces[i], len(data), max_events)
        if publish is None:
            done[i] = piece
        else:
            publish(i, piece)
        if progress is not None:
            progress(count)
    return done


def _check_estimate(events: int, piece: tuple[int, int | None], size: int, max_events: int) -> None:
    """Refuse at once a file whose first decoded piece, scaled to the whole file, is well over the limit."""
    start, stop = piece
    length = (size if stop is None else stop) - start
    if length > 0 and events * size / length > _ESTIMATE_MARGIN * max_events:
        raise OverEventLimitError(int(events * size / length))


def _queue(fd: int):
    """Piece numbers from the queue pipe until it is empty. Every number was written before the fork in one
    write, and a read of 4 bytes from a pipe holding them returns exactly one number to exactly one reader."""
    while True:
        raw = os.read(fd, 4)
        if len(raw) < 4:
            return
        yield struct.unpack("<I", raw)[0]


def decode_in_two(
    box: list[bytes | bytearray],
    max_events: int = 1 << 62,
    meanwhile: Meanwhile | None = None,
    progress: Progress | None = None,
) -> tuple[_TraceDoc, _ColumnBuilder, int]:
    """(the document's other fields, a column builder holding every event, the event count).

    `box` holds the file's bytes, and should hold the only reference: once every event is decoded
    the box is emptied, so the bytes are freed before the frame is built. Raises
    SplitNotPossibleError (the box still full) when the file is small or its layout cannot be proved,
    DecodeStoppedError when `meanwhile` returns True.
    """
    data = box[0]
    head, ordered = _decode_pieces(data, bytes(data[:HEAD_BYTES]), max_events, meanwhile, progress)
    del data
    result = _joined(head, ordered, max_events)
    box.clear()  # every event is decoded: the file's bytes can go before the frame is built
    return result


def decode_file_in_two(
    path: str | os.PathLike,
    max_events: int = 1 << 62,
    meanwhile: Meanwhile | None = None,
    progress: Progress | None = None,
) -> tuple[_TraceDoc, _ColumnBuilder, int]:
    """decode_in_two for a file on disk, read piece by piece by the processes that decode them (no whole-file
    buffer). Raises SplitNotPossibleError when the file is small, not a plain JSON object, changes size while
    it is read, or cannot be read or split; the caller then reads it whole (and gets the precise error)."""
    try:
        fd = open_regular(path)  # a regular file only (a FIFO swapped in after the stat would block)
    except OSError:
        raise SplitNotPossibleError("cannot open the file") from None
    try:
        source = FileSource(fd, os.fstat(fd).st_size)
        head, ordered = _decode_pieces(source, source.head(HEAD_BYTES), max_events, meanwhile, progress)
        source.check_unchanged_size()
    except (OSError, FileChangedError) as exc:
        raise SplitNotPossibleError(f"the file could not be read in pieces: {exc}") from None
    finally:
        os.close(fd)
    return _joined(head, ordered, max_events)


def _decode_pieces(
    data, head_bytes: bytes, max_events: int, meanwhile: Meanwhile | None, progress: Progress | None
) -> tuple[_TraceDoc, list[_Piece]]:
    """The document's keys before the events and the decoded pieces in file order (see the module).
    `data`: the bytes or the FileSource; `head_bytes`: its first HEAD_BYTES."""
    if len(data) < MIN_SPLIT_BYTES:
        raise SplitNotPossibleError("not worth splitting")
    if not head_bytes[:64].lstrip().startswith(b"{"):
        raise SplitNotPossibleError("not a JSON object")
    first, head = _array_start(head_bytes)
    pieces = _plan(data, first)
    if progress is not None:  # the read in pieces has begun: the app's bar shows at once (and stills the page)
        progress(0.0)
    scan = scanner.usable()
    with _COLLECTOR.paused():
        if split_workers() < 2 or not hasattr(os, "fork") or len(pieces) < 2:
            own = None if progress is None else (lambda count: progress(count / len(pieces)))
            done = _take_pieces(data, pieces, range(len(pieces)), max_events, progress=own, scan=scan)
        else:
            done = _decode_with_child(data, pieces, max_events, meanwhile, progress, scan)
        ordered = _prove(data, pieces, done, scan)
    if not scan:
        scanner.build_later()  # for the reads after this one
    return head, ordered


def _joined(head: _TraceDoc, ordered: list[_Piece], max_events: int) -> tuple[_TraceDoc, _ColumnBuilder, int]:
    builder, count, tail = _merge_all(ordered)
    if builder.duration_events == 0:
        raise SplitNotPossibleError("no duration events")  # the one-process reader says what the file holds
    if count > max_events:
        raise OverEventLimitError(count)
    for field in _DOC_FIELDS:
        if tail is not None and getattr(tail, field.name) is not None:  # keys after the list win, as in one pass
            setattr(head, field.name, getattr(tail, field.name))
    head.traceEvents = None
    return head, builder, count


class _CollectorPause:
    """The cycle collector paused while events are decoded: every piece allocates tens of thousands of
    containers (lists, structs' args) that trigger collections, none of which can find a cycle. The collector is
    one switch for the whole process, so decodes running at once in several threads (a server's sessions) count
    themselves in, behind a lock: the last one out switches it back on, if it was on before the first came in."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._decoding = 0
        self._was_enabled = False

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        with self._lock:
            if self._decoding == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._decoding += 1
        try:
            yield
        finally:
            with self._lock:
                self._decoding -= 1
                if self._decoding == 0 and self._was_enabled:
                    gc.enable()


_COLLECTOR = _CollectorPause()


def _decode_with_child(
    data, pieces: list, max_events: int, meanwhile: Meanwhile | None, progress: Progress | None, scan: bool
) -> dict[int, _Piece | None]:
    """Both processes take pieces from the queue; the other's come back through a PieceChannel.

    The other process is a plain fork of this one when this is the process's only thread (the command line: the
    cheapest start), else a child of the decode helper (parsers.decode_helper): a fork made while other threads
    run (a server's sessions) copies the locks they hold, and the child could wait on one forever."""
    queue_read, queue_write = os.pipe()
    os.write(queue_write, b"".join(struct.pack("<I", i) for i in range(len(pieces))))
    os.close(queue_write)
    channel, pid = PieceChannel(), 0
    try:
        # The other process does not stop at the limit: this one counts its own pieces as they come (and stops both
        # once they alone are over it), and the join counts them all, so the refusal is always this process's words.
        pid = _start_second_process(data, pieces, 1 << 62, queue_read, channel, scan)
        channel.as_reader()
        if meanwhile is not None and meanwhile():
            raise DecodeStoppedError
        if "pandas" not in sys.modules:  # the frame needs it: imported while the other process decodes
            import pandas  # noqa: F401

        def own(count: int) -> None:  # this process's pieces and those the other has sent so far
            progress(min(1.0, (count + channel.sent_so_far()) / len(pieces)))

        done = _take_pieces(data, pieces, _queue(queue_read), max_events, progress=own if progress else None, scan=scan)
        if len(done) < len(pieces):  # the other process took some: wait for them
            done.update(_received(channel))
        if pid:
            os.waitpid(pid, 0)
            pid = 0
    except BaseException:
        _stop(pid, queue_read)
        raise
    finally:
        channel.close()
        os.close(queue_read)
    return done


def _start_second_process(
    data, pieces: list, max_events: int, queue_read: int, channel: PieceChannel, scan: bool
) -> int:
    """The pid of a child forked here; 0 when the decode helper is asked to fork it (if there is no helper, no
    process takes pieces but this one, which then decodes them all)."""
    if threading.active_count() == 1:
        pid = os.fork()
        if pid == 0:  # the child: decode pieces, send each one as it is done, leave without cleanup handlers
            code = 1
            try:
                channel.as_writer()
                _take_pieces(data, pieces, _queue(queue_read), max_events, publish=_sender(channel), scan=scan)
                channel.finish()
                code = 0
            except BaseException:  # any failure: no finishing record, and the parent falls back
                pass
            finally:
                os._exit(code)
        return pid
    from . import decode_helper

    source, ours = decode_helper.trace_descriptor(data)
    try:
        request = {"size": len(data), "pieces": pieces, "max_events": max_events, "scan": scan}
        decode_helper.submit(request, [source, queue_read, *channel.child_fds()])
    finally:
        if ours:
            os.close(source)
    return 0


def decode_for_parent(request: dict, fds: list[int]) -> None:
    """The other process's share, in a child of the decode helper: the trace (its file, or a copy of the parent's
    buffer), the queue and the channel come as descriptors (see _decode_with_child)."""
    source, queue_read, records_write, results = fds
    channel = PieceChannel.for_child(records_write, results)
    pieces = [(start, stop) for start, stop in request["pieces"]]
    gc.disable()  # as in the parent: nothing decoded holds a cycle
    source = FileSource(source, request["size"])
    scan = bool(request.get("scan"))
    _take_pieces(source, pieces, _queue(queue_read), request["max_events"], publish=_sender(channel), scan=scan)
    channel.finish()


def _sender(channel: PieceChannel) -> Callable[[int, _Piece | None], None]:
    def send(index: int, piece: _Piece | None) -> None:
        if piece is None:
            channel.send(index, {"index": index, "parsed": False}, ())
        else:
            header, columns = _piece_header(index, piece)
            channel.send(index, header, columns.values())

    return send


def _received(channel: PieceChannel) -> dict[int, _Piece | None]:
    """The other process's pieces once it is done. Raises SplitNotPossibleError when it did not finish (it died,
    or failed on a piece) or what it wrote is garbled."""
    got = channel.records()
    received = channel.received(got[0]) if got is not None and got[1] else None
    if received is None:
        raise SplitNotPossibleError("the other process could not decode its pieces")
    return {i: _rebuilt(header, columns) if header["parsed"] else None for i, (header, columns) in received.items()}


def _prove(data, pieces: list, done: dict[int, _Piece | None], scan: bool) -> list[_Piece]:
    """The pieces in file order, each starting where the one before it was proven to end (see the module).

    A piece that did not parse is decoded again joined to the next pieces, whose own results are dropped."""
    ordered: list[_Piece] = []
    i = 0
    while i < len(pieces):
        start, _ = pieces[i]
        piece, last = done.get(i), i
        while piece is None and last < min(i + RETRIES, len(pieces) - 1):
            last += 1
            piece = _decode(data, start, pieces[last][1], scan)
        if piece is None:
            raise SplitNotPossibleError("a piece does not parse")
        ordered.append(piece)
        i = last + 1
    return ordered


def _merge_all(ordered: list[_Piece]) -> tuple[_ColumnBuilder, int, object]:
    """One builder from the pieces' builders, in file order (first labels in the file win, as in one pass): the
    string tables and counts joined, each piece's frame columns kept as a sorted run (piece_merge) that the
    builder's frame() joins in one pass."""
    from .piece_merge import JoinedBuilder

    builder = JoinedBuilder()
    count = 0
    for piece in ordered:
        builder.runs.append(_merge(builder, piece.builder))
        count += piece.count
    for parts in builder.parts.values():
        parts.reverse()  # the builder keeps its batches last-first
    return builder, count, ordered[-1].tail if ordered else None


def _merge(builder: _ColumnBuilder, piece: _ColumnBuilder):
    """Fold a piece's tables into the builder; its frame columns become a Run whose string codes and string ids
    are mapped to the builder's when the frame is joined (the memory table's columns are appended as they are)."""
    import numpy as np

    from .piece_merge import FRAME_COLUMNS, Run, in_memory

    columns = {c: (v[0] if len(v) == 1 else np.concatenate(v[::-1])) for c, v in piece.parts.items() if v}
    remaps = {}
    for col, attribute in _CODE_TABLES:  # string codes: the piece's table -> the builder's
        own, table = getattr(piece, attribute), getattr(builder, attribute)
        remaps[col] = np.fromiter((table.setdefault(s, len(table)) for s in own), np.int64, len(own))
    id_map = {
        piece_id: builder.string_ids.setdefault(label, -(1 << 40) - len(builder.string_ids))
        for label, piece_id in piece.string_ids.items()
    }
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
        if col not in FRAME_COLUMNS:
            builder.parts[col].append(array)
    frame = {c: columns[c] for c in FRAME_COLUMNS if c in columns}
    rows = len(frame["ts"]) if "ts" in frame else 0
    changed = {k: v for k, v in id_map.items() if k != v}
    return Run(rows, in_memory(frame), remaps, changed)


def _stop(pid: int, queue_read: int) -> None:
    """End the other process's work: kill a forked child; for the helper's child, take every piece left in the queue
    (it stops after the one in hand, and its next record meets a closed pipe)."""
    if pid:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        return
    with contextlib.suppress(OSError):
        while os.read(queue_read, 1 << 16):
            pass


# --- a piece's columns as the other process sends them (parsers.piece_channel) -------------------------------


def _piece_header(index: int, piece: _Piece) -> tuple[dict, dict[str, np.ndarray]]:
    import numpy as np

    b = piece.builder
    parts = b.parts.items()
    columns = {c: np.ascontiguousarray(v[0] if len(v) == 1 else np.concatenate(v[::-1])) for c, v in parts if v}
    header = {
        "index": index,
        "parsed": True,
        "count": piece.count,
        "tail": msgspec.json.encode(piece.tail) if piece.tail is not None else None,
        "duration_events": b.duration_events,
        "columns": [[c, len(a), a.dtype.str] for c, a in columns.items()],
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
