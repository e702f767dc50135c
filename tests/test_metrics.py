"""analysis/metrics.py: one registry that the JSON, the cards, Compare and the text report read."""

from __future__ import annotations

import math
from dataclasses import fields

import pytest

from stepscope.analysis.metrics import COMPARED, HEADLINE, METRICS, card_metrics, format_bytes, format_value, metric
from stepscope.analysis.summary import MemorySummary, RooflineSummary, Summary, contract_fields


def test_every_metric_reads_a_summary_field_and_says_which_way_is_better():
    names = {f.name for f in fields(Summary)}
    assert len({m.key for m in METRICS}) == len(METRICS)
    for m in METRICS:
        assert m.field in names, m.key
        assert m.better in ("lower", "higher", None)
        assert m.unit in ("ms", "us", "%", "tok/s", "B", "")


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
        # added 2026-12-01 (issue 29): per-step figures of the main kind, whatever it is
        "step_kind",
        "steps_of_kind",
        "step_ms",
        "tokens_per_step",
        "tokens_per_s",
        "kernels_per_step",
        "launches_per_step",
        "gpu_idle_per_step_us",
        "gpu_lead_per_step_us",
        "gpu_tail_per_step_us",
        # added 2026-12-03 (issue 38): TTFT over requests, steps of unknown kind
        "ttft_ms_dist",
        "unknown_steps",
        # added 2026-12-04 (issue 41): a served run's figures over the run, and why a null headline figure is null
        "served",
        "requests",
        "output_tokens",
        "run_tokens_per_s",
        "unknown_reasons",
        # added 2026-12-04 (issue 44): where the batch came from, and the capture's time (a trace without steps)
        "batch_source",
        "capture",
    )
    assert [m.card for m in HEADLINE] == [
        "TTFT",
        "ITL p50",
        "ITL p90",
        "Step time (decode)",  # added 2026-12-01 (issue 29)
        "Tokens / decode step",  # added
        "Decode tokens/s",
        "Decode steps",
        "Kernels / decode step",
        "Launches / decode step",
        "GPU busy",
        "GPU idle / decode step",
        "GPU lead / decode step",  # added
    ]


def test_cards_of_a_trace_without_decode_show_its_main_kind_not_n_a():
    """A mixed-only trace (vLLM V1 chunked prefill): every decode card gives way to the same figure over the mixed
    steps, so no card says n/a where the figure exists under another kind."""
    decode = Summary(step_kind="decode", decode_steps=3, kernels_per_decode_step=5.0, kernels_per_step=5.0)
    assert [label for _, label in card_metrics(decode)] == [m.card for m in HEADLINE]
    mixed = Summary(
        step_kind="mixed",
        steps_of_kind=1,
        step_ms=307.7,
        tokens_per_step=8192.0,
        tokens_per_s=26623.5,
        kernels_per_step=413.0,
        launches_per_step=87.0,
        gpu_idle_per_step_us=151611.9,
        gpu_lead_per_step_us=151231.3,
        gpu_busy_pct=50.7,
    )
    cards = {label: m.format(m.value(mixed)) for m, label in card_metrics(mixed)}
    assert cards["Mixed steps"] == "1" and cards["Kernels / mixed step"] == "413"
    assert cards["Mixed tokens/s"] == "26.6k tok/s" and cards["Step time (mixed)"] == "308 ms"  # issue 30: compact
    assert cards["GPU idle / mixed step"] == "152 ms" and cards["Launches / mixed step"] == "87"
    # what still says "—" has no figure under any kind: one step has no inter-token latency and no prefill
    assert {label for label, text in cards.items() if text == "—"} == {"TTFT", "ITL p50", "ITL p90"}
    assert "roofline" not in contract_fields() and Summary().roofline is None
    assert {f.name for f in fields(RooflineSummary)} >= {"decode_roofline_pct", "prefill_bound"}


def test_format_value():  # analysis.number_format since issue 30: 3 significant digits, "—" for missing
    assert format_value(None, "ms") == "—" and format_value(math.nan, "us") == "—"
    assert format_value(0.25, "ms") == "250 us"
    assert format_value(3900.0, "us") == "3.90 ms"
    assert format_value(40.5, "%") == "40.5%"
    assert format_value(352.0, "") == "352"


def test_memory_metrics_read_the_record_or_its_json_and_are_compared_not_carded():
    memory = MemorySummary(device="cuda:0", events=9, peak_allocated_bytes=3 << 30, peak_reserved_bytes=None)
    summary = Summary(memory=memory)
    as_json = {"memory": {"peak_allocated_bytes": 3 << 30, "peak_reserved_bytes": None}}
    m = metric("memory_peak_allocated_bytes")
    assert m.value(summary) == m.value(as_json) == 3 << 30 and m.format(m.value(summary)) == "3.00 GiB"
    assert math.isnan(metric("memory_peak_reserved_bytes").value(summary))
    assert math.isnan(m.value(Summary()))  # no memory events: unknown, not zero
    memory_keys = {"memory_peak_allocated_bytes", "memory_peak_reserved_bytes", "kv_growth_bytes_per_token"}
    assert memory_keys <= {c.key for c in COMPARED} and not memory_keys & {c.key for c in HEADLINE}


def test_format_bytes():
    assert format_bytes(131072) == "128 KiB" and format_bytes(512) == "512 B"
    assert format_bytes(-(3 << 20)) == "-3.00 MiB" and format_value(16 << 30, "B") == "16.0 GiB"


def test_a_served_runs_cards_lead_with_its_requests_and_say_why_a_figure_is_unknown():
    """Issue 41: requests, TTFT p50 / p90 over requests, ITL p50 / p90, tokens/s over the run first; a figure the
    trace does not have is "unknown" with the analysis's reason, which says what to record next time."""
    from stepscope.analysis.metrics import unknown_reason

    reason = "requests unknown: ...; the API server's trace, or the worker's python frames (with_stack), would"
    served = Summary(
        step_kind="decode",
        served=True,
        requests=None,
        ttft_ms=12.0,
        ttft_ms_dist={"p50": 12.0, "p90": 30.0, "p99": 31.0, "max": 31.5},
        itl_ms={"p50": 5.0, "p90": 9.0, "p99": 9.5, "mean": 6.0, "max": 10.0},
        run_tokens_per_s=150.0,
        unknown_reasons={"requests": reason},
    )
    cards = card_metrics(served)
    labels = [label for _, label in cards]
    assert labels[:6] == ["Requests", "TTFT p50", "TTFT p90", "ITL p50", "ITL p90", "Tokens/s (run)"]
    assert len(labels) == len(set(labels))  # TTFT and ITL are not shown twice
    shown = {label: m.format(m.value(served)) for m, label in cards}
    assert shown["TTFT p90"] == "30.0 ms" and shown["Tokens/s (run)"] == "150 tok/s"
    reasons = {label: unknown_reason(m, served) for m, label in cards}
    assert reasons["Requests"] == reason
    assert reasons["TTFT p90"] is None  # known: no reason
    # a trace that is not a served run keeps its cards
    assert [label for _, label in card_metrics(Summary(step_kind="decode"))] == [m.card for m in HEADLINE]
