"""A big Chrome-trace JSON event list cut into pieces at event boundaries: where to cut, one piece decoded, the
pieces proved and merged. Run on two processes by parsers/kineto/two_processes.py.

Where to cut is proved by parsing, not guessed. The head before the "traceEvents" key must parse as an object that
the key continues, and the key must be followed by ':' and '['. Each piece ends at a candidate '}' ',' '{' comma
and must parse as a JSON array of events. A piece that starts at a proven boundary and parses proves that its end
comma lies between two top-level events (a comma inside a string or a nested value leaves the piece unterminated or
unbalanced), so the next piece starts at a proven boundary too: the pieces are accepted in file order, from the '['
on. A piece that does not parse is joined to the pieces after it (their own results, from an unproven start, are
dropped) a few times; anything else (an error in the file, a value out of range, a process that dies) falls back
to the one-process reader (parsers/kineto/reader.py), which also gives the precise error message. The last piece is
decoded as '{"traceEvents":[' + the rest of the file, which also yields any keys after the array.

A piece is decoded by msgspec into structs (parsers/kineto/fields.py) and turned into a ColumnBuilder's columns,
sorted by time and narrowed (join.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec
import msgspec.structs

from ..errors import TraceError
from ..memory_budget import string_bytes, weight
from .fields import AnyEvent, TraceDoc

if TYPE_CHECKING:
    from .columns import ColumnBuilder
from .file_pieces import FileSource

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
_OPEN_BRACKET, _CLOSE_BRACKET = ord("["), ord("]")


# The document's keys after the event list, as the one-process reader's TraceDoc reads them (whatever it reads).
DOC_FIELDS = [f for f in msgspec.structs.fields(TraceDoc) if f.name != "traceEvents"]
_Tail = msgspec.defstruct(
    "_Tail",
    [("traceEvents", list[AnyEvent] | None, msgspec.field(default=None, name="traceEvents"))]
    + [(f.name, f.type, msgspec.field(default=None, name=f.encode_name)) for f in DOC_FIELDS],
)


HEAD_DECODER = msgspec.json.Decoder(TraceDoc)
PIECE_DECODER = msgspec.json.Decoder(list[AnyEvent])
TAIL_DECODER = msgspec.json.Decoder(_Tail)


class SplitNotPossibleError(Exception):
    """The piecewise path could not be used; the caller reads the file in one process instead."""


class OverEventLimitError(SplitNotPossibleError):
    """More than the read may hold: its events, and the bytes of its distinct strings priced as events
    (memory_budget.weight), counted, or estimated from the first piece (per byte) before the rest is decoded. The
    one-process reader words the error; a read bounded by the memory budget says so."""

    def __init__(self, events: int, strings: int = 0) -> None:
        super().__init__("over the event limit")
        self.events, self.strings = events, strings


# A file whose first piece, scaled to the file's size, holds this many times the limit is refused before the rest
# is decoded (real traces' events are much alike in size; the exact count is checked at the end either way).
_ESTIMATE_MARGIN = 1.25


class DecodeStoppedError(Exception):
    """The caller's `meanwhile` returned True (it has what it needs: the content is cached, say): decoding stopped."""


# Work for the calling process while the other one decodes (imports it needs next, hashing the file): it then costs
# about half its time. Returning True stops the decoding (DecodeStoppedError). Run only when a second process decodes.
Meanwhile = Callable[[], object]
Progress = Callable[[float], None]  # the fraction of the pieces decoded so far: 0 once they are planned, then up to 1


def next_cut(data, start: int) -> int | None:
    """A candidate comma between two objects at or after `start` in a buffer, or None."""
    match = _CUT.search(data, start)
    if match is None:
        return None
    return match.start() + bytes(data[match.start() : match.end()]).index(b",")


def array_start(head_bytes: bytes) -> tuple[int, TraceDoc]:
    """The offset just after the '[' of the top-level traceEvents array, proved as the module says, and
    the document's keys before it, from the file's first HEAD_BYTES."""
    key = head_bytes.find(_KEY, 0, 1 << 20)  # Kineto writes the event list after a small head
    opening = _OPEN.match(head_bytes, key) if key >= 0 else None
    if opening is None:
        raise SplitNotPossibleError("no traceEvents key near the start")
    try:
        head = HEAD_DECODER.decode(b"".join((head_bytes[:key], b'"traceEvents":[]}')))
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        raise SplitNotPossibleError("the head before traceEvents is not an object prefix") from None
    return opening.end(), head


def plan(data, first: int) -> list[tuple[int, int | None]]:
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
            cut = next_cut(data, start + step)
        pieces.append((start, cut))
        if cut is None:
            return pieces
        start = cut + 1


class Piece:
    """One decoded stretch of events: its own small column builder, event count and (last piece) the doc's tail."""

    __slots__ = ("builder", "count", "tail")

    def __init__(self, builder: ColumnBuilder, count: int, tail=None) -> None:
        self.builder, self.count, self.tail = builder, count, tail

    @property
    def strings(self) -> int:
        """The bytes its distinct names and shapes take (memory_budget.string_bytes)."""
        return string_bytes([*self.builder.names, *self.builder.dims])


def decode_piece(data, start: int, stop: int | None) -> Piece | None:
    """The events from `start` (just after '[' or a proven comma) to the comma `stop` (None: to the end of the
    file), or None when that text does not parse as events. Raises SplitNotPossibleError for what only the
    one-process reader handles (invalid UTF-8, values out of range). The last one also holds the document's
    other keys."""
    from .columns import ColumnBuilder  # numpy: after the fork, in each process
    from .join import narrow_run, sort_run

    tail = None
    try:
        if isinstance(data, FileSource):  # the piece read from the file, between the bytes it needs
            if stop is None:
                tail = TAIL_DECODER.decode(_single_event_list(data.framed(start, len(data), _PREFIX, b"")))
                events, tail.traceEvents = tail.traceEvents or [], None
            else:
                events = PIECE_DECODER.decode(data.framed(start, stop, b"[", b"]"))
        elif stop is None:
            tail = TAIL_DECODER.decode(_single_event_list(b"".join((_PREFIX, memoryview(data)[start:]))))
            events, tail.traceEvents = tail.traceEvents or [], None
        elif isinstance(data, bytearray):
            events = _decode_in_place(data, start, stop)
        else:
            events = PIECE_DECODER.decode(b"".join((b"[", memoryview(data)[start:stop], b"]")))
    except UnicodeDecodeError:  # the one-process reader replaces invalid UTF-8 and counts it
        raise SplitNotPossibleError("invalid UTF-8 in the events") from None
    except (msgspec.DecodeError, RecursionError):  # ValidationError included
        return None
    builder = ColumnBuilder()
    if events:
        try:
            builder.add_batch(events)
        except TraceError:  # a value out of range: the one-process reader says which events, with file offsets
            raise SplitNotPossibleError("a value out of range") from None
        sort_run(builder.parts)  # each process sorts its own pieces by time: the join is then one pass
        narrow_run(builder.parts)
    return Piece(builder, len(events), tail)


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
        return PIECE_DECODER.decode(memoryview(data)[start - 1 : stop + 1])  # Raw args may still point into it
    finally:
        data[start - 1], data[stop] = before, after


def take_pieces(data, pieces: list, numbers, max_events: int, publish=None, progress=None) -> dict[int, Piece | None]:
    """Decode the pieces whose numbers `numbers` yields (the shared queue, or all of them in one process).

    `publish(number, piece)`, when given (the other process), hands each piece on as soon as it is decoded instead
    of keeping it; `progress(count)`, when given, hears how many this process has decoded after each one."""
    done: dict[int, Piece | None] = {}
    events = strings = 0
    for count, i in enumerate(numbers, 1):
        piece = decode_piece(data, *pieces[i])
        if piece is not None:
            events, strings = events + piece.count, strings + piece.strings
        if weight(events, strings) > max_events:  # the one-process reader counts them and words the error
            raise OverEventLimitError(events, strings)
        if count == 1 and piece is not None and publish is None:  # this process estimates; the other only counts
            _check_estimate(piece, pieces[i], len(data), max_events)
        if publish is None:
            done[i] = piece
        else:
            publish(i, piece)
        if progress is not None:
            progress(count)
    return done


def _check_estimate(piece: Piece, span: tuple[int, int | None], size: int, max_events: int) -> None:
    """Refuse at once a file whose first decoded piece, scaled to the whole file, is well over the limit."""
    start, stop = span
    length = (size if stop is None else stop) - start
    if length <= 0:
        return
    events = int(piece.count * size / length)  # strings repeat from piece to piece: this piece's only
    if weight(events, piece.strings) > _ESTIMATE_MARGIN * max_events:
        raise OverEventLimitError(events, piece.strings)


def joined(head: TraceDoc, ordered: list[Piece], max_events: int) -> tuple[TraceDoc, ColumnBuilder, int]:
    builder, count, tail = merge_all(ordered)
    if builder.duration_events == 0:
        raise SplitNotPossibleError("no duration events")  # the one-process reader says what the file holds
    strings = string_bytes([*builder.names, *builder.dims])
    if weight(count, strings) > max_events:
        raise OverEventLimitError(count, strings)
    for field in DOC_FIELDS:
        if tail is not None and getattr(tail, field.name) is not None:  # keys after the list win, as in one pass
            setattr(head, field.name, getattr(tail, field.name))
    head.traceEvents = None
    return head, builder, count


def prove(data, pieces: list, done: dict[int, Piece | None]) -> list[Piece]:
    """The pieces in file order, each starting where the one before it was proven to end (see the module).

    A piece that did not parse is decoded again joined to the next pieces, whose own results are dropped."""
    ordered: list[Piece] = []
    i = 0
    while i < len(pieces):
        start, _ = pieces[i]
        piece, last = done.get(i), i
        while piece is None and last < min(i + RETRIES, len(pieces) - 1):
            last += 1
            piece = decode_piece(data, start, pieces[last][1])
        if piece is None:
            raise SplitNotPossibleError("a piece does not parse")
        ordered.append(piece)
        i = last + 1
    return ordered


def merge_all(ordered: list[Piece]) -> tuple[ColumnBuilder, int, object]:
    """One builder from the pieces' builders, in file order (first labels in the file win, as in one pass): the
    string tables and counts joined, each piece's frame columns kept as a sorted run (join.py) that the
    builder's frame() joins in one pass."""
    from .join import JoinedBuilder

    builder = JoinedBuilder()
    count = 0
    for piece in ordered:
        builder.runs.append(_merge(builder, piece.builder))
        count += piece.count
    for parts in builder.parts.values():
        parts.reverse()  # the builder keeps its batches last-first
    return builder, count, ordered[-1].tail if ordered else None


def _merge(builder: ColumnBuilder, piece: ColumnBuilder):
    """Fold a piece's tables into the builder; its frame columns become a Run whose string codes and string ids
    are mapped to the builder's when the frame is joined (the memory table's columns are appended as they are)."""
    import numpy as np

    from .join import FRAME_COLUMNS, Run, in_memory

    columns = {c: (v[0] if len(v) == 1 else np.concatenate(v[::-1])) for c, v in piece.parts.items() if v}
    remaps = {}
    for col, attribute in builder.CODE_TABLES.items():  # string codes: the piece's table -> the builder's
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
