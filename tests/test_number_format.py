"""analysis/number_format.py: the one way every output writes a number (issue 30)."""

from __future__ import annotations

import math

import numpy as np

from stepscope.analysis.number_format import (
    MISSING,
    compact,
    format_delta,
    format_ratio,
    format_row,
    format_value,
    round_sig,
    shared_unit,
    sig,
)


def test_three_significant_digits_without_exponents():
    assert [sig(v) for v in (7.6494, 463951.544, 0.0012345, 11, 999.6, -2.5303, 0)] == [
        "7.65",
        "464,000",
        "0.00123",
        "11.0",
        "1,000",
        "-2.53",
        "0",
    ]
    assert sig(11, strip=True) == "11"


def test_units_by_magnitude_and_missing_as_a_dash():
    assert format_value(90.89, "us") == "90.9 us" and format_value(463951.544, "us") == "464 ms"
    assert format_value(3367344000, "ns") == "3.37 s" and format_value(0.4, "us") == "400 ns"
    assert format_value(0.25, "ms") == "250 us" and format_value(6.2222, "ms") == "6.22 ms"
    for nothing in (None, math.nan, math.inf, "None"):
        assert format_value(nothing, "ms") == MISSING == "—"
    assert format_value(131072, "B") == "128 KiB" and format_value(3350, "GB/s") == "3.35 TB/s"


def test_counts_and_rates_are_compact():
    assert format_value(1674.2, "tok/s") == "1.67k tok/s" and format_value(31210, "") == "31.2k"
    assert compact(515) == "515" and compact(999.7) == "1.00k" and compact(2.5e6) == "2.50M"
    assert compact(40.935) == "40.9"


def test_shares_keep_the_digits_that_mean_something():
    assert [format_value(v, "%") for v in (68.38, 100.0, 4.89, 0.64, 0.09)] == [
        "68.4%",
        "100%",
        "4.9%",
        "0.6%",
        "0.09%",
    ]


def test_a_compared_row_shares_one_unit():
    assert shared_unit([1.99, 0.295], "ms") == "ms" and format_row([1.99, 0.295], "ms") == ["1.99 ms", "0.295 ms"]
    assert format_row([1888.4, 163.9], "us") == ["1.89 ms", "0.164 ms"]
    assert format_delta(-1.69, "ms", "ms") == "-1.69 ms" and format_delta(20.95, "%") == "+20.9 pt"
    assert format_delta(0, "") == "±0" and format_delta(None, "ms") == MISSING
    assert format_ratio(0.5932) == "0.593x" and format_ratio(math.nan) == MISSING


def test_round_sig_keeps_tables_numeric():
    out = round_sig([463951.544, 7.6494, 0.0012345, math.nan, 0.0])
    assert out[0] == 464000 and out[1] == 7.65 and out[2] == 0.00123 and math.isnan(out[3]) and out[4] == 0
    assert out.dtype == np.float64


def test_round_sig_gives_the_float_the_rounded_text_reads_as():
    """1234.5 -> 1230.0 exactly, never 1230.0000000000002 (what multiplying by 0.1 gives): a table cell shows no
    more digits than 3 significant ones, whatever its magnitude."""
    rng = np.random.default_rng(0)
    values = rng.lognormal(0, 8, 20_000) * rng.choice([-1, 1], 20_000)  # about 1e-14 .. 1e14, both signs
    expected = np.array([float(f"{v:.3g}") for v in values])
    assert (round_sig(values) == expected).all()
    assert round_sig([1234.5])[0] == 1230.0
