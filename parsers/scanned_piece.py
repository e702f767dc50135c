"""A piece of the event list read by the compiled scanner (parsers.event_scan), as the column builder reads it.

`scan_piece` runs the scanner over a piece, growing whatever array it fills, and returns a ScannedPiece, or None
when the scanner gives the piece up (the caller then decodes it with msgspec). A ScannedPiece holds the duration
events' fields as arrays and the rest as the msgspec path has them: the metadata and instant events decoded by
msgspec, the counted phases. `ScannedRows` is what chrome_trace._ColumnBuilder._add_durations reads a slice of
rows through, the same questions it asks of decoded structs (chrome_trace._StructRows), answered from the arrays.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import TYPE_CHECKING

import msgspec
import numpy as np

from . import scan_layout as scan
from .kineto_schema import SKIPPED_LABELS, _AnyEvent

if TYPE_CHECKING:
    from .scanner import Scanner

_OTHERS_DECODER = msgspec.json.Decoder(list[_AnyEvent])
_ROWS_PER_BYTE = 1 / 160  # a first guess at the rows of a piece (real events: 150-300 bytes); grown when short
_FIELD_ROWS = {
    "args.correlation": scan.CORRELATION,
    "args.external_id": scan.EXTERNAL_ID,
    "args.external_id_legacy": scan.EXTERNAL_ID_LEGACY,
    "args.device": scan.DEVICE,
    "args.stream": scan.STREAM,
    "args.grid": scan.GRID,
    "args.block": scan.BLOCK,
    "pid": scan.PID,
    "tid": scan.TID,
}


class _Buffers:
    """The arrays one scan fills, owned here (the scanner allocates nothing) and grown when it says one is full."""

    def __init__(self, size: int) -> None:
        rows = max(256, int(size * _ROWS_PER_BYTE))
        self.state = np.zeros(scan.STATE_SIZE, dtype=np.int64)
        self.ints = np.empty((scan.INT_FIELDS, rows), dtype=np.int64)
        self.floats = np.empty((2, rows), dtype=np.float64)
        self.name_slots, self.names = _table(1024)
        self.cat_slots, self.cats = _table(16)
        self.others = np.empty((16, 2), dtype=np.int64)
        self.inexact = np.empty((16, 4), dtype=np.int64)
        self.counted = np.zeros(128, dtype=np.int64)

    def grow(self, room: int) -> None:
        state = self.state
        if room == scan.ROOM_ROWS:
            self.ints = _wider(self.ints, state[scan.ROWS])
            self.floats = _wider(self.floats, state[scan.ROWS])
        elif room == scan.ROOM_NAMES:
            self.name_slots, self.names = _grown_table(self.names, state[scan.NAMES])
        elif room == scan.ROOM_CATS:
            self.cat_slots, self.cats = _grown_table(self.cats, state[scan.CATS])
        elif room == scan.ROOM_OTHERS:
            self.others = _longer(self.others, state[scan.OTHERS])
        else:
            self.inexact = _longer(self.inexact, state[scan.INEXACT])

    def call(self, scanner: Scanner, op: int, data: np.ndarray, hi: int) -> int:
        """The scanner's entry point on these arrays (scan_layout.ENTRY_ARGS)."""
        return scanner(
            op,
            data.ctypes.data,
            len(data),
            hi,
            self.state.ctypes.data,
            self.ints.ctypes.data,
            self.ints.shape[1],
            self.floats.ctypes.data,
            self.name_slots.ctypes.data,
            self.names.ctypes.data,
            len(self.names),
            self.cat_slots.ctypes.data,
            self.cats.ctypes.data,
            len(self.cats),
            self.others.ctypes.data,
            len(self.others),
            self.inexact.ctypes.data,
            len(self.inexact),
            self.counted.ctypes.data,
        )


def _table(capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """(slots, spans) of an empty table of distinct strings: twice the slots, so it is at most half full."""
    return np.full(2 * capacity, -1, dtype=np.int64), np.empty((capacity, 2), dtype=np.int64)


def _grown_table(spans: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """A table twice the size holding the first `count` strings' spans; its slots are filled by the scanner
    (REHASH_*), which hashes them."""
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
        rows = int(state[scan.ROWS])
        self.events = int(state[scan.EVENTS])
        self.ints = found.ints[:, :rows]
        self.floats = found.floats[:, :rows]
        self.names = _labels(data, found.names[: state[scan.NAMES]])
        self.cats = _labels(data, found.cats[: state[scan.CATS]])
        spans = found.others[: state[scan.OTHERS]]
        self.others = _OTHERS_DECODER.decode(b"[" + b",".join(data[a:b].tobytes() for a, b in spans) + b"]")
        self.skipped: Counter[str] = Counter()  # several phases share a label (s, t, f: "flow")
        for phase in np.flatnonzero(found.counted).tolist():
            self.skipped[SKIPPED_LABELS[chr(phase)]] += int(found.counted[phase])
        self.data = data  # for the rows' "Input Dims", read only for the ops whose shapes analysis reads
        for row, field, a, b in found.inexact[: state[scan.INEXACT]].tolist():
            value = float(data[a:b].tobytes())
            if not math.isfinite(value):
                raise ValueError("a number out of a double's range")  # msgspec refuses it: left to msgspec
            self.floats[field, row] = value

    def rows(self) -> ScannedRows:
        return ScannedRows(self, np.arange(self.ints.shape[1]), in_order=True)


def _labels(data: np.ndarray, spans: np.ndarray) -> list[str]:
    """Each distinct string's text: UTF-8 (checked by the scanner), escapes decoded as JSON decodes them."""
    texts = [data[a:b].tobytes() for a, b in spans.tolist()]
    return [json.loads(b'"' + t + b'"') if b"\\" in t else t.decode() for t in texts]


def scan_piece(scanner: Scanner, data: np.ndarray, lo: int, hi: int) -> ScannedPiece | None:
    """The events of data[lo:hi] (a contiguous uint8 array), or None when the scanner gives the piece up or what it
    leaves to Python does not decode: the caller then reads the piece with msgspec, which words any error."""
    if data.dtype != np.uint8 or not data.flags.c_contiguous or not 0 <= lo <= hi <= len(data):
        raise ValueError("the scanner reads a contiguous uint8 array, within it")  # it checks no bounds of its own
    found = _Buffers(hi - lo)
    found.state[scan.POSITION] = lo
    while True:
        status = found.call(scanner, scan.SCAN, data, hi)
        if status == scan.OK:
            break
        if status in scan.GIVEN_UP or status not in _ROOMS:
            return None
        found.grow(status)
        if status in _REHASH:
            found.call(scanner, _REHASH[status], data, hi)
    try:
        return ScannedPiece(data, found)
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError, ValueError):  # msgspec.ValidationError too
        return None


_ROOMS = (scan.ROOM_ROWS, scan.ROOM_NAMES, scan.ROOM_CATS, scan.ROOM_OTHERS, scan.ROOM_INEXACT)
_REHASH = {scan.ROOM_NAMES: scan.REHASH_NAMES, scan.ROOM_CATS: scan.REHASH_CATS}


class ScannedRows:
    """Rows of a ScannedPiece (positions `at`), asked what chrome_trace._StructRows is asked of decoded structs.
    `in_order`: the rows are a run of the piece's (a slice), not a pick of some (see codes)."""

    def __init__(self, piece: ScannedPiece, at: np.ndarray, in_order: bool = True) -> None:
        self.piece, self.at, self.in_order = piece, at, in_order

    def __len__(self) -> int:
        return len(self.at)

    def take(self, index: np.ndarray) -> ScannedRows:
        return ScannedRows(self.piece, self.at[index], in_order=False)

    def slice(self, start: int, stop: int) -> ScannedRows:
        return ScannedRows(self.piece, self.at[start:stop], self.in_order)

    def floats(self, field: str) -> np.ndarray:
        return self.piece.floats[scan.TS if field == "ts" else scan.DUR, self.at]

    def codes(self, field: str) -> tuple[np.ndarray, list[str]]:
        """Codes into the strings these rows use, in the order these rows first use them (what _codes gives the
        builder from structs). The piece's own codes are in the order the piece first uses its strings: for a run of
        its rows, the strings first used in the run are in the run's order already (and the order of the others
        changes nothing the builder keeps); for a pick of rows (events left out for their times), it is found."""
        labels = self.piece.names if field == "name" else self.piece.cats
        codes = self.piece.ints[scan.NAME if field == "name" else scan.CAT, self.at]
        used = np.flatnonzero(np.bincount(codes, minlength=len(labels)))
        if not self.in_order and len(used) > 1:
            first = np.full(len(labels), len(codes), dtype=np.int64)
            np.minimum.at(first, codes, np.arange(len(codes)))
            used = used[np.argsort(first[used], kind="stable")]
        renumbered = np.empty(len(labels), dtype=np.int64)
        renumbered[used] = np.arange(len(used))
        return renumbered[codes], [labels[i] for i in used.tolist()]

    def ints(self, field: str) -> np.ndarray:
        return self.piece.ints[_FIELD_ROWS[field], self.at]

    def ids(self, field: str) -> np.ndarray:
        """pid or tid: the scanner reads integer ids only (a piece with a named lane is msgspec's)."""
        return self.ints(field)

    def volumes(self, field: str) -> np.ndarray:
        return self.ints(field)

    def texts(self) -> list[bytes]:
        """Each row's "Input Dims" as written (b"" where absent): the bytes msgspec.Raw holds."""
        data, ints = self.piece.data, self.piece.ints
        spans = zip(ints[scan.DIMS_START, self.at].tolist(), ints[scan.DIMS_STOP, self.at].tolist(), strict=True)
        return [data[a:b].tobytes() if a >= 0 else b"" for a, b in spans]
