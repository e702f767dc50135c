"""Gate expressions: parsing, the three bound forms, nulls and a zero baseline; and the compare renderings.

The metrics frames here are written by hand, so every expected outcome follows from the numbers in the test.
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from stepscope.analysis.compare import Comparison
from stepscope.analysis.gate import GateError, evaluate_gate, evaluate_gates, gate_help, parse_gate, parse_gates
from stepscope.analysis.metrics import METRICS
from stepscope.exporters.compare_formats import comparison_json, comparison_markdown, comparison_text

KEYS = [m.key for m in METRICS]
NAN = math.nan


def _metrics(rows: dict[str, tuple[float, float, str]]) -> pd.DataFrame:
    """metric -> (a, b, unit), with delta and ratio as analysis.compare defines them."""
    out = []
    for key, (a, b, unit) in rows.items():
        ratio = b / a if a and not math.isnan(a) else NAN
        out.append((key, key.replace("_", " "), unit, a, b, b - a, ratio))
    return pd.DataFrame(out, columns=["metric", "label", "unit", "a", "b", "delta", "ratio"])


ROWS = {
    "itl_p50_ms": (10.0, 10.4, "ms"),  # +4 %
    "kernels_per_decode_step": (100.0, 112.0, ""),  # +12
    "gpu_busy_pct": (80.0, 77.5, "%"),  # -2.5 points
    "ttft_ms": (NAN, 20.0, "ms"),  # unknown in A
    "launches_per_decode_step": (0.0, 5.0, ""),  # zero baseline
    "decode_tokens_per_s": (100.0, NAN, "tok/s"),  # unknown in B
}
FRAME = _metrics(ROWS)


def _summary(side: int) -> dict:
    """The contract's summary object of side 0 (A) or 1 (B), null where ROWS has NaN."""
    value = {key: (None if math.isnan(pair[side]) else pair[side]) for key, pair in ROWS.items()}
    return {
        "itl_ms": {"p50": value.pop("itl_p50_ms")},
        "prefill_steps": 1,
        **value,
    }


A, B = _summary(0), _summary(1)


@pytest.mark.parametrize(
    ("expr", "mode", "op", "bound"),
    [
        ("itl_p50_ms<=1.05x", "ratio", "<=", 1.05),
        (" itl_p50_ms <= 1.05 X ", "ratio", "<=", 1.05),
        ("kernels_per_decode_step<=+10", "delta", "<=", 10.0),
        ("gpu_busy_pct>=-2", "delta", ">=", -2.0),
        ("ttft_ms<50", "absolute", "<", 50.0),
        ("decode_tokens_per_s>1e2", "absolute", ">", 100.0),
        ("itl_p90_ms<=.9x", "ratio", "<=", 0.9),
    ],
)
def test_parse_forms(expr, mode, op, bound):
    gate = parse_gate(expr, KEYS)
    assert (gate.mode, gate.op, gate.bound) == (mode, op, pytest.approx(bound))
    assert gate.expr == expr.strip()


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("itl_p50_ms", "expected METRIC OP BOUND"),
        ("itl_p50_ms<=", "expected METRIC OP BOUND"),
        ("itl_p50_ms=<1.05x", "expected METRIC OP BOUND"),
        ("itl_p50_ms==1", "expected METRIC OP BOUND"),
        ("itl_p50_ms<=1.05y", "expected METRIC OP BOUND"),
        ("itl_p50_ms<=+1.05x", "a ratio bound has no sign"),
        ("itl_p5_ms<=1.05x", "unknown metric 'itl_p5_ms'"),
        ("", "expected METRIC OP BOUND"),
    ],
)
def test_bad_expressions_raise_one_line(expr, message):
    with pytest.raises(GateError) as info:
        parse_gate(expr, KEYS)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_unknown_metric_lists_the_known_ones():
    with pytest.raises(GateError, match=r"known metrics: .*itl_p50_ms.*gpu_busy_pct"):
        parse_gate("nope<=1x", KEYS)


@pytest.mark.parametrize(
    ("expr", "ok"),
    [
        ("itl_p50_ms<=1.05x", True),  # 10.4 / 10 = 1.04
        ("itl_p50_ms<=1.03x", False),
        ("itl_p50_ms>1.1x", False),
        ("kernels_per_decode_step<=+10", False),  # +12
        ("kernels_per_decode_step<=+12", True),
        ("kernels_per_decode_step<=+15", True),
        ("gpu_busy_pct>=-2", False),  # -2.5 points
        ("gpu_busy_pct>=-3", True),
        ("itl_p50_ms<=10.5", True),  # absolute: B = 10.4
        ("itl_p50_ms<=10", False),
        ("ttft_ms<=25", True),  # absolute needs only B
    ],
)
def test_evaluate(expr, ok):
    result = evaluate_gate(parse_gate(expr), A, B)
    assert result.ok is ok, result.line()


def test_every_registry_metric_can_be_gated():
    for key in KEYS:
        assert parse_gate(f"{key}<=1.1x").key == key
        assert key in gate_help()
    steps = evaluate_gate(parse_gate("prefill_steps<=+0"), A, B)  # not a Compare row, gated all the same
    assert steps.ok and "B-A = +0" in steps.detail


def test_null_and_zero_baselines_fail_with_a_reason():
    ttft = evaluate_gate(parse_gate("ttft_ms<=1.1x"), A, B)
    assert not ttft.ok and "null in A" in ttft.detail
    rate = evaluate_gate(parse_gate("decode_tokens_per_s>=-5"), A, B)
    assert not rate.ok and "null in B" in rate.detail
    absolute_b_null = evaluate_gate(parse_gate("decode_tokens_per_s>=1"), A, B)
    assert not absolute_b_null.ok and "null in B" in absolute_b_null.detail
    zero = evaluate_gate(parse_gate("launches_per_decode_step<=2x"), A, B)
    assert not zero.ok and "0 in A" in zero.detail
    zero_delta = evaluate_gate(parse_gate("launches_per_decode_step<=+5"), A, B)
    assert zero_delta.ok  # a delta is defined on a zero baseline: 5 - 0 = 5


def test_result_lines_show_measured_value_and_bound():
    result = evaluate_gate(parse_gate("gpu_busy_pct>=-2"), A, B)
    line = result.line()
    assert line.startswith("FAIL gpu_busy_pct>=-2: ")
    assert "B-A = -2.5 pt" in line and "bound >= -2" in line
    ok = evaluate_gate(parse_gate("itl_p50_ms<=1.05x"), A, B).line()
    assert ok.startswith("ok") and "B/A = 1.040x" in ok


def _comparison() -> Comparison:
    return Comparison("base <b>", "new | run", FRAME, "new | run cut <i>x</i> ITL.")


def test_json_follows_the_design_contract():
    gates = evaluate_gates(parse_gates(["itl_p50_ms<=1.05x", "gpu_busy_pct>=-2"]), A, B)
    out = comparison_json(_comparison(), {"ttft_ms": None}, {"ttft_ms": 20.0}, gates)
    text = json.dumps(out, allow_nan=False)  # no NaN reaches JSON
    back = json.loads(text)
    assert back["a"] == {"ttft_ms": None} and back["b"] == {"ttft_ms": 20.0}
    assert back["sentence"] == "new | run cut <i>x</i> ITL."
    assert [g["expr"] for g in back["gates"]] == ["itl_p50_ms<=1.05x", "gpu_busy_pct>=-2"]
    assert [g["ok"] for g in back["gates"]] == [True, False]
    first = back["metrics"][0]
    assert set(first) >= {"key", "label", "unit", "a", "b", "delta", "ratio", "better"}
    by_key = {m["key"]: m for m in back["metrics"]}
    assert by_key["kernels_per_decode_step"]["delta"] == pytest.approx(12.0)
    assert by_key["itl_p50_ms"]["ratio"] == pytest.approx(1.04)
    assert by_key["itl_p50_ms"]["better"] == "lower"
    assert by_key["ttft_ms"]["a"] is None and by_key["ttft_ms"]["ratio"] is None


def test_text_and_markdown_show_every_metric_and_escape_names():
    gates = evaluate_gates(parse_gates(["kernels_per_decode_step<=+10"]), A, B)
    text = comparison_text(_comparison(), gates)
    assert "FAIL kernels_per_decode_step<=+10" in text
    assert "+12" in text and "1.04x" in text
    md = comparison_markdown(_comparison(), gates)
    table = [line for line in md.splitlines() if line.startswith("|")]
    assert len(table) == 2 + len(FRAME)  # header, rule, one row per metric
    assert all(line.count("|") == 6 for line in table)  # a '|' in a name would add a column: escaped
    assert "<b>" not in md and "<i>" not in md and "&lt;b&gt;" in md
    assert "new \\| run" in md
    assert "❌" in md and "1 failed" in md
