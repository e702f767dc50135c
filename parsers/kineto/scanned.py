"""A piece of the event list read by the compiled scanner (parsers/kineto/scan.py), as the column builder reads it.

`scan_piece` runs the scanner over a piece, growing whatever array it fills, and returns a ScannedPiece, or None
when the scanner gives the piece up (the caller then decodes it with msgspec). A ScannedPiece holds the duration
events' fields as arrays (their rows: fields.INT_ROWS, fields.FLOAT_ROWS) and the rest as the msgspec path has them:
the metadata and instant events decoded by msgspec, the counted phases. `ScannedRows` answers the column builder's
`read(field)` (columns.Rows) from the arrays. Imported only where Numba's scanner is loaded (compiled.load).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from types import ModuleType

import msgspec
import numpy as np

from .fields import FIELDS, FLOAT_ROWS, INT_FIELDS, INT_ROWS, SKIPPED_LABELS, AnyEvent
from .scan import (
    CATS,
    EVENTS,
    GIVEN_UP,
    INEXACT,
    NAMES,
    OK,
    OTHERS,
    POSITION,
    ROOM_CATS,
    ROOM_INEXACT,
    ROOM_NAMES,
    ROOM_OTHERS,
    ROOM_ROWS,
    ROWS,
    STATE_SIZE,
)

_OTHERS_DECODER = msgspec.json.Decoder(list[AnyEvent])
_ROWS_PER_BYTE = 1 / 160  # a first guess at the rows of a piece (real events: 150-300 bytes); grown when short
_NAMES_PER_ROW = 1 / 4  # and at its distinct names (with_stack traces: a name per few events)


class _Buffers:
    """The arrays one scan fills, owned here and grown when the scanner says one is full."""

    def __init__(self, size: int) -> None:
        rows = max(256, int(size * _ROWS_PER_BYTE))
        self.state = np.zeros(STATE_SIZE, dtype=np.int64)
        self.ints = np.empty((INT_FIELDS, rows), dtype=np.int64)
        self.floats = np.empty((len(FLOAT_ROWS), rows), dtype=np.float64)
        self.name_slots, self.names = _table(1 << max(10, int(rows * _NAMES_PER_ROW).bit_length()))
        self.cat_slots, self.cats = _table(16)
        self.others = np.empty((16, 2), dtype=np.int64)
        self.inexact = np.empty((16, 4), dtype=np.int64)
        self.counted = np.zeros(128, dtype=np.int64)

    def grow(self, room: int) -> None:
        state = self.state
        if room == ROOM_ROWS:
            self.ints = _wider(self.ints, state[ROWS])
            self.floats = _wider(self.floats, state[ROWS])
        elif room == ROOM_NAMES:
            self.name_slots, self.names = _grown_table(self.names, state[NAMES])
        elif room == ROOM_CATS:
            self.cat_slots, self.cats = _grown_table(self.cats, state[CATS])
        elif room == ROOM_OTHERS:
            self.others = _longer(self.others, state[OTHERS])
        else:
            self.inexact = _longer(self.inexact, state[INEXACT])

    def scan(self, scanner: ModuleType, data: np.ndarray, hi: int) -> int:
        return scanner.scan_into(
            data, hi, self.state, self.ints, self.floats, self.name_slots, self.names, self.cat_slots, self.cats,
            self.others, self.inexact, self.counted,
        )  # fmt: skip


def _table(capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """(slots, spans) of an empty table of distinct strings: twice the slots, so it is at most half full."""
    return np.full(2 * capacity, -1, dtype=np.int64), np.empty((capacity, 2), dtype=np.int64)


def _grown_table(spans: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """A table twice the size holding the first `count` strings' spans; its slots are filled by scan.rehash."""
    slots, bigger = _table(2 * len(spans))
    bigger[:count] = spans[:count]
    return slots, bigger


def _wider(array: np.ndarray, used: int) -> np.ndarray:
    bigger = np.empty((array.shape[0], 2 * array.shape[1]), dtype=array.dtype)
    bigger[:, :used] = array[:, :used]
    return bigger


def _longer(array: np.ndarray, used: int) -> np.ndarray:
    bigger = np.empty((2 * array.shape[0], array.shape[1]), dtype=array.dtype)
    bigger[:used] = array[:used]
    return bigger


class ScannedPiece:
    """One piece's events as the scanner read them: duration rows (`ints`, `floats`), the distinct names and
    categories they code into, the other events (decoded by msgspec, `others`) and the counted phases (`skipped`)."""

    def __init__(self, data: np.ndarray, found: _Buffers) -> None:
        state = found.state
        rows = int(state[ROWS])
        self.events = int(state[EVENTS])
        self.ints = found.ints[:, :rows]
        self.floats = found.floats[:, :rows]
        self.names = _labels(data, found.names[: state[NAMES]])
        self.cats = _labels(data, found.cats[: state[CATS]])
        spans = found.others[: state[OTHERS]]
        self.others = _OTHERS_DECODER.decode(b"[" + b",".join(data[a:b].tobytes() for a, b in spans) + b"]")
        self.skipped: Counter[str] = Counter()  # several phases share a label (s, t, f: "flow")
        for phase in np.flatnonzero(found.counted).tolist():
            self.skipped[SKIPPED_LABELS[chr(phase)]] += int(found.counted[phase])
        self.data = data  # for the rows' "Input Dims", read only for the ops whose shapes analysis reads
        for row, field, a, b in found.inexact[: state[INEXACT]].tolist():
            value = float(data[a:b].tobytes())
            if not math.isfinite(value):
                raise ValueError("a number out of a double's range")  # msgspec refuses it: left to msgspec
            self.floats[field, row] = value

    def rows(self) -> ScannedRows:
        return ScannedRows(self, np.arange(self.ints.shape[1]), in_order=True)


def _labels(data: np.ndarray, spans: np.ndarray) -> list[str]:
    """Each distinct string's text: UTF-8 (checked by the scanner), escapes decoded as JSON decodes them. All of
    them gathered and decoded at once, split at NUL bytes (which JSON text cannot hold raw): one call, not one per
    name (a with_stack piece has thousands)."""
    if not len(spans):
        return []
    lengths = spans[:, 1] - spans[:, 0]
    starts = np.concatenate(([0], np.cumsum(lengths + 1)[:-1]))  # each one's start, a NUL after each but the last
    joined = np.zeros(int(lengths.sum()) + len(spans) - 1, dtype=np.uint8)
    ranks = _ranks(lengths)
    joined[np.repeat(starts, lengths) + ranks] = data[np.repeat(spans[:, 0], lengths) + ranks]
    texts = joined.tobytes().decode().split("\0")
    return [json.loads(f'"{t}"') if "\\" in t else t for t in texts]


def _ranks(lengths: np.ndarray) -> np.ndarray:
    """0..length-1 for each length, end to end."""
    total = int(lengths.sum())
    return np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)


def scan_piece(scanner: ModuleType, data: np.ndarray, lo: int, hi: int) -> ScannedPiece | None:
    """The events of data[lo:hi] (a contiguous uint8 array), or None when the scanner gives the piece up or what it
    leaves to Python does not decode: the caller then reads the piece with msgspec, which words any error."""
    if data.dtype != np.uint8 or not data.flags.c_contiguous or not 0 <= lo <= hi <= len(data):
        raise ValueError("the scanner reads a contiguous uint8 array, within it")  # it checks no bounds of its own
    found = _Buffers(hi - lo)
    found.state[POSITION] = lo
    while True:
        status = found.scan(scanner, data, hi)
        if status == OK:
            break
        if status in GIVEN_UP or status not in _ROOMS:
            return None
        found.grow(status)
        if status == ROOM_NAMES:
            scanner.rehash(data, found.names, found.state[NAMES], found.name_slots)
        elif status == ROOM_CATS:
            scanner.rehash(data, found.cats, found.state[CATS], found.cat_slots)
    try:
        return ScannedPiece(data, found)
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError, ValueError):  # msgspec.ValidationError too
        return None


_ROOMS = (ROOM_ROWS, ROOM_NAMES, ROOM_CATS, ROOM_OTHERS, ROOM_INEXACT)


def warm_up(scanner: ModuleType) -> None:
    """Every entry point called once on a small piece: compiled (compiled.build) or loaded from Numba's cache
    (compiled.load) now, not in the middle of a read. Raises when what it reads is not what it should."""
    piece = b'{"ph": "X", "cat": "kernel", "name": "k", "ts": 2.5, "dur": 1, "pid": 3, "tid": 4, "args": {}}'
    data = np.frombuffer(piece * 1, dtype=np.uint8)
    found = _Buffers(len(data))
    if found.scan(scanner, data, len(data)) != OK or int(found.state[ROWS]) != 1:
        raise RuntimeError("the compiled scanner does not read a plain event")
    scanner.rehash(data, found.names, found.state[NAMES], np.full(len(found.name_slots), -1, dtype=np.int64))


class ScannedRows:
    """Rows of a ScannedPiece (positions `at`), answering columns.Rows. `in_order`: the rows are a run of the
    piece's (a slice), not a pick of some (see _codes)."""

    def __init__(self, piece: ScannedPiece, at: np.ndarray, in_order: bool = True) -> None:
        self.piece, self.at, self.in_order = piece, at, in_order

    def __len__(self) -> int:
        return len(self.at)

    def take(self, index: np.ndarray) -> ScannedRows:
        return ScannedRows(self.piece, self.at[index], in_order=False)

    def slice(self, start: int, stop: int) -> ScannedRows:
        return ScannedRows(self.piece, self.at[start:stop], self.in_order)

    def read(self, name: str):
        kind = FIELDS[name].kind
        if kind == "time":
            return self.piece.floats[FLOAT_ROWS[name], self.at]
        if kind == "text":
            return self._codes(name)
        if kind == "raw":  # the text as written (b"" where absent): the bytes msgspec.Raw holds
            data, row = self.piece.data, INT_ROWS[name]
            spans = zip(self.piece.ints[row, self.at].tolist(), self.piece.ints[row + 1, self.at].tolist(), strict=True)
            return [data[a:b].tobytes() if a >= 0 else b"" for a, b in spans]
        return self.piece.ints[INT_ROWS[name], self.at]  # ids: integers only (a piece with a named lane is msgspec's)

    def _codes(self, name: str) -> tuple[np.ndarray, list[str]]:
        """Codes into the strings these rows use, in the order these rows first use them (what columns._codes gives
        from structs). The piece's own codes are in the order the piece first uses its strings: for a run of its rows,
        the strings first used in the run are in the run's order already (and the order of the others changes
        nothing the builder keeps); for a pick of rows (events left out for their times), it is found."""
        labels = self.piece.names if name == "name" else self.piece.cats
        codes = self.piece.ints[INT_ROWS[name], self.at]
        used = np.flatnonzero(np.bincount(codes, minlength=len(labels)))
        if not self.in_order and len(used) > 1:
            first = np.full(len(labels), len(codes), dtype=np.int64)
            np.minimum.at(first, codes, np.arange(len(codes)))
            used = used[np.argsort(first[used], kind="stable")]
        renumbered = np.empty(len(labels), dtype=np.int64)
        renumbered[used] = np.arange(len(used))
        return renumbered[codes], [labels[i] for i in used.tolist()]
