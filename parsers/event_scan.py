"""A compiled scanner of Kineto events: a piece of the event list straight into columns, no Python object per event.

Why: decoding with msgspec makes a struct (and an args struct, floats and strings) per event, and the columns are
then pulled out of those objects one attribute pass at a time; together about 1 us an event on this project's VM,
most of a big trace's load. This scanner (Numba source, built into machine code once: parsers/scanner.py) walks
the JSON bytes once and writes each duration event's fields into arrays, its name and category as codes into
tables of distinct strings.

It is exact or it gives the piece up. It reads only what it fully understands: a strict JSON grammar (RFC 8259:
no trailing commas, no control characters in strings, valid escapes and UTF-8, numbers as JSON spells them),
events whose Stepscope fields have the types msgspec's schema (parsers.kineto_schema) accepts, no key twice among
them, ts and dur that Clinger's exact fast path turns into the double msgspec would read. Anything else anywhere in
the piece and the status says why (SYNTAX ... TEXT): the caller decodes that piece with msgspec, which then says
what it says (a value that does not parse, a type error, invalid UTF-8 to repair). A piece it reads is one that
msgspec reads to the same values, so its end is proved as split_decode requires (a cut inside a string or a
nested value does not parse).

What it leaves to Python even in a piece it reads: metadata and instant events (`ph` M, i, I: a few per trace;
their spans come back for msgspec), names or categories with escapes (their spans: decoded by Python's json), and
numbers beyond the fast path (their spans: Python's float(), which rounds as msgspec does). The other phases
(flows, counters, ...) are only counted, as the schema only counts them.

It allocates nothing: the caller owns every array and the `state` vector, and a piece that outgrows an array stops
at the start of an event with a ROOM_* status; the caller grows that array and calls again, and the scan goes on
from there (parsers.scanned_piece). So every function here runs without Numba's runtime (`_nrt=False`): with it,
each call between them increfs and decrefs the arrays passed (atomic operations) and a call to `_ws` cost about
12 ns instead of under 1 (a loop over an 8 MB piece: 101 ms against 7.9 ms).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .kineto_schema import COUNTED_PHASES
from .scan_layout import (
    BLOCK,
    CAT,
    CATS,
    CORRELATION,
    DEPTH,
    DEVICE,
    DIMS_START,
    DIMS_STOP,
    DUPLICATE,
    DUR,
    ENTRY_ARGS,
    EVENTS,
    EXTERNAL_ID,
    EXTERNAL_ID_LEGACY,
    GRID,
    INEXACT,
    INT_FIELDS,
    MAX_DEPTH,
    NAME,
    NAMES,
    OK,
    OTHERS,
    PHASE,
    PHASE_BYTES,
    PID,
    POSITION,
    REHASH_CATS,
    REHASH_NAMES,
    ROOM_CATS,
    ROOM_INEXACT,
    ROOM_NAMES,
    ROOM_OTHERS,
    ROOM_ROWS,
    ROWS,
    STATE_SIZE,
    STREAM,
    SYNTAX,
    TEXT,
    TID,
    TS,
    TYPE,
)

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_POW10 = np.array([10.0**k for k in range(23)])  # exact doubles: Clinger's fast path
_MANTISSA_LIMIT = 1 << 53
_MAX_VOLUME = 1 << 62

# Keys as byte arrays for the compiled comparisons.
_PH = np.frombuffer(b"ph", dtype=np.uint8)
_CAT = np.frombuffer(b"cat", dtype=np.uint8)
_NAME = np.frombuffer(b"name", dtype=np.uint8)
_PID = np.frombuffer(b"pid", dtype=np.uint8)
_TID = np.frombuffer(b"tid", dtype=np.uint8)
_TSKEY = np.frombuffer(b"ts", dtype=np.uint8)
_DURKEY = np.frombuffer(b"dur", dtype=np.uint8)
_ARGS = np.frombuffer(b"args", dtype=np.uint8)
_STREAM_LANE = np.frombuffer(b"stream ", dtype=np.uint8)
_ARG_KEYS = (  # args' keys read, in the order of their codes 1..8
    np.frombuffer(b"correlation", dtype=np.uint8),
    np.frombuffer(b"External id", dtype=np.uint8),
    np.frombuffer(b"external id", dtype=np.uint8),
    np.frombuffer(b"device", dtype=np.uint8),
    np.frombuffer(b"stream", dtype=np.uint8),
    np.frombuffer(b"Input Dims", dtype=np.uint8),
    np.frombuffer(b"grid", dtype=np.uint8),
    np.frombuffer(b"block", dtype=np.uint8),
)
_CORRELATION_ARG, _EXTERNAL_ARG, _LEGACY_ARG, _DEVICE_ARG, _STREAM_ARG, _DIMS_ARG, _GRID_ARG, _BLOCK_ARG = range(1, 9)

# Phases: X becomes a row, M/i/I go to msgspec, the rest of the Chrome format's phases are counted (kineto_schema).
_X = ord("X")
_TO_MSGSPEC = np.zeros(128, dtype=np.bool_)
for _c in "MiI":
    _TO_MSGSPEC[ord(_c)] = True
_COUNTED = np.zeros(128, dtype=np.bool_)
for _c in COUNTED_PHASES:
    _COUNTED[ord(_c)] = True


# Compiled when first called (by the build, parsers.scanner; and by tests), without Numba's runtime (see the module);
# error_model "numpy": no Python exception can be raised from here (a division has no zero check to fail).
_compiled = njit(cache=True, nogil=True, _nrt=False, error_model="numpy")


@_compiled
def _ws(b, i, n):
    while i < n:
        c = b[i]
        if c == 32 or c == 10 or c == 13 or c == 9:
            i += 1
        else:
            break
    return i


@_compiled
def _hex(c):
    return (48 <= c <= 57) or (65 <= c <= 70) or (97 <= c <= 102)


@_compiled
def _utf8_tail(b, i, n):
    """The index after the multi-byte UTF-8 sequence starting at b[i] (a byte >= 0x80), or -1 if invalid:
    overlong forms, surrogates and code points past U+10FFFF are invalid, as in Python's strict decoder."""
    c = b[i]
    if 0xC2 <= c <= 0xDF:
        length, lo, hi = 2, 0x80, 0xBF
    elif c == 0xE0:
        length, lo, hi = 3, 0xA0, 0xBF
    elif 0xE1 <= c <= 0xEC or c == 0xEE or c == 0xEF:
        length, lo, hi = 3, 0x80, 0xBF
    elif c == 0xED:
        length, lo, hi = 3, 0x80, 0x9F
    elif c == 0xF0:
        length, lo, hi = 4, 0x90, 0xBF
    elif 0xF1 <= c <= 0xF3:
        length, lo, hi = 4, 0x80, 0xBF
    elif c == 0xF4:
        length, lo, hi = 4, 0x80, 0x8F
    else:
        return -1
    if i + length > n:
        return -1
    if not (lo <= b[i + 1] <= hi):
        return -1
    for k in range(2, length):
        if not (0x80 <= b[i + k] <= 0xBF):
            return -1
    return i + length


@_compiled
def _string(b, i, n):
    """b[i] is the byte after an opening quote. Returns (index of the closing quote, whether an escape was seen), or
    (-status, 0) when the string is not valid JSON text or holds what the scanner gives up on."""
    escaped = 0
    while i < n:
        c = b[i]
        if c == 34:  # '"'
            return i, escaped
        if c == 92:  # backslash
            escaped = 1
            if i + 1 >= n:
                return -SYNTAX, 0
            e = b[i + 1]
            if e == 117:  # \uXXXX
                if i + 6 > n:
                    return -SYNTAX, 0
                code = 0
                for k in range(2, 6):
                    h = b[i + k]
                    if not _hex(h):
                        return -SYNTAX, 0
                    code = code * 16 + (h - 48 if h <= 57 else (h - 55 if h <= 70 else h - 87))
                if 0xD800 <= code <= 0xDFFF:
                    return -TEXT, 0  # surrogates: msgspec pairs or rejects them
                i += 6
            elif e == 34 or e == 92 or e == 47 or e == 98 or e == 102 or e == 110 or e == 114 or e == 116:
                i += 2
            else:
                return -SYNTAX, 0
        elif c < 32:
            return -SYNTAX, 0
        elif c < 128:
            i += 1
        else:
            i = _utf8_tail(b, i, n)
            if i < 0:
                return -TEXT, 0
    return -SYNTAX, 0


@_compiled
def _number(b, i, n):
    """A JSON number at b[i]. Returns (end, whole, integer value, float value, exact); end < 0 on a syntax error.
    `whole`: an integer literal (no fraction or exponent) that fits int64, the value beside it. `exact`: the float
    is the correctly rounded double (Clinger's fast path: at most 18 significant digits, a mantissa under 2^53 and
    a power of ten within 22)."""
    start = i
    negative = i < n and b[i] == 45  # '-'
    if negative:
        i += 1
    if i >= n or not (48 <= b[i] <= 57):
        return -SYNTAX, False, 0, 0.0, False
    mantissa = 0
    digits = 0  # significant digits taken into the mantissa (leading zeros are not)
    if b[i] == 48:  # a leading '0' stands alone
        i += 1
    else:
        while i < n and 48 <= b[i] <= 57:
            if digits < 18:
                mantissa = mantissa * 10 + (b[i] - 48)
            digits += 1
            i += 1
    integer = True
    fraction = 0
    if i < n and b[i] == 46:  # '.'
        integer = False
        i += 1
        if i >= n or not (48 <= b[i] <= 57):
            return -SYNTAX, False, 0, 0.0, False
        while i < n and 48 <= b[i] <= 57:
            if mantissa != 0 or b[i] != 48:
                if digits < 18:
                    mantissa = mantissa * 10 + (b[i] - 48)
                digits += 1
            fraction += 1
            i += 1
    exponent = 0
    if i < n and (b[i] == 101 or b[i] == 69):  # 'e' 'E'
        integer = False
        i += 1
        exp_negative = False
        if i < n and (b[i] == 43 or b[i] == 45):
            exp_negative = b[i] == 45
            i += 1
        if i >= n or not (48 <= b[i] <= 57):
            return -SYNTAX, False, 0, 0.0, False
        while i < n and 48 <= b[i] <= 57:
            if exponent < 100_000:
                exponent = exponent * 10 + (b[i] - 48)
            i += 1
        if exp_negative:
            exponent = -exponent
    whole = integer and digits <= 18  # an integer that fits int64
    signed = -mantissa if negative else mantissa
    power = exponent - fraction
    if digits > 18 or i - start > 400 or mantissa >= _MANTISSA_LIMIT or power < -22 or power > 22:
        return i, whole, signed, 0.0, False
    value = float(mantissa)
    value = value * _POW10[power] if power >= 0 else value / _POW10[-power]
    return i, whole, signed, -value if negative else value, True


@_compiled
def _skip_number(b, i, n):
    """The index after the JSON number at b[i], or -SYNTAX: the grammar only, no value."""
    if i < n and b[i] == 45:
        i += 1
    if i >= n or not (48 <= b[i] <= 57):
        return -SYNTAX
    if b[i] == 48:
        i += 1
    else:
        while i < n and 48 <= b[i] <= 57:
            i += 1
    if i < n and b[i] == 46:
        i += 1
        if i >= n or not (48 <= b[i] <= 57):
            return -SYNTAX
        while i < n and 48 <= b[i] <= 57:
            i += 1
    if i < n and (b[i] == 101 or b[i] == 69):
        i += 1
        if i < n and (b[i] == 43 or b[i] == 45):
            i += 1
        if i >= n or not (48 <= b[i] <= 57):
            return -SYNTAX
        while i < n and 48 <= b[i] <= 57:
            i += 1
    return i


@_compiled
def _key(b, i, n):
    """A member's key and colon at b[i]; the index of its value, or -status."""
    if i >= n or b[i] != 34:
        return -SYNTAX
    end, _ = _string(b, i + 1, n)
    if end < 0:
        return end
    i = _ws(b, end + 1, n)
    if i >= n or b[i] != 58:
        return -SYNTAX
    return _ws(b, i + 1, n)


@_compiled
def _skip_value(b, i, n, depth):
    """The index after the JSON value at b[i] (nested `depth` deep), or -status. A loop with the open containers
    as a bit stack (1: object), not recursion."""
    objects = np.uint64(0)
    level = 0
    while True:
        # a value starts at b[i]
        if i >= n:
            return -SYNTAX
        c = b[i]
        if c == 123 or c == 91:  # '{' '['
            if depth + level >= MAX_DEPTH:
                return -DEPTH
            close = 125 if c == 123 else 93
            if c == 123:
                objects |= np.uint64(1) << np.uint64(level)
            else:
                objects &= ~(np.uint64(1) << np.uint64(level))
            level += 1
            i = _ws(b, i + 1, n)
            if i < n and b[i] == close:
                level -= 1
                i += 1
            else:
                if c == 123:
                    i = _key(b, i, n)
                    if i < 0:
                        return i
                continue
        elif c == 34:
            end, _ = _string(b, i + 1, n)
            if end < 0:
                return end
            i = end + 1
        elif c == 116:  # true
            if not (i + 4 <= n and b[i + 1] == 114 and b[i + 2] == 117 and b[i + 3] == 101):
                return -SYNTAX
            i += 4
        elif c == 102:  # false
            if not (i + 5 <= n and b[i + 1] == 97 and b[i + 2] == 108 and b[i + 3] == 115 and b[i + 4] == 101):
                return -SYNTAX
            i += 5
        elif c == 110:  # null
            if not (i + 4 <= n and b[i + 1] == 117 and b[i + 2] == 108 and b[i + 3] == 108):
                return -SYNTAX
            i += 4
        else:
            i = _skip_number(b, i, n)
            if i < 0:
                return i
        # after a value: close containers or go on to the next member
        while True:
            if level == 0:
                return i
            i = _ws(b, i, n)
            if i >= n:
                return -SYNTAX
            in_object = (objects >> np.uint64(level - 1)) & np.uint64(1)
            if b[i] == 44:  # ','
                i = _ws(b, i + 1, n)
                if in_object:
                    i = _key(b, i, n)
                    if i < 0:
                        return i
                break
            if b[i] == (125 if in_object else 93):
                level -= 1
                i += 1
            else:
                return -SYNTAX


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
def _key_is(b, start, length, text):
    if length != len(text):
        return False
    for k in range(length):  # noqa: SIM110 - Numba compiles a loop, not a generator
        if b[start + k] != text[k]:
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
    elif end - start > 7 and _key_is(b, start, 7, _STREAM_LANE):
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
    | str | None` and turned into its volume as chrome_trace._volumes does: 0 unless 1 to 3 ints, each in [0, 2^31),
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
def _member(b, i, n):
    """A member's key at b[i] and its colon: (key start, key length, index of its value), or (-status, 0, 0). A key
    spelled with escapes is TEXT: it may be one of the schema's keys."""
    if i >= n or b[i] != 34:
        return -SYNTAX, 0, 0
    end, escaped = _string(b, i + 1, n)
    if end < 0:
        return end, 0, 0
    if escaped:
        return -TEXT, 0, 0
    j = _ws(b, end + 1, n)
    if j >= n or b[j] != 58:  # ':'
        return -SYNTAX, 0, 0
    j = _ws(b, j + 1, n)
    if j >= n:
        return -SYNTAX, 0, 0
    return i + 1, end - i - 1, j


@_compiled
def _next_member(b, i, n):
    """After a member's value at b[i]: (index of the next member, 1) past a comma, (index past the '}', 0) at the
    object's end, or (-SYNTAX, 0)."""
    i = _ws(b, i, n)
    if i >= n:
        return -SYNTAX, 0
    if b[i] == 44:  # ','
        return _ws(b, i + 1, n), 1
    if b[i] == 125:  # '}'
        return i + 1, 0
    return -SYNTAX, 0


@_compiled
def scan_into(b, hi, state, ints, floats, name_slots, names, cat_slots, cats, others, inexact, counted):
    """Scan the events from b[state[POSITION]] to b[hi]: `event (',' event)*` with whitespace around, a piece of the
    event list between its '[' or a comma and the next comma or ']'. Returns OK, a given-up status (state[POSITION]
    then says where) or a ROOM_* status (state[POSITION] is the event to resume at). See the module."""
    n = hi
    i = state[POSITION]
    rows, events = state[ROWS], state[EVENTS]
    n_names, n_cats, n_others, n_inexact = state[NAMES], state[CATS], state[OTHERS], state[INEXACT]
    status = OK
    i = _ws(b, i, n)
    event_start = i
    if events == 0 and i >= n:
        state[POSITION] = i
        return OK  # an empty piece
    while True:
        # room for one more event of any kind, checked before it is read: an event never stops half-way
        if rows == ints.shape[1]:
            status = ROOM_ROWS
        elif 2 * (n_names + 1) > len(name_slots) or n_names == len(names):
            status = ROOM_NAMES
        elif 2 * (n_cats + 1) > len(cat_slots) or n_cats == len(cats):
            status = ROOM_CATS
        elif n_others == len(others):
            status = ROOM_OTHERS
        elif n_inexact + 2 > len(inexact):
            status = ROOM_INEXACT
        if status != OK:
            break
        if i >= n or b[i] != 123:  # '{'
            status = SYNTAX
            break
        event_start = i
        phase = -1
        seen = 0  # a bit per Stepscope key read
        problem = OK  # why this event cannot be a row (only if its phase is X)
        name_start = name_stop = cat_start = cat_stop = 0
        ts = dur = np.nan
        ts_start = ts_stop = dur_start = dur_stop = -1
        pid = tid = 0
        correlation = external = legacy = device = stream = -1
        grid = block = 0
        dims_start = dims_stop = -1
        i = _ws(b, i + 1, n)
        if i < n and b[i] == 125:  # '{}': no phase
            status = PHASE
            break
        while True:  # the event's members
            key_start, key_length, i = _member(b, i, n)
            if key_start < 0:
                status = -key_start
                break
            c = b[i]
            number = c == 45 or 48 <= c <= 57
            bit = 0
            if _key_is(b, key_start, key_length, _PH):
                bit = 1
                if c != 34:
                    status = PHASE
                    break
                end, escaped = _string(b, i + 1, n)
                if end < 0:
                    status = -end
                    break
                if escaped or end != i + 2 or b[i + 1] >= 128:
                    status = PHASE
                    break
                phase = b[i + 1]
                i = end + 1
            elif _key_is(b, key_start, key_length, _NAME) or _key_is(b, key_start, key_length, _CAT):
                bit = 2 if key_length == 4 else 4
                if c == 34:
                    end, _ = _string(b, i + 1, n)
                    if end >= 0:
                        if bit == 2:
                            name_start, name_stop = i + 1, end
                        else:
                            cat_start, cat_stop = i + 1, end
                    i = end + 1 if end >= 0 else end
                else:
                    problem = TYPE
                    i = _skip_value(b, i, n, 1)
            elif _key_is(b, key_start, key_length, _PID) or _key_is(b, key_start, key_length, _TID):
                bit = 8 if b[key_start] == 112 else 16
                value = 0
                if number:
                    end, whole, value, _, _ = _number(b, i, n)
                    if not whole:
                        problem = TYPE  # a float, or beyond 18 digits: msgspec's int or a string id
                elif c == 34:
                    end, value = _numeric_text(b, i, n)
                    if end == -TYPE:  # a named lane ("Spans", "stream 7"): the builder's _id_of maps those
                        problem = TYPE
                        end = _skip_value(b, i, n, 1)
                else:
                    problem = TYPE
                    end = _skip_value(b, i, n, 1)
                if bit == 8:
                    pid = value
                else:
                    tid = value
                i = end
            elif _key_is(b, key_start, key_length, _TSKEY) or _key_is(b, key_start, key_length, _DURKEY):
                bit = 32 if key_length == 2 else 64
                if number:
                    end, _, _, value, exact = _number(b, i, n)
                    if bit == 32:
                        ts = value if exact else np.nan
                        ts_start, ts_stop = (-1, -1) if exact else (i, end)
                    else:
                        dur = value if exact else np.nan
                        dur_start, dur_stop = (-1, -1) if exact else (i, end)
                    i = end
                else:
                    problem = TYPE
                    i = _skip_value(b, i, n, 1)
            elif _key_is(b, key_start, key_length, _ARGS):
                bit = 128
                if c != 123:
                    problem = TYPE
                    i = _skip_value(b, i, n, 1)
                else:
                    args_seen = 0
                    i = _ws(b, i + 1, n)
                    if i < n and b[i] == 125:
                        i += 1
                    else:
                        while True:  # the args' members
                            key_start, key_length, i = _member(b, i, n)
                            if key_start < 0:
                                i = key_start
                                break
                            c = b[i]
                            arg = 0
                            for code in range(len(_ARG_KEYS)):
                                if _key_is(b, key_start, key_length, _ARG_KEYS[code]):
                                    arg = code + 1
                                    break
                            if arg:
                                if args_seen & (1 << arg):
                                    i = -DUPLICATE
                                    break
                                args_seen |= 1 << arg
                            if _CORRELATION_ARG <= arg <= _STREAM_ARG:
                                if c == 45 or 48 <= c <= 57:
                                    end, whole, value, _, _ = _number(b, i, n)
                                    if not whole:
                                        problem = TYPE
                                    if arg == _CORRELATION_ARG:
                                        correlation = value
                                    elif arg == _EXTERNAL_ARG:
                                        external = value
                                    elif arg == _LEGACY_ARG:
                                        legacy = value
                                    elif arg == _DEVICE_ARG:
                                        device = value
                                    else:
                                        stream = value
                                    i = end
                                else:
                                    problem = TYPE
                                    i = _skip_value(b, i, n, 2)
                            elif arg == _DIMS_ARG:
                                dims_start = i
                                i = _skip_value(b, i, n, 2)
                                dims_stop = i
                            elif arg in (_GRID_ARG, _BLOCK_ARG):
                                end, volume = _volume_of(b, i, n)
                                if end == -TYPE:
                                    problem = TYPE
                                    end = _skip_value(b, i, n, 2)
                                if arg == _GRID_ARG:
                                    grid = volume
                                else:
                                    block = volume
                                i = end
                            else:
                                i = _skip_value(b, i, n, 2)
                            if i < 0:
                                break
                            i, more = _next_member(b, i, n)
                            if i < 0 or not more:
                                break
            else:
                i = _skip_value(b, i, n, 1)
            if i < 0:
                status = -i
                break
            if seen & bit:
                status = DUPLICATE
                break
            seen |= bit
            i, more = _next_member(b, i, n)
            if i < 0:
                status = -i
                break
            if not more:
                break
        if status != OK:
            break
        if phase == _X:  # a duration event: a row
            if problem != OK:
                status = problem
                break
            ints[NAME, rows], n_names = _code_of(b, name_start, name_stop, name_slots, names, n_names)
            ints[CAT, rows], n_cats = _code_of(b, cat_start, cat_stop, cat_slots, cats, n_cats)
            ints[PID, rows] = pid
            ints[TID, rows] = tid
            ints[CORRELATION, rows] = correlation
            ints[EXTERNAL_ID, rows] = external
            ints[EXTERNAL_ID_LEGACY, rows] = legacy
            ints[DEVICE, rows] = device
            ints[STREAM, rows] = stream
            ints[GRID, rows] = grid
            ints[BLOCK, rows] = block
            ints[DIMS_START, rows] = dims_start
            ints[DIMS_STOP, rows] = dims_stop
            floats[TS, rows] = ts
            floats[DUR, rows] = dur
            if ts_start >= 0:
                inexact[n_inexact, 0], inexact[n_inexact, 1] = rows, TS
                inexact[n_inexact, 2], inexact[n_inexact, 3] = ts_start, ts_stop
                n_inexact += 1
            if dur_start >= 0:
                inexact[n_inexact, 0], inexact[n_inexact, 1] = rows, DUR
                inexact[n_inexact, 2], inexact[n_inexact, 3] = dur_start, dur_stop
                n_inexact += 1
            rows += 1
        elif 0 <= phase < 128 and _TO_MSGSPEC[phase]:
            others[n_others, 0], others[n_others, 1] = event_start, i
            n_others += 1
        elif 0 <= phase < 128 and _COUNTED[phase]:
            counted[phase] += 1
        else:
            status = PHASE
            break
        events += 1
        i = _ws(b, i, n)
        if i >= n:
            break
        if b[i] != 44:
            status = SYNTAX
            break
        i = _ws(b, i + 1, n)  # the next event: must be there (no trailing comma)
    state[POSITION] = i  # a ROOM_* status stops before an event: the scan resumes there
    state[ROWS], state[EVENTS] = rows, events
    state[NAMES], state[CATS], state[OTHERS], state[INEXACT] = n_names, n_cats, n_others, n_inexact
    return status


def c_entry():
    """The scanner as one C function (numba.cfunc, compiled here): what parsers.scanner turns into machine code that
    a read loads without Numba. Its arguments are scan_layout.ENTRY_ARGS, pointers and the lengths of what they
    point to; the first says what to do: SCAN, or fill grown slots (REHASH_NAMES, REHASH_CATS)."""
    from numba import carray, cfunc, types

    kinds = {"i": types.int64, "b": types.CPointer(types.uint8), "p": types.CPointer(types.int64)}
    kinds["f"] = types.CPointer(types.float64)
    signature = types.int64(*(kinds[kind] for _, kind in ENTRY_ARGS))

    @cfunc(signature, nogil=True, error_model="numpy")
    def entry(op, data, data_len, hi, state, ints, rows, floats, name_slots, names, names_len, cat_slots, cats,
              cats_len, others, others_len, inexact, inexact_len, counted):  # fmt: skip
        b = carray(data, (data_len,))
        state_ = carray(state, (STATE_SIZE,))
        names_ = carray(names, (names_len, 2))
        name_slots_ = carray(name_slots, (2 * names_len,))
        cats_ = carray(cats, (cats_len, 2))
        cat_slots_ = carray(cat_slots, (2 * cats_len,))
        if op == REHASH_NAMES:
            rehash(b, names_, state_[NAMES], name_slots_)
            return OK
        if op == REHASH_CATS:
            rehash(b, cats_, state_[CATS], cat_slots_)
            return OK
        return scan_into(
            b,
            hi,
            state_,
            carray(ints, (INT_FIELDS, rows)),
            carray(floats, (2, rows)),
            name_slots_,
            names_,
            cat_slots_,
            cats_,
            carray(others, (others_len, 2)),
            carray(inexact, (inexact_len, 4)),
            carray(counted, (PHASE_BYTES,)),
        )

    return entry
