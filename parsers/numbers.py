"""Numbers from files and names, bounded before they reach an int64 column.

JSON, SQLite and protobuf all carry integers wider than int64 (and text or inf where a number belongs);
numpy either raises on them or wraps them around. Everything goes through these helpers instead: a value
out of range reads as unknown and the caller counts it, so a hostile number never crashes a reader and
never turns into a negative duration.
"""

from __future__ import annotations

import re

import numpy as np

MAX_TIME = 1 << 62  # times and ids beyond this are not from any clock or counter; sums of two stay in int64


def int64_column(values, missing: int = -1):
    """(int64 array, ok mask) from a column of unknown type: text, None, NaN, inf, 1e300 and integers
    beyond +-2^62 are not ok and read as `missing`. Vectorised; exact for integers."""
    import pandas as pd  # the Kineto JSON reader imports this module's MAX_TIME and never calls this

    series = values if isinstance(values, pd.Series) else pd.Series(values)
    if series.dtype.kind in "iu":
        arr = series.to_numpy()
        ok = arr <= MAX_TIME if arr.dtype.kind == "u" else (arr >= -MAX_TIME) & (arr <= MAX_TIME)
        return np.where(ok, arr, missing).astype(np.int64), ok
    if series.dtype == object:
        # mixed column: exact for Python ints in range, everything else missing
        is_int = series.map(type).isin((int, np.int64)).to_numpy()
        small = is_int.copy()
        if is_int.any():
            ints = series[is_int]
            small[is_int] = ints.map(lambda v: -MAX_TIME <= v <= MAX_TIME).to_numpy(dtype=bool)
        out = np.full(len(series), missing, dtype=np.int64)
        out[small] = series[small].to_numpy(dtype=np.int64)
        floats = ~is_int & series.map(type).isin((float, np.float64)).to_numpy()
        if floats.any():
            f = series[floats].to_numpy(dtype=np.float64)
            good = np.isfinite(f) & (np.abs(f) <= MAX_TIME)
            idx = np.flatnonzero(floats)[good]
            out[idx] = f[good].astype(np.int64)
            small[idx] = True
        return out, small
    f = pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64)
    ok = np.isfinite(f) & (np.abs(f) <= MAX_TIME)
    return np.where(ok, f, missing).astype(np.int64), ok


MAX_TEXT_INT = 1 << 40  # counts parsed from names (tokens, batch, request, index): far above any real one
_DIGITS = re.compile(r"\d+")


def bounded_int(text: str | None, limit: int = MAX_TEXT_INT) -> int | None:
    """The integer written in `text` (digits only), None when absent, not digits or not below `limit`."""
    if not text or len(text) > 15 or not text.isdigit():  # 15 digits: never builds a huge int from text
        return None
    value = int(text)
    return value if value < limit else None


def has_oversized_number(text: str, limit: int = MAX_TEXT_INT) -> bool:
    """Whether `text` holds a run of digits at or beyond `limit` (such an annotation is not trusted)."""
    return any(bounded_int(m) is None for m in _DIGITS.findall(text[:2000]))
