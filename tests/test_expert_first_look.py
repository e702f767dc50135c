"""What an expert sees first (issue 29), on the real traces in tests/data/real (sources: its PROVENANCE.md;
AMD-AGI/TraceLens, facebookresearch/HolisticTraceAnalysis, pytorch/kineto, facebookresearch/param; MIT /
BSD-3-Clause) and the shipped samples: time that adds up, mixed steps as first-class, devices named, findings
priced, a Compare that judges the pair.

Truth is read from the trace files themselves (annotation and kernel times, call durations) with plain json.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys

import pytest

from stepscope.analysis import analyze
from stepscope.analysis.report import contract
from stepscope.parsers import load_trace
from tests.conftest import REAL_TRACES, ROOT, real_trace

REAL = (
    sorted(p.relative_to(REAL_TRACES).as_posix() for p in REAL_TRACES.rglob("*.json*")) if REAL_TRACES.is_dir() else []
)
SAMPLES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "sample_traces").rglob("trace.json.gz"))
# the project's own real CPU captures of today's generate() shapes (tests/data/captures/README.md)
SAMPLES += sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests" / "data" / "captures").glob("*.json.gz"))
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")  # Kineto's names, written out here on purpose
SGLANG = "tracelens_sglang_qwen3-8b_decode_mi300x.json.gz"
VLLM_FULL = "tracelens_vllm_gptoss_decode_fullgraph_rocm.json.gz"
VLLM_MIXED = "tracelens_vllm_gptoss_mixed_piecewise_rocm.json.gz"
HF_H100 = "tracelens_hf_qwen1.5-0.5b_forward_h100.json.gz"


def _raw(name: str) -> dict:
    data = real_trace(name).read_bytes()
    return json.loads(gzip.decompress(data) if name.endswith(".gz") else data)


def _report(path) -> dict:
    timeline = load_trace(path)
    return contract(timeline, analyze(timeline))


@pytest.mark.parametrize("name", REAL + SAMPLES)
def test_every_step_adds_up_to_its_span(name):
    """busy + idle = span for every step (within 1 us or 0.1%), lead and tail inside the idle time."""
    path = REAL_TRACES / name if name in REAL else ROOT / name
    report = _report(path)
    for i, step in enumerate(report["steps"]):
        span = step["end_us"] - step["start_us"]
        total = step["gpu_busy_us"] + step["gpu_idle_us"]
        assert abs(total - span) <= max(1.0, 1e-3 * span), (i, step)
        assert step["gpu_lead_us"] >= 0 and step["gpu_tail_us"] >= 0
        assert step["gpu_lead_us"] + step["gpu_tail_us"] <= step["gpu_idle_us"] + 1e-6, (i, step)
    if report["steps"]:
        busy = report["summary"]["gpu_busy_pct"]
        assert busy is not None and 0 <= busy <= 100


def test_the_invariant_is_tested_on_real_generation_steps():
    with_steps = [n for n in REAL if _report(REAL_TRACES / n)["steps"]]
    assert {SGLANG, VLLM_FULL, VLLM_MIXED, HF_H100} <= set(with_steps)


def test_full_graph_decode_step_names_its_lead_and_what_it_costs():
    """vLLM full-graph decode: the annotation opens the step; the first GPU activity starts 8.4 ms later."""
    raw = [e for e in _raw(VLLM_FULL)["traceEvents"] if e.get("ph") == "X"]
    step_ts = next(e["ts"] for e in raw if e["name"].startswith("execute_"))
    first_gpu = min(e["ts"] for e in raw if e.get("cat") in GPU_CATEGORIES)
    report = _report(real_trace(VLLM_FULL))
    (step,) = report["steps"]
    assert step["gpu_lead_us"] == pytest.approx(first_gpu - step_ts, abs=0.01)
    assert step["gpu_lead_us"] > 8000  # counted as idle now, not as nothing
    lead = next(f for f in report["findings"] if f["id"] == "gpu-lead-decode")
    assert lead["cost_us"] == pytest.approx(step["gpu_lead_us"], abs=0.01)
    assert "8.37 ms" in lead["title"] and lead["cost_pct"] > 40  # 3 significant digits (analysis.number_format)
    assert report["summary"]["gpu_busy_pct"] == pytest.approx(
        100 * step["gpu_busy_us"] / (step["end_us"] - step["start_us"])
    )


def test_longest_host_call_is_named_with_its_cost():
    """SGLang on MI300X: one hipMemcpyWithStream holds the host for most of the 474 ms step."""
    raw = [e for e in _raw(SGLANG)["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cuda_runtime"]
    longest = max(raw, key=lambda e: e["dur"])
    assert longest["name"] == "hipMemcpyWithStream" and longest["dur"] > 460_000
    report = _report(real_trace(SGLANG))
    call = next(f for f in report["findings"] if f["id"] == "long-host-call")
    assert "hipMemcpyWithStream" in call["title"] and f"{longest['dur'] / 1e3:.0f} ms" in call["title"]  # "463 ms"
    assert 0 < call["cost_us"] <= longest["dur"]


def test_category_share_names_the_small_kernels_of_the_hf_forward():
    timeline = load_trace(real_trace(HF_H100))
    analysis = analyze(timeline)
    cats = analysis.anatomy.median_categories()
    total = sum(c["time_us"] for c in cats.values())
    share = sum(cats[c]["time_us"] for c in ("elementwise", "norm", "rotary")) / total
    assert share == pytest.approx(0.57, abs=0.01)
    finding = next(f for f in analysis.findings if f.id == "category-share")
    assert finding.evidence["share"] == pytest.approx(share) and f"{share:.0%}" in finding.title
    assert finding.cost_us == pytest.approx(share * total, rel=1e-6)  # the only prefill step


@pytest.mark.parametrize("name", [n for n in REAL if n.startswith("tracelens_")])
def test_findings_pay_their_way(name):
    report = _report(real_trace(name))
    for f in report["findings"]:
        if f["id"].startswith("roofline") or f["id"] == "category-roofline":
            continue
        assert f["cost_us"] is not None, f
        if f["severity"] == "info":
            assert f["cost_pct"] >= 1.0, f  # no 0% "info" finding
    assert not any(f["id"] in ("decode-dominated", "prefill-dominated") for f in report["findings"])  # one phase


def test_a_mixed_step_gets_step_figures_findings_and_a_named_anatomy():
    raw = [e for e in _raw(VLLM_MIXED)["traceEvents"] if e.get("ph") == "X"]
    ann = next(e for e in raw if e["name"].startswith("execute_"))
    assert ann["name"].startswith("execute_8192_context_9(")  # 8192 new tokens: 9 prefill chunks and 37 decodes
    report = _report(real_trace(VLLM_MIXED))
    (step,) = report["steps"]
    s = report["summary"]
    span_ms = (step["end_us"] - step["start_us"]) / 1e3
    assert s["decode_steps"] == 0 and s["step_kind"] == "mixed" and s["steps_of_kind"] == 1
    assert s["step_ms"] == pytest.approx(span_ms) and s["tokens_per_step"] == 8192
    assert s["tokens_per_s"] == pytest.approx(8192 / (span_ms / 1e3))
    assert s["kernels_per_step"] == step["kernels"] and s["gpu_idle_per_step_us"] == pytest.approx(step["gpu_idle_us"])
    assert report["findings"], "a mixed step gets findings like a decode step"
    assert report["summary"]["anatomy"]["step_role"] == "step 0, the only mixed step"


@pytest.mark.parametrize("name", [VLLM_FULL, VLLM_MIXED])
def test_rocm_traces_name_their_device(name):
    report = _report(real_trace(name))
    assert report["device"] == "AMD Instinct MI300X"
    assert "no name" in report["device_source"] and "304 compute units" in report["device_source"]
    assert report["engine"] == "vLLM"


def _cli_compare(a, b, fmt: str = "json") -> str:
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "compare", str(a), str(b), "--format", fmt],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return done.stdout


def test_compare_of_an_unlike_pair_warns_and_its_sentence_agrees_with_its_table():
    out = json.loads(_cli_compare(real_trace(SGLANG), real_trace(VLLM_FULL)))
    assert any("different engines: A is SGLang, B is vLLM" in w for w in out["warnings"])
    assert any("layers" in w and "mixture-of-experts" in w for w in out["warnings"])
    sentence = out["sentence"]
    assert sentence.startswith("Not like for like")
    rows = {m["key"]: m for m in out["metrics"]}
    step = rows["step_ms"]
    # an unlike pair gets no verdict (issue 44): the step time, the largest end-to-end change, side by side, in the
    # table's own numbers (3 significant digits, analysis.number_format)
    lead = re.search(r"Side by side: step time ([\d.]+) ms \(A\) and ([\d.]+) ms \(B\)", sentence)
    assert lead, sentence
    assert float(lead[1]) == pytest.approx(step["a"], rel=0.005) and float(lead[2]) == pytest.approx(
        step["b"], rel=0.005
    )
    assert "faster" not in sentence and "cut" not in sentence
    assert step["a"] > 400 and step["b"] < 25  # 474 ms -> 19 ms, as the traces' annotations span
    assert "No decode steps" not in sentence
    assert out["op_diff"]["rows"] and {"appeared", "disappeared"} <= {r["status"] for r in out["op_diff"]["rows"]}
    markdown = _cli_compare(real_trace(SGLANG), real_trace(VLLM_FULL), "markdown")
    assert "**Not like for like.**" in markdown and "Op by op" in markdown


def test_the_shipped_eager_compile_pair_is_comparable():
    a, b = (ROOT / "sample_traces" / n / "trace.json.gz" for n in ("cpu_tiny-llama_eager", "cpu_tiny-llama_compile"))
    out = json.loads(_cli_compare(a, b))
    assert out["warnings"] == []
    # the verdict leads with throughput where the batch is known (the samples record shapes), else with ITL
    assert re.match(r"torch\.compile (raised decode tokens/s|cut ITL p50)", out["sentence"]), out["sentence"]
    assert out["op_diff"]["a_kind"] == out["op_diff"]["b_kind"] == "decode"
