"""analysis/metrics.py: one registry that the JSON, the cards, Compare and the text report read."""

from __future__ import annotations

import math
from dataclasses import fields

import pytest

from analysis.metrics import HEADLINE, METRICS, format_value, metric
from analysis.summary import RooflineSummary, Summary, contract_fields


def test_every_metric_reads_a_summary_field_and_says_which_way_is_better():
    names = {f.name for f in fields(Summary)}
    assert len({m.key for m in METRICS}) == len(METRICS)
    for m in METRICS:
        assert m.field in names, m.key
        assert m.better in ("lower", "higher", None)
        assert m.unit in ("ms", "us", "%", "tok/s", "")


def test_values_come_from_the_summary_or_its_json_alike():
    summary = Summary(
        decode_steps=31,
        ttft_ms=7.5,
        itl_ms={"p50": 6.25, "p90": 6.5, "p99": 7.25, "mean": 6.3},
        gpu_busy_pct=None,
        on_gpu=False,
    )
    as_json = {k: getattr(summary, k) for k in contract_fields()}
    expected = {"ttft_ms": 7.5, "itl_p50_ms": 6.25, "itl_p90_ms": 6.5, "itl_p99_ms": 7.25, "decode_steps": 31.0}
    for key, value in expected.items():
        assert metric(key).value(summary) == value == metric(key).value(as_json)
    assert math.isnan(metric("gpu_busy_pct").value(summary))
    assert math.isnan(metric("itl_p50_ms").value(Summary()))
    assert metric("kernels_per_decode_step").label_for(on_gpu=False) == "host ops per decode step"
    with pytest.raises(KeyError, match="unknown metric"):
        metric("nope")


def test_contract_keys_and_cards_are_unchanged():
    assert contract_fields() == (
        "prefill_steps",
        "decode_steps",
        "ttft_ms",
        "itl_ms",
        "decode_tokens_per_s",
        "gpu_busy_pct",
        "kernels_per_decode_step",
        "launches_per_decode_step",
        "gpu_idle_per_decode_step_us",
        "mixed_steps",  # issue 24's added keys, after the original ones
        "verify_steps",
        "draft_steps",
        "speculative",
    )
    assert [m.card for m in HEADLINE] == [
        "TTFT",
        "ITL p50",
        "ITL p90",
        "Decode tokens/s",
        "Decode steps",
        "Kernels / decode step",
        "Launches / decode step",
        "GPU busy",
        "GPU idle / decode step",
    ]
    assert "roofline" not in contract_fields() and Summary().roofline is None
    assert {f.name for f in fields(RooflineSummary)} >= {"decode_roofline_pct", "prefill_bound"}


def test_format_value():
    assert format_value(None, "ms") == "n/a" and format_value(math.nan, "us") == "n/a"
    assert format_value(0.25, "ms") == "250.0 us"
    assert format_value(3900.0, "us") == "3.90 ms"
    assert format_value(40.5, "%") == "40.50%"
    assert format_value(352.0, "") == "352"
