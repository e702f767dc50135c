"""A compiled scanner of Kineto events: a piece of the event list straight into columns, no Python object per event.

Why: decoding with msgspec makes a struct (and an args struct, floats and strings) per event, and the columns are
then pulled out of those objects one attribute pass at a time: about 1.5 us an event on this project's VM for a
`with_stack` trace, most of a big trace's load. This scanner (Numba source, compiled with Numba's public caching:
parsers/kineto/compiled.py) walks the JSON bytes once and writes each duration event's fields into arrays, its name
and category as codes into tables of distinct strings. Which fields, their keys, kinds and rows come from the one
table of parsers/kineto/fields.py.

It is exact or it gives the piece up. It reads only what it fully understands: a strict JSON grammar (RFC 8259:
no trailing commas, no control characters in strings, valid escapes and UTF-8, numbers as JSON spells them),
events whose Stepscope fields have the types msgspec's schema accepts, no key twice among them, ts and dur that
Clinger's exact fast path turns into the double msgspec would read. Anything else anywhere in the piece and the
status says why (SYNTAX ... TEXT): the caller decodes that piece with msgspec, which then says what it says. A piece
it reads is one that msgspec reads to the same values, so its end is proved as pieces.py requires (a cut inside a
string or a nested value does not parse).

What it leaves to Python even in a piece it reads: metadata and instant events (`ph` M, i, I: a few per trace;
their spans come back for msgspec), names or categories with escapes (decoded by Python's json), and numbers beyond
the fast path (their spans: Python's float(), which rounds as msgspec does). The other phases are only counted.

It allocates nothing the caller must keep: the caller owns every array and the `state` vector, and a piece that
outgrows an array stops at the start of an event with a ROOM_* status; the caller grows that array and calls again,
and the scan goes on from there (parsers/kineto/scanned.py).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .fields import COUNTED_PHASES, EVENT_FIELDS, FLOAT_ROWS, INT_DEFAULTS, INT_FIELDS, INT_ROWS, KIND_CODES
from .scan_json import DEPTH, SYNTAX, TEXT, _member, _next_member, _number, _skip_value, _string, _ws

# Why a scan stopped. OK: the piece is read. 1-6: given up (the caller decodes the piece with msgspec).
OK = 0  # SYNTAX (1): not JSON as the scanner's grammar reads it (a cut inside a string or a nested value, say)
TYPE = 2  # a Stepscope field of an event with a type the scanner does not read (msgspec decides)
PHASE = 3  # a `ph` that is not one of the Chrome format's phases, spelled otherwise, or missing
DUPLICATE = 4  # a Stepscope key twice in one object (msgspec keeps the last; the scanner does not guess)
# DEPTH (5): nesting deeper than MAX_DEPTH; TEXT (6): a key spelled with escapes, an escaped surrogate, invalid
# UTF-8 (msgspec decodes, rejects or repairs); both from scan_json.py, as SYNTAX is
GIVEN_UP = {SYNTAX: "syntax", TYPE: "type", PHASE: "phase", DUPLICATE: "duplicate key", DEPTH: "depth", TEXT: "text"}
# 10-14: an array is full; grow it and call again (the scan resumes at the event it stopped before).
ROOM_ROWS, ROOM_NAMES, ROOM_CATS, ROOM_OTHERS, ROOM_INEXACT = 10, 11, 12, 13, 14
# The `state` vector: where the scan is and how much of each array it has filled.
POSITION, ROWS, EVENTS, NAMES, CATS, OTHERS, INEXACT = range(7)
STATE_SIZE = 7
PHASE_BYTES = 128  # `counted` has a count per ASCII byte

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_MAX_VOLUME = 1 << 62
_STREAM_LANE = np.frombuffer(b"stream ", dtype=np.uint8)

# The keys read, from the table: at the top level "ph", "args" and the fields not in args; in args the others. Each
# list is one byte string and the offsets of its keys; per field its kind, its row in ints or floats, its slot.
_PH, _ARGS = 0, 1
_TOP = [("ph", None), ("args", None), *((f.key, f) for f in EVENT_FIELDS if not f.in_args)]
_IN_ARGS = [(f.key, f) for f in EVENT_FIELDS if f.in_args]


def _keys(listed: list) -> tuple[np.ndarray, np.ndarray]:
    encoded = [key.encode() for key, _ in listed]
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), np.cumsum([0, *map(len, encoded)]).astype(np.int64)


def _layout(listed: list) -> np.ndarray:
    """Per key: its field's kind code, its row (ints or floats), its slot in the scratch spans (-1: none)."""
    times = [f.name for f in EVENT_FIELDS if f.kind == "time"]
    out = np.full((len(listed), 3), -1, dtype=np.int64)
    for k, (_, f) in enumerate(listed):
        if f is None:
            continue
        out[k, 0] = KIND_CODES[f.kind]
        out[k, 1] = FLOAT_ROWS[f.name] if f.kind == "time" else INT_ROWS[f.name]
        if f.kind == "text":
            out[k, 2] = 2 * _TEXTS.index(f.name)
        elif f.kind == "time":
            out[k, 2] = 2 * (len(_TEXTS) + times.index(f.name))
    return out


_TEXTS = ("name", "cat")  # the text fields, coded into the names and cats tables
_TOP_KEYS, _TOP_OFFSETS = _keys(_TOP)
_ARG_KEYS, _ARG_OFFSETS = _keys(_IN_ARGS)
_TOP_LAYOUT, _ARG_LAYOUT = _layout(_TOP), _layout(_IN_ARGS)
_TIME, _TEXT, _ID, _INT, _RAW, _VOLUME = (KIND_CODES[k] for k in ("time", "text", "id", "int", "raw", "volume"))
_TIMES = sum(1 for f in EVENT_FIELDS if f.kind == "time")
_SCRATCH = 2 * (len(_TEXTS) + _TIMES)  # (start, stop) of each text field, then of each inexact time
_DEFAULTS = np.array(INT_DEFAULTS, dtype=np.int64)
_NAME_ROW, _CAT_ROW = INT_ROWS["name"], INT_ROWS["cat"]

# Phases: X becomes a row, M/i/I go to msgspec, the rest of the Chrome format's phases are counted (fields.py).
_X = ord("X")
_TO_MSGSPEC = np.zeros(128, dtype=np.bool_)
for _c in "MiI":
    _TO_MSGSPEC[ord(_c)] = True
_COUNTED = np.zeros(128, dtype=np.bool_)
for _c in COUNTED_PHASES:
    _COUNTED[ord(_c)] = True


# Compiled when first called and kept in Numba's cache (compiled.py); error_model "numpy": no Python exception can
# be raised from here (a division has no zero check to fail).
_compiled = njit(cache=True, nogil=True, error_model="numpy")


@_compiled
def _hash(b, start, stop):
    """FNV-1a over the length and at most 16 bytes (the first and the last 8): a name's table lookup compares the
    whole string anyway, and hashing every byte of long kernel names was most of the lookup's time."""
    h = (_FNV_OFFSET ^ np.uint64(stop - start)) * _FNV_PRIME
    end = min(stop, start + 8)
    for k in range(start, end):
        h = (h ^ np.uint64(b[k])) * _FNV_PRIME
    for k in range(max(end, stop - 8), stop):
        h = (h ^ np.uint64(b[k])) * _FNV_PRIME
    return h


@_compiled
def _same(b, a_start, b_start, length):
    for k in range(length):  # noqa: SIM110 - Numba compiles a loop, not a generator
        if b[a_start + k] != b[b_start + k]:
            return False
    return True


@_compiled
def _find(b, start, stop, slots, spans):
    """(code, slot) of the string b[start:stop] in a table of distinct strings: open addressing over `slots` (-1:
    free), each string's first (start, stop) in `spans`. Code -1 and the free slot it would take when it is new."""
    length = stop - start
    mask = len(slots) - 1
    k = np.int64(_hash(b, start, stop) & np.uint64(mask))
    while True:
        code = slots[k]
        if code < 0:
            return -1, k
        if spans[code, 1] - spans[code, 0] == length and _same(b, spans[code, 0], start, length):
            return code, k
        k = (k + 1) & mask


@_compiled
def _code_of(b, start, stop, slots, spans, count):
    """(code, count) of the string b[start:stop] in a table of `count` distinct strings (see _find), added when new:
    the caller made room for one more."""
    code, k = _find(b, start, stop, slots, spans)
    if code >= 0:
        return code, count
    spans[count, 0], spans[count, 1] = start, stop
    slots[k] = count
    return count, count + 1


@_compiled
def rehash(b, spans, count, slots):
    """Fill fresh `slots` (all -1, a power of two over twice `count`) with the strings spans[:count]."""
    for code in range(count):
        _, k = _find(b, spans[code, 0], spans[code, 1], slots, spans)
        slots[k] = code


@_compiled
def _numeric_text(b, i, n):
    """(index after, value) of a string id at b[i] that is a plain integer, -?[0-9]{1,17}, or a legacy GPU lane,
    "stream " and 1 to 17 digits: 2021 traces write "tid": "25738" and "tid": "stream 7". The builder reads either
    as that integer whichever way it takes a slice's ids (numpy's int() or _id_of); any other string is -TYPE
    (a named lane: the builder's _id_of numbers those)."""
    end, escaped = _string(b, i + 1, n)
    if end < 0:
        return end, 0
    start = i + 1
    negative = start < end and b[start] == 45
    if negative:
        start += 1
    elif end - start > 7 and _same_key(b, start, _STREAM_LANE, 0, 7):
        start += 7
    if escaped or end == start or end - start > 17:
        return -TYPE, 0
    value = 0
    for k in range(start, end):
        if not (48 <= b[k] <= 57):
            return -TYPE, 0
        value = value * 10 + (b[k] - 48)
    return end + 1, -value if negative else value


@_compiled
def _volume_of(b, i, n):
    """(index after, volume) of a launch grid or block at b[i], read as the schema's `tuple[int, ...] | int | float
    | str | None` and turned into its volume as columns._volumes does: 0 unless 1 to 3 ints, each in [0, 2^31),
    whose product (in float64, as numpy's) is under 2^62. Index -status when the value is not read."""
    c = b[i]
    if c == 91:  # '['
        i = _ws(b, i + 1, n)
        if i < n and b[i] == 93:
            return i + 1, 0
        count = 0
        volume = 1.0
        product = 1
        valid = True
        while True:
            end, whole, value, _, _ = _number(b, i, n)
            if end < 0:
                return end, 0
            if not whole:
                return -TYPE, 0  # a float, a string, beyond 18 digits: msgspec's error or its wide ints
            count += 1
            if value < 0 or value >= 1 << 31:
                valid = False
            elif valid:
                volume *= value
                if volume < _MAX_VOLUME:
                    product *= value
            i = _ws(b, end, n)
            if i >= n:
                return -SYNTAX, 0
            if b[i] == 44:
                i = _ws(b, i + 1, n)
            elif b[i] == 93:
                break
            else:
                return -SYNTAX, 0
        if valid and count <= 3 and volume < _MAX_VOLUME:
            return i + 1, product
        return i + 1, 0
    if c == 34 or c == 110:  # a string or null: no volume
        return _skip_value(b, i, n, 2), 0
    if c == 45 or 48 <= c <= 57:
        end, _, _, _, exact = _number(b, i, n)
        if end >= 0 and not exact:
            return -TYPE, 0  # msgspec refuses a float out of range
        return end, 0
    return -TYPE, 0  # true, false, an object: not in the schema's union


@_compiled
def _which(b, start, length, keys, offsets):
    """The index of the key b[start:start+length] among `keys` (see _keys), or -1."""
    for k in range(len(offsets) - 1):
        lo = offsets[k]
        if offsets[k + 1] - lo == length and _same_key(b, start, keys, lo, length):
            return k
    return -1


@_compiled
def _same_key(b, start, keys, lo, length):
    for k in range(length):  # noqa: SIM110 - Numba compiles a loop, not a generator
        if b[start + k] != keys[lo + k]:
            return False
    return True


@_compiled
def _id_value(b, i, n):
    """(index after, value, ok) of a pid or tid: an integer, or a string that is one ("25738", "stream 7");
    anything else is not ok (a named lane: msgspec's path numbers those)."""
    c = b[i]
    if c == 45 or 48 <= c <= 57:
        end, whole, value, _, _ = _number(b, i, n)
        return end, value, whole  # a float, or beyond 18 digits: msgspec's int or a string id
    if c == 34:
        end, value = _numeric_text(b, i, n)
        if end != -TYPE:
            return end, value, True
    return _skip_value(b, i, n, 1), 0, False


@_compiled
def _value(b, i, n, layout, ints, floats, row, scratch, depth):
    """Read the value at b[i] of a field (its `layout` row: kind, row, slot) into this event's row; (index after
    it or -status, whether its type is one the scanner reads)."""
    kind, at, slot = layout[0], layout[1], layout[2]
    c = b[i]
    number = c == 45 or 48 <= c <= 57
    if kind == _TEXT:
        if c != 34:
            return _skip_value(b, i, n, depth), False
        end, _ = _string(b, i + 1, n)
        scratch[slot], scratch[slot + 1] = i + 1, end
        return (end + 1 if end >= 0 else end), True
    if kind == _TIME:
        if not number:
            return _skip_value(b, i, n, depth), False
        end, _, _, value, exact = _number(b, i, n)
        floats[at, row] = value if exact else np.nan
        if not exact:
            scratch[slot], scratch[slot + 1] = i, end
        return end, True
    if kind == _ID:
        end, value, ok = _id_value(b, i, n)
        ints[at, row] = value
        return end, ok
    if kind == _INT:
        if not number:
            return _skip_value(b, i, n, depth), False
        end, whole, value, _, _ = _number(b, i, n)
        ints[at, row] = value
        return end, whole
    if kind == _RAW:
        end = _skip_value(b, i, n, depth)
        ints[at, row], ints[at + 1, row] = i, end
        return end, True
    end, volume = _volume_of(b, i, n)
    if end == -TYPE:
        return _skip_value(b, i, n, depth), False
    ints[at, row] = volume
    return end, True


@_compiled
def _args(b, i, n, ints, floats, row, scratch):
    """The event's args object at b[i]; (index after it or -status, whether every field read has its type)."""
    if b[i] != 123:
        return _skip_value(b, i, n, 1), False
    i = _ws(b, i + 1, n)
    if i < n and b[i] == 125:
        return i + 1, True
    seen = 0
    typed = True
    while True:
        key_start, key_length, i = _member(b, i, n)
        if key_start < 0:
            return key_start, typed
        k = _which(b, key_start, key_length, _ARG_KEYS, _ARG_OFFSETS)
        if k < 0:
            i = _skip_value(b, i, n, 2)
        else:
            if seen & (1 << k):
                return -DUPLICATE, typed
            seen |= 1 << k
            i, ok = _value(b, i, n, _ARG_LAYOUT[k], ints, floats, row, scratch, 2)
            typed = typed and ok
        if i < 0:
            return i, typed
        i, more = _next_member(b, i, n)
        if i < 0 or not more:
            return i, typed


@_compiled
def _event(b, i, n, ints, floats, row, scratch):
    """The members of the event at b[i] ('{') into ints[:, row] and floats[:, row] (defaults first) and `scratch`
    (text and inexact spans): (index after it or -status, its phase byte or -1, whether every field has its type)."""
    for r in range(INT_FIELDS):
        ints[r, row] = _DEFAULTS[r]
    for r in range(_TIMES):
        floats[r, row] = np.nan
    for r in range(_SCRATCH):
        scratch[r] = 0 if r < 2 * len(_TEXTS) else -1  # an absent name is "", as msgspec's default
    phase, seen, typed = -1, 0, True
    i = _ws(b, i + 1, n)
    if i < n and b[i] == 125:  # '{}': no phase
        return -PHASE, phase, typed
    while True:
        key_start, key_length, i = _member(b, i, n)
        if key_start < 0:
            return key_start, phase, typed
        k = _which(b, key_start, key_length, _TOP_KEYS, _TOP_OFFSETS)
        if k == _PH:
            if b[i] != 34:
                return -PHASE, phase, typed
            end, escaped = _string(b, i + 1, n)
            if end < 0:
                return end, phase, typed
            if escaped or end != i + 2 or b[i + 1] >= 128:
                return -PHASE, phase, typed
            phase, i = b[i + 1], end + 1
        elif k == _ARGS:
            i, ok = _args(b, i, n, ints, floats, row, scratch)
            typed = typed and ok
        elif k > 0:
            i, ok = _value(b, i, n, _TOP_LAYOUT[k], ints, floats, row, scratch, 1)
            typed = typed and ok
        else:
            i = _skip_value(b, i, n, 1)
        if i < 0:
            return i, phase, typed
        if k >= 0:
            if seen & (1 << k):
                return -DUPLICATE, phase, typed
            seen |= 1 << k
        i, more = _next_member(b, i, n)
        if i < 0 or not more:
            return i, phase, typed


@_compiled
def _room(state, ints, name_slots, names, cat_slots, cats, others, inexact):
    """OK when every array has room for one more event of any kind, else the ROOM_* status of one that has not."""
    if state[ROWS] == ints.shape[1]:
        return ROOM_ROWS
    if 2 * (state[NAMES] + 1) > len(name_slots) or state[NAMES] == len(names):
        return ROOM_NAMES
    if 2 * (state[CATS] + 1) > len(cat_slots) or state[CATS] == len(cats):
        return ROOM_CATS
    if state[OTHERS] == len(others):
        return ROOM_OTHERS
    if state[INEXACT] + _TIMES > len(inexact):
        return ROOM_INEXACT
    return OK


@_compiled
def _row(b, state, ints, scratch, name_slots, names, cat_slots, cats, inexact):
    """Make the event just read a row: its name and category coded, its inexact numbers listed."""
    row = state[ROWS]
    ints[_NAME_ROW, row], state[NAMES] = _code_of(b, scratch[0], scratch[1], name_slots, names, state[NAMES])
    ints[_CAT_ROW, row], state[CATS] = _code_of(b, scratch[2], scratch[3], cat_slots, cats, state[CATS])
    for t in range(_TIMES):
        start = scratch[2 * (len(_TEXTS) + t)]
        if start >= 0:
            k = state[INEXACT]
            inexact[k, 0], inexact[k, 1] = row, t
            inexact[k, 2], inexact[k, 3] = start, scratch[2 * (len(_TEXTS) + t) + 1]
            state[INEXACT] = k + 1
    state[ROWS] = row + 1


@_compiled
def scan_into(b, hi, state, ints, floats, name_slots, names, cat_slots, cats, others, inexact, counted):
    """Scan the events from b[state[POSITION]] to b[hi]: `event (',' event)*` with whitespace around, a piece of the
    event list between its '[' or a comma and the next comma or ']'. Returns OK, a given-up status (state[POSITION]
    then says where) or a ROOM_* status (state[POSITION] is the event to resume at). See the module."""
    n = hi
    i = _ws(b, state[POSITION], n)
    scratch = np.empty(_SCRATCH, dtype=np.int64)
    status = OK
    if state[EVENTS] == 0 and i >= n:
        state[POSITION] = i
        return OK  # an empty piece
    while True:
        status = _room(state, ints, name_slots, names, cat_slots, cats, others, inexact)
        if status != OK:
            break  # checked before an event is read: an event never stops half-way
        if i >= n or b[i] != 123:  # '{'
            status = SYNTAX
            break
        start = i
        i, phase, typed = _event(b, i, n, ints, floats, state[ROWS], scratch)
        if i < 0:
            status = -i
            break
        if phase == _X:  # a duration event: a row
            if not typed:
                status = TYPE
                break
            _row(b, state, ints, scratch, name_slots, names, cat_slots, cats, inexact)
        elif 0 <= phase < 128 and _TO_MSGSPEC[phase]:
            others[state[OTHERS], 0], others[state[OTHERS], 1] = start, i
            state[OTHERS] += 1
        elif 0 <= phase < 128 and _COUNTED[phase]:
            counted[phase] += 1
        else:
            status = PHASE
            break
        state[EVENTS] += 1
        i = _ws(b, i, n)
        if i >= n:
            break
        if b[i] != 44:
            status = SYNTAX
            break
        i = _ws(b, i + 1, n)  # the next event: must be there (no trailing comma)
    state[POSITION] = i  # a ROOM_* status stops before an event: the scan resumes there
    return status
