"""How every number is written for a person: the app, the HTML report, the CLI's text and markdown all call this.

Three significant digits (a profile is not more precise than that, and more digits only slow the reader), the
unit chosen by magnitude (a time in ns, us, ms or s; a size in B, KiB, MiB, GiB; a count or a rate compact: 1.67k,
31.2k, 1.2M), "—" where there is no value. A row that compares values (A, B and their difference) writes them in
one unit, the one its largest value needs, so 2.0 ms is never set against 295 us.

Tables that stay numeric (sortable in the app) round with `round_sig` and name their unit in the header.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

MISSING = "—"
DIGITS = 3

# times: the unit a value is given in -> nanoseconds
TIME_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
_TIME_STEPS = (("s", 1e9), ("ms", 1e6), ("us", 1e3), ("ns", 1.0))
_COMPACT = (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3))
_BYTE_UNITS = (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))
_RATE_UNITS = {"GB/s": (("TB/s", 1e3), ("GB/s", 1.0), ("MB/s", 1e-3))}


def missing(value: object) -> bool:
    """None, NaN, infinity or something that is not a number: nothing to write."""
    if value is None or isinstance(value, bool):
        return value is None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return True
    return not math.isfinite(number)


def sig(value: float, digits: int = DIGITS, strip: bool = False) -> str:
    """`value` to `digits` significant digits, thousands separated, no exponent: 463951.544 -> "464,000",
    7.6494 -> "7.65", 0.0012345 -> "0.00123", 11 -> "11.0" (with `strip`, no trailing zeros: "11")."""
    value = float(value)
    if value == 0:
        return "0"
    exponent = math.floor(math.log10(abs(value)))
    decimals = digits - 1 - exponent
    rounded = round(value, decimals)
    if rounded != 0 and math.floor(math.log10(abs(rounded))) > exponent:  # 999.6 -> 1,000: one digit fewer
        decimals -= 1
        rounded = round(value, decimals)
    text = f"{rounded:,.{max(decimals, 0)}f}"
    if strip and "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def percent(value: float) -> str:
    """A share: 3 significant digits from 10% up (68.4, 100), one decimal below (4.9), one digit under 1% (0.09):
    a small share's third digit is noise."""
    value = float(value)
    if abs(value) >= 10 or value == 0:
        return sig(value)
    if abs(value) >= 1:
        return f"{value:.1f}"
    return sig(value, 1)


def compact(value: float, digits: int = DIGITS) -> str:
    """A count or a rate, short: 515 -> "515", 1674.2 -> "1.67k", 31210 -> "31.2k", 2.5e6 -> "2.5M"."""
    value = float(value)
    for suffix, scale in _COMPACT:
        if abs(value) >= scale * (1 - 0.5 * 10 ** (-digits)):  # 999.9 rounds to 1k, not 1,000
            return sig(value / scale, digits) + suffix
    if float(value).is_integer():
        return f"{int(value):,}"
    return sig(value, digits)


def time_unit(ns: float) -> str:
    """The unit a duration of `ns` nanoseconds reads best in (3.9e6 -> "ms")."""
    magnitude = abs(ns)
    for unit, scale in _TIME_STEPS:
        if magnitude >= scale * (1 - 0.5 * 10 ** (-DIGITS)):
            return unit
    return "ns"


def shared_unit(values: Iterable[float | None], unit: str) -> str:
    """The unit a row of values in `unit` is written in: the one its largest value needs (times, bytes and GB/s;
    any other unit stays as it is)."""
    known = [abs(float(v)) for v in values if not missing(v)]
    largest = max(known, default=0.0)
    if unit in TIME_NS:
        return time_unit(largest * TIME_NS[unit]) if largest else unit
    if unit == "B":
        return next((name for name, size in _BYTE_UNITS if largest >= size), "B")
    if unit in _RATE_UNITS:
        return next((name for name, scale in _RATE_UNITS[unit] if largest >= scale), _RATE_UNITS[unit][-1][0])
    return unit


def convert(value: float, unit: str, to: str) -> float:
    """`value` in `unit` expressed in `to` (a time, byte or rate unit of the same kind)."""
    if unit in TIME_NS and to in TIME_NS:
        return float(value) * TIME_NS[unit] / TIME_NS[to]
    if unit == "B" and to != "B":
        return float(value) / dict(_BYTE_UNITS)[to]
    if unit in _RATE_UNITS and to != unit:
        return float(value) / dict(_RATE_UNITS[unit])[to]
    return float(value)


def format_value(value: float | None, unit: str = "", shown_unit: str | None = None) -> str:
    """One value as a person reads it: "6.22 ms", "295 us", "68.4%", "1.67k tok/s", "128 KiB", "515", "—".

    `shown_unit`: write it in this unit (a row's shared_unit) instead of the one its own magnitude needs."""
    if missing(value):
        return MISSING
    value = float(value)  # type: ignore[arg-type]
    if unit == "%":
        return f"{percent(value)}%"
    if unit == "x":
        return f"{sig(value)}x"
    to = shown_unit or shared_unit([value], unit)
    if unit in TIME_NS or unit == "B" or unit in _RATE_UNITS:
        return f"{sig(convert(value, unit, to))} {to}"
    if unit in ("FLOP", "FLOP/s"):  # the prefix on the unit, as FLOPs are quoted: "110 MFLOP", "400 GFLOP/s"
        prefix, scale = next(((p, s) for p, s in _COMPACT if abs(value) >= s * (1 - 0.5 * 10 ** (-DIGITS))), ("", 1))
        return f"{sig(value / scale)} {prefix}{unit}"
    if unit in ("", "tok/s") or unit.endswith("/s"):
        return f"{compact(value)} {unit}".strip()
    return f"{sig(value)} {unit}".strip()


def format_range(low: float | None, high: float | None, unit: str = "") -> str:
    """Two ends of a range, the unit written once: "1.86–5.59 ms", "179–537 tok/s"; "—" when either is missing."""
    if missing(low) or missing(high):
        return MISSING
    low, high = float(low), float(high)  # type: ignore[arg-type]
    if unit in TIME_NS or unit == "B" or unit in _RATE_UNITS:
        shown = shared_unit([low, high], unit)
        return f"{sig(convert(low, unit, shown))}–{sig(convert(high, unit, shown))} {shown}"
    return f"{compact(low)}–{compact(high)} {unit}".strip()


def format_delta(value: float | None, unit: str = "", shown_unit: str | None = None) -> str:
    """A difference B - A with its sign: "+3.32 ms", "-391", "±0"; a difference of shares in points."""
    if missing(value):
        return MISSING
    value = float(value)  # type: ignore[arg-type]
    if value == 0:
        return "±0"
    text = format_value(abs(value), unit, shown_unit)
    if text.endswith("%"):
        text = text[:-1] + " pt"
    return ("+" if value > 0 else "-") + text


GONE, NEW = "gone", "new"


def format_ratio(value: float | None, a: float | None = None, b: float | None = None) -> str:
    """B / A: "1.43x", "0.59x"; "gone" where B is 0 and A was not, "new" where A is 0 and B is not (given A and B);
    "—" without one."""
    if not (missing(a) or missing(b)):
        if float(b) == 0 and float(a) != 0:  # type: ignore[arg-type]
            return GONE
        if float(a) == 0 and float(b) != 0:  # type: ignore[arg-type]
            return NEW
    if missing(value):
        return MISSING
    return GONE if float(value) == 0 else f"{sig(float(value))}x"  # type: ignore[arg-type]


def format_row(values: Iterable[float | None], unit: str) -> list[str]:
    """Values compared side by side (A, B) in the one unit the largest needs."""
    values = list(values)
    shown = shared_unit(values, unit)
    return [format_value(v, unit, shown) for v in values]


def format_count(value: float | None) -> str:
    """A count: "31", "31.2k events" style without the noun."""
    return MISSING if missing(value) else compact(float(value))  # type: ignore[arg-type]


def round_sig(values, digits: int = DIGITS):
    """Floats rounded to `digits` significant digits (NaN kept), for tables that must stay numeric and sortable."""
    import numpy as np  # here, not at the top: the CLI's start-up imports this module and no numpy (test_cli)

    x = np.asarray(values, dtype="float64")
    out = x.copy()
    finite = np.isfinite(x) & (x != 0)
    if finite.any():
        exponent = np.floor(np.log10(np.abs(x[finite])))
        shift = digits - 1 - exponent
        # Powers of ten are exact only as whole numbers: 1234.5 -> round(1234.5 / 10) * 10 = 1230.0, where
        # multiplying by 0.1 would give 1230.0000000000002 (more digits than the table means to show).
        up = 10.0 ** np.maximum(shift, 0)
        down = 10.0 ** np.maximum(-shift, 0)
        out[finite] = np.where(shift >= 0, np.round(x[finite] * up) / up, np.round(x[finite] / down) * down)
    return out
