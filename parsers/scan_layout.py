"""The compiled event scanner's interface, shared by its source (parsers.event_scan, which needs Numba), its build
and loader (parsers.scanner, which need only llvmlite) and its Python side (parsers.scanned_piece): status codes,
the state vector, the rows of its output arrays and its C entry point's arguments. No Numba, nothing of ours."""

from __future__ import annotations

# Why a scan stopped. OK: the piece is read. 1-6: given up (the caller decodes the piece with msgspec).
OK = 0
SYNTAX = 1  # not JSON as the scanner's grammar reads it (a cut inside a string or a nested value, say)
TYPE = 2  # a Stepscope field of an event with a type the scanner does not read (msgspec decides)
PHASE = 3  # a `ph` that is not one of the Chrome format's phases, spelled otherwise, or missing
DUPLICATE = 4  # a Stepscope key twice in one object (msgspec keeps the last; the scanner does not guess)
DEPTH = 5  # nesting deeper than MAX_DEPTH
TEXT = 6  # a key spelled with escapes, an escaped surrogate, invalid UTF-8: msgspec decodes, rejects or repairs
GIVEN_UP = {SYNTAX: "syntax", TYPE: "type", PHASE: "phase", DUPLICATE: "duplicate key", DEPTH: "depth", TEXT: "text"}
# 10-14: an array is full; grow it and call again (the scan resumes at the event it stopped before).
ROOM_ROWS, ROOM_NAMES, ROOM_CATS, ROOM_OTHERS, ROOM_INEXACT = 10, 11, 12, 13, 14

MAX_DEPTH = 64  # msgspec's own limit is deeper; deeper still is given up (the scan keeps a 64-bit stack)

# The `state` vector: where the scan is and how much of each array it has filled.
POSITION, ROWS, EVENTS, NAMES, CATS, OTHERS, INEXACT = range(7)
STATE_SIZE = 7

# Rows of `ints`, one column per duration event: -1 where the event does not say (0 for the launch volumes; the
# span of its "Input Dims" is -1, -1 when it has none).
NAME, CAT, PID, TID, CORRELATION, EXTERNAL_ID, EXTERNAL_ID_LEGACY, DEVICE, STREAM, GRID, BLOCK = range(11)
DIMS_START, DIMS_STOP = 11, 12
INT_FIELDS = 13
TS, DUR = 0, 1  # rows of `floats`; NaN where absent or inexact (see `inexact`)
PHASE_BYTES = 128  # `counted` has a count per ASCII byte

# What the C entry point does (its first argument), and its arguments in order: "i" an int64, "b" a pointer to
# uint8, "p" a pointer to int64, "f" a pointer to float64.
SCAN, REHASH_NAMES, REHASH_CATS = 0, 1, 2
ENTRY_ARGS = (
    ("op", "i"),
    ("data", "b"),
    ("data_len", "i"),
    ("hi", "i"),  # where the piece ends
    ("state", "p"),  # STATE_SIZE
    ("ints", "p"),  # INT_FIELDS x rows
    ("rows", "i"),  # the capacity of ints and floats
    ("floats", "f"),  # 2 x rows
    ("name_slots", "p"),  # 2 x names
    ("names", "p"),  # names x 2: each distinct name's (start, stop)
    ("names_len", "i"),
    ("cat_slots", "p"),
    ("cats", "p"),
    ("cats_len", "i"),
    ("others", "p"),  # others x 2: (start, stop) of each event left to msgspec
    ("others_len", "i"),
    ("inexact", "p"),  # inexact x 4: (row, TS or DUR, start, stop) of each number left to float()
    ("inexact_len", "i"),
    ("counted", "p"),  # PHASE_BYTES
)
