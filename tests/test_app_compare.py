"""analysis/compare.py (deltas, ratios, the sentence) and the app's default trace choices."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict

import pandas as pd

from stepscope.analysis.compare import COMPARED_METRICS, METRIC_COLUMNS, compare, summary_value
from stepscope.analysis.model import Analysis, Segmentation
from stepscope.analysis.summary import Summary
from stepscope.app.trace_sources import TraceSource, default_pair, default_source
from stepscope.contracts.run_record import RunRecord


def _analysis(**summary) -> Analysis:
    return Analysis(
        steps=pd.DataFrame(),
        gaps=pd.DataFrame(),
        summary=Summary(**summary),
        findings=(),
        segmentation=Segmentation("stepscope-markers", 1.0),
        top_kernels=pd.DataFrame(),
    )


EAGER = _analysis(
    ttft_ms=40.0,
    itl_ms={"p50": 9.8, "p90": 11.0, "p99": 12.0, "mean": 10.0},
    decode_steps=31,
    decode_tokens_per_s=102.0,
    kernels_per_decode_step=352.0,
    launches_per_decode_step=352.0,
    gpu_busy_pct=40.0,
    gpu_idle_per_decode_step_us=3900.0,
)
GRAPH = _analysis(
    ttft_ms=39.0,
    itl_ms={"p50": 6.1, "p90": 6.5, "p99": 7.0, "mean": 6.2},
    decode_steps=31,
    decode_tokens_per_s=164.0,
    kernels_per_decode_step=352.0,
    launches_per_decode_step=1.0,
    gpu_busy_pct=90.0,
    gpu_idle_per_decode_step_us=200.0,
)


def test_metrics_frame_has_deltas_and_ratios():
    result = compare(EAGER, GRAPH, "eager", "cuda-graph")
    assert list(result.metrics.columns) == list(METRIC_COLUMNS)
    # no memory events in either: no memory rows; a per-step row that repeats its decode row is left out
    assert len(result.metrics) <= len(COMPARED_METRICS) - 4
    itl = result.metrics.set_index("metric").loc["itl_p50_ms"]
    assert itl["a"] == 9.8 and itl["b"] == 6.1
    assert math.isclose(itl["delta"], -3.7)
    assert math.isclose(itl["ratio"], 6.1 / 9.8)


def test_memory_rows_appear_when_either_trace_has_memory():
    from stepscope.analysis.summary import MemorySummary

    memory = MemorySummary(device="cuda:0", events=3, peak_allocated_bytes=2 << 30, peak_reserved_bytes=None)
    result = compare(EAGER, dataclasses.replace(GRAPH, summary=dataclasses.replace(GRAPH.summary, memory=memory)))
    rows = result.metrics.set_index("metric")
    memory_rows = [k for k in rows.index if k.startswith(("memory_", "kv_"))]
    assert memory_rows == ["memory_peak_allocated_bytes"]  # only the figure B has: its peak allocated
    peak = rows.loc["memory_peak_allocated_bytes"]
    assert peak["b"] == 2 << 30 and math.isnan(peak["a"])


def test_sentence_names_cuda_graphs_and_what_moved():
    sentence = compare(EAGER, GRAPH, "tiny eager", "tiny cuda-graph").sentence
    # the idle time's fall (3.7 ms) is the whole ITL change (3.7 ms): it is named as the cause (2026-12-01)
    assert sentence == (
        "CUDA graphs cut ITL p50 from 9.80 ms to 6.10 ms (1.61x faster), mostly GPU idle per decode step from 3.90 ms "
        "to 200 us; launches per decode step from 352 to 1."
    )


def test_sentence_for_compile_and_for_a_slowdown():
    assert compare(EAGER, GRAPH, "eager", "compile").sentence.startswith("torch.compile cut ITL p50")
    backwards = compare(GRAPH, EAGER, "run 2", "run 1").sentence
    assert backwards.startswith("run 1 (vs run 2) raised ITL p50 from 6.10 ms to 9.80 ms (1.61x slower)")


def test_missing_figures_are_nan_and_the_sentence_falls_back():
    prefill_only = _analysis(ttft_ms=50.0, itl_ms=None, decode_steps=0)
    other = _analysis(ttft_ms=25.0, itl_ms=None, decode_steps=0)
    result = compare(prefill_only, other, "a", "b")
    row = result.metrics.set_index("metric").loc["itl_p50_ms"]
    assert math.isnan(row["a"]) and math.isnan(row["ratio"])
    assert result.sentence.startswith("b (vs a) cut TTFT from 50.0 ms to 25.0 ms (2x faster)")
    empty = compare(_analysis(), _analysis(), "a", "b")
    assert empty.sentence.startswith("Neither trace has steps")
    assert result.warnings == empty.warnings == ()  # nothing differs that both sides show


def test_zero_baseline_has_no_ratio():
    zero = _analysis(launches_per_decode_step=0.0)
    assert math.isnan(compare(zero, GRAPH).metrics.set_index("metric").loc["launches_per_decode_step", "ratio"])
    assert math.isnan(summary_value(Summary(gpu_busy_pct=None), "gpu_busy_pct"))


def _source(name: str, origin: str = "sample", mode: str | None = None) -> TraceSource:
    info = RunRecord(spec={"mode": mode}) if mode else None
    return TraceSource(f"{origin}:{name}", name, origin, None, info)


def test_default_choices_prefer_eager_and_a_graph_pair():
    sources = [_source("a_compile"), _source("b_eager"), _source("c_cuda-graph"), _source("r1", "run", "eager")]
    assert default_source(sources).label == "b_eager"
    pair = default_pair(sources)
    assert (pair[0].label, pair[1].label) == ("b_eager", "c_cuda-graph")
    no_graph = [s for s in sources if "cuda-graph" not in s.label]
    pair = default_pair(no_graph)
    assert (pair[0].label, pair[1].label) == ("b_eager", "a_compile")
    assert default_pair([_source("x"), _source("y")])[1].label == "y"
    assert default_pair([_source("x")]) is None
    assert default_source([]) is None


def test_cpu_only_pairs_name_host_ops_not_gpu():
    cpu_eager = _analysis(**{**asdict(EAGER.summary), "on_gpu": False})
    cpu_compiled = _analysis(**{**asdict(GRAPH.summary), "on_gpu": False})
    result = compare(cpu_eager, cpu_compiled, "cpu eager", "cpu compile")
    labels = result.metrics.set_index("metric")["label"]
    assert labels["kernels_per_decode_step"] == "host ops per decode step"
    assert "GPU" not in " ".join(labels) and "GPU" not in result.sentence
    assert compare(EAGER, GRAPH).metrics.set_index("metric")["label"]["gpu_busy_pct"] == "GPU busy"


def test_comparison_carries_per_category_deltas_and_layers():
    """The shipped CPU samples (real captures): eager against torch.compile, both tiny-llama (4 layers)."""
    import json

    from stepscope.analysis import analyze
    from stepscope.parsers import load_trace
    from tests.conftest import ROOT

    eager, compiled = (
        analyze(load_trace(ROOT / "sample_traces" / name / "trace.json.gz"))
        for name in ("cpu_tiny-llama_eager", "cpu_tiny-llama_compile")
    )
    result = compare(eager, compiled, "eager", "compile")
    cats = result.categories.set_index("category")
    # each side's time is that side's own median decode step, read independently of compare()
    for side, analysis in (("a_us", eager), ("b_us", compiled)):
        own = analysis.anatomy.median_categories()
        assert {c: v["time_us"] for c, v in own.items()} == {c: t for c, t in cats[side].items() if t > 0}
    assert (cats["delta_us"] == cats["b_us"] - cats["a_us"]).all()
    assert math.isclose(cats.loc["gemm", "ratio"], cats.loc["gemm", "b_us"] / cats.loc["gemm", "a_us"])
    assert result.layers["a"]["layers"] == result.layers["b"]["layers"] == 4
    body = result.anatomy_json()
    json.dumps(body, allow_nan=False)  # JSON-ready: no NaN
    assert {"category", "a_us", "b_us", "delta_us", "ratio"} <= set(body["categories"][0])
    assert "inside the median decode step" in result.sentence and result.sentence.endswith(".")


def test_without_anatomy_the_comparison_has_no_categories():
    result = compare(EAGER, GRAPH, "eager", "cuda-graph")
    assert result.categories.empty and result.layers == {}
    assert "inside" not in result.sentence
