"""The JSON grammar the compiled event scanner (parsers/kineto/scan.py) reads: RFC 8259 strictly, no values built.

Every function takes the bytes `b`, an index `i` and the end `n`, and returns where what it read ends (negative: a
status of scan.py, the piece given up). Compiled with Numba's public caching, as scan.py is (compiled.py).
"""

from __future__ import annotations

import numpy as np
from numba import njit

SYNTAX, TEXT, DEPTH = 1, 6, 5  # scan.py's statuses
MAX_DEPTH = 64  # msgspec's own limit is deeper; deeper still is given up (the scan keeps a 64-bit stack)
_POW10 = np.array([10.0**k for k in range(23)])  # exact doubles: Clinger's fast path
_MANTISSA_LIMIT = 1 << 53

# error_model "numpy": no Python exception can be raised from here (a division has no zero check to fail).
_compiled = njit(cache=True, nogil=True, error_model="numpy")


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
