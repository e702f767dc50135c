"""Memory over the run (issue 25) on real CPU captures made here (tests/data/captures/memory_*, their truth from the
KV cache generate() returned) and on SYNTHETIC GPU traces (tests/synthetic_memory.py) where the right answer is
built in: peak, per-step memory, KV growth against the model, findings, and the JSON contract."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import pytest

from stepscope.analysis import analyze
from stepscope.analysis.memory_model import with_memory_model
from stepscope.analysis.metrics import format_bytes
from stepscope.analysis.report import contract
from stepscope.analysis.roofline import kv_bytes_per_token, shape_from_config
from stepscope.analysis.roofline.model_source import model_shape
from stepscope.contracts.run_record import RunRecord
from stepscope.parsers import load_trace
from stepscope.parsers.kineto.reader import read_chrome_trace
from tests.conftest import ROOT, missing
from tests.synthetic_memory import CPU, memory_event, memory_for_steps
from tests.synthetic_traces import doc, synthetic_generation

CAPTURES = ROOT / "tests" / "data" / "captures"
WITH_MEMORY = [
    "fp32_b1_dynamic",
    "bf16_b2_dynamic",
    "fp32_b2_static",
    "fp32_b1_two_requests",
    "fp32_b1_two_requests_kept",
]
DYNAMIC = ["fp32_b1_dynamic", "bf16_b2_dynamic", "fp32_b1_two_requests", "fp32_b1_two_requests_kept"]
GIB = 1 << 30


def _capture(name: str) -> tuple[Path, dict]:
    trace = CAPTURES / f"memory_{name}.json.gz"
    if not trace.exists():
        missing(f"{trace} is not in this checkout (python -m tests.memory_captures tests/data/captures)")
    return trace, json.loads((CAPTURES / f"memory_{name}.truth.json").read_text())


def _largest_total_allocated(trace: Path, device_type: int) -> int:
    """Straight from the trace's own [memory] events, not through Stepscope's reader."""
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    return max(
        e["args"]["Total Allocated"]
        for e in events
        if e.get("name") == "[memory]" and e["args"]["Device Type"] == device_type
    )


def _model(truth: dict):
    return shape_from_config(truth["config"], dtype=truth["case"]["dtype"])


@pytest.mark.parametrize("name", WITH_MEMORY)
def test_peak_allocated_is_the_largest_total_allocated_of_the_device(name):
    trace, _ = _capture(name)
    memory = analyze(load_trace(trace)).summary.memory
    assert memory.device == "cpu"  # a CPU-only trace: the CPU ran the model
    largest = _largest_total_allocated(trace, CPU)
    assert abs(memory.peak_allocated_bytes - largest) <= 0.005 * largest
    assert memory.peak_reserved_bytes is None  # the CPU allocator keeps no reserve


@pytest.mark.parametrize("name", DYNAMIC)
def test_kv_growth_is_within_ten_percent_of_the_cache_generate_returned(name):
    trace, truth = _capture(name)
    memory = analyze(load_trace(trace)).summary.memory
    real = truth["requests"][0]["bytes_per_position"]  # K and V of every layer, every sequence: one decode step
    assert truth["requests"][0]["cache_class"] == "DynamicCache"
    assert memory.kv_growth_bytes_per_token == pytest.approx(real, rel=0.10)
    assert memory.kv_growth_steps == truth["case"]["requests"] * (truth["case"]["new_tokens"] - 1)


def test_a_static_cache_does_not_grow_and_is_said_to_be_allocated_up_front():
    trace, truth = _capture("fp32_b2_static")
    timeline = load_trace(trace)
    result = with_memory_model(analyze(timeline), timeline, _model(truth))
    memory = result.summary.memory
    assert truth["requests"][0]["cache_class"] == "StaticCache"
    assert abs(memory.kv_growth_bytes_per_token) < 0.10 * truth["requests"][0]["bytes_per_position"]
    (finding,) = [f for f in result.findings if f.id == "kv-growth-vs-model"]
    assert finding.severity == "info" and "allocated up front" in finding.title


@pytest.mark.parametrize("name", ["fp32_b1_dynamic", "bf16_b2_dynamic", "fp32_b2_static"])
def test_expected_kv_is_the_formula_with_the_model_dtype_and_batch(name):
    trace, truth = _capture(name)
    timeline = load_trace(trace)
    config, case = truth["config"], truth["case"]
    element = {"float32": 4, "bfloat16": 2}[case["dtype"]]
    formula = (
        2 * config["num_hidden_layers"] * config["num_key_value_heads"] * config["head_dim"] * element * case["batch"]
    )
    result = with_memory_model(analyze(timeline), timeline, _model(truth))
    memory = result.summary.memory
    assert memory.expected_kv_bytes_per_token == formula  # exactly; the batch read from the trace's shapes
    assert memory.batch == case["batch"] and memory.kv_dtype_bytes == element
    assert memory.expected_weights_bytes == _model(truth).parameters * element
    if case["cache"] == "dynamic":  # and the real cache grew by just that
        assert truth["requests"][0]["bytes_per_position"] == formula
        assert not [f for f in result.findings if f.id == "kv-growth-vs-model"]


def test_run_json_batch_and_dtype_win_over_the_trace_and_the_model():
    trace, truth = _capture("fp32_b1_dynamic")
    timeline = load_trace(trace)
    record = RunRecord(spec={"batch": 4}, dtype="bfloat16")
    memory = with_memory_model(analyze(timeline), timeline, _model(truth), record).summary.memory
    assert memory.batch == 4 and memory.kv_dtype_bytes == 2
    assert memory.expected_kv_bytes_per_token == 2 * 2 * 2 * 32 * 2 * 4


def test_a_cache_growing_twice_as_fast_as_the_model_says_is_a_warning():
    """The fp32 capture read against a bf16 model: twice the expected growth, the mark of an fp32 cache."""
    trace, truth = _capture("fp32_b1_dynamic")
    timeline = load_trace(trace)
    bf16 = shape_from_config(truth["config"], dtype="bfloat16")
    result = with_memory_model(analyze(timeline), timeline, bf16)
    (finding,) = [f for f in result.findings if f.id == "kv-growth-vs-model"]
    assert finding.severity == "warn" and "fp32" in finding.detail
    assert finding.evidence["ratio"] == pytest.approx(2.0, rel=0.1)


def test_without_memory_events_summary_memory_is_null_and_steps_are_unchanged():
    with_memory, truth = _capture("fp32_b1_dynamic")
    without, _ = _capture("fp32_b1_dynamic_nomem")
    plain = load_trace(without)
    assert plain.memory is None
    report = contract(plain, analyze(plain))
    assert report["summary"]["memory"] is None
    assert all(s["memory_allocated_end_bytes"] is None and s["memory_peak_bytes"] is None for s in report["steps"])
    profiled = analyze(load_trace(with_memory))
    cols = ["kind", "request", "index", "tokens", "batch"]
    assert len(profiled.steps) == len(analyze(plain).steps) == truth["forwards"]
    assert profiled.steps[cols].reset_index(drop=True).equals(analyze(plain).steps[cols].reset_index(drop=True))
    sample = load_trace(ROOT / "sample_traces" / "cpu_tiny-llama_eager" / "trace.json.gz")
    assert contract(sample, analyze(sample))["summary"]["memory"] is None  # the shipped samples stay so


def test_each_step_gets_its_memory_in_the_contract():
    trace, _ = _capture("fp32_b1_dynamic")
    timeline = load_trace(trace)
    result = analyze(timeline)
    report = contract(timeline, result)
    steps = report["steps"]
    assert all(isinstance(s["memory_allocated_end_bytes"], int) for s in steps)
    assert all(s["memory_peak_bytes"] >= s["memory_allocated_end_bytes"] for s in steps)
    decode_ends = [s["memory_allocated_end_bytes"] for s in steps if s["kind"] == "decode"]
    assert decode_ends == sorted(decode_ends)  # the dynamic cache only grows during the request
    summary = report["summary"]["memory"]
    assert set(summary) >= {
        "device",
        "peak_allocated_bytes",
        "peak_reserved_bytes",
        "kv_growth_bytes_per_token",
        "expected_kv_bytes_per_token",
        "expected_weights_bytes",
        "kv_tokens_capacity",
        "devices",
    }
    assert summary["expected_kv_bytes_per_token"] is None and summary["kv_tokens_capacity"] is None  # no model
    phases = summary["phases"]
    assert set(phases) == {"prefill", "decode"}
    assert max(p["peak_allocated_bytes"] for p in phases.values()) == summary["peak_allocated_bytes"]
    json.dumps(report)  # JSON-ready


def test_memory_kept_after_a_request_is_found_only_when_it_is_kept():
    kept, _ = _capture("fp32_b1_two_requests_kept")
    dropped, _ = _capture("fp32_b1_two_requests")
    findings = analyze(load_trace(kept)).findings
    (leak,) = [f for f in findings if f.id == "memory-not-returned"]
    assert leak.evidence["requests"] == 2 and "past_key_values" in leak.detail
    assert not [f for f in analyze(load_trace(dropped)).findings if f.id == "memory-not-returned"]
    requests = analyze(load_trace(dropped)).summary.memory.requests
    assert requests[0]["after_bytes"] == requests[0]["before_bytes"]  # all of it returned before request 1


def test_the_seed_128_kib_per_token_comes_out_of_the_llama_3_8b_preset():
    llama = model_shape("llama-3-8b")  # bf16, as the seed
    assert kv_bytes_per_token(llama) == 128 * 1024 == 2 * 32 * 8 * 128 * 2
    assert format_bytes(107 * kv_bytes_per_token(llama)) == "13.4 MiB"  # the seed's admission check: 13.4 MB
    timeline, _ = _gpu_trace(kv_bytes=128 * 1024)
    memory = with_memory_model(analyze(timeline), timeline, llama).summary.memory
    assert memory.expected_kv_bytes_per_token == 128 * 1024
    assert memory.kv_growth_bytes_per_token == pytest.approx(128 * 1024)
    assert memory.expected_weights_bytes == llama.parameters * 2
    # the seed's H100 (80 GB): what fits beside 16 GB of weights at 128 KiB per token
    assert memory.kv_tokens_capacity == (80 * GIB - llama.parameters * 2) // (128 * 1024)


def _gpu_trace(kv_bytes: int, reserved: int = 512 << 20, total: int = 80 * GIB, resident: int = 100 << 20, **kw):
    """A SYNTHETIC GPU generation with CUDA memory events: each forward keeps `kv_bytes` more, plus host memory."""
    events = synthetic_generation(decode_steps=8)
    steps = analyze(read_chrome_trace(json.dumps(doc(events)).encode())).steps
    windows = [(s / 1e3, e / 1e3) for s, e in zip(steps["start_ns"], steps["end_ns"], strict=True)]
    memory, ends = memory_for_steps(windows, kv_bytes, reserved_bytes=reserved, resident_bytes=resident, **kw)
    memory += [memory_event(w[0] + 0.5, 64, 64 * (i + 1), 0, device_type=CPU) for i, w in enumerate(windows)]
    trace = doc(events + memory)
    trace["deviceProperties"][0]["totalGlobalMem"] = total
    return read_chrome_trace(json.dumps(trace).encode()), ends


def test_gpu_trace_per_step_figures_are_exact_and_the_host_is_listed_apart():
    timeline, ends = _gpu_trace(kv_bytes=3 << 20, reserved=160 << 20)  # a little above the peak allocated
    result = analyze(timeline)
    memory = result.summary.memory
    assert memory.device == "cuda:0" and memory.peak_reserved_bytes == 160 << 20
    assert list(result.steps["memory_allocated_end_bytes"]) == ends
    change = result.steps["memory_change_bytes"].tolist()
    assert change[1:] == [3 << 20] * 8
    assert (result.steps["memory_peak_bytes"] - result.steps["memory_allocated_end_bytes"]).tolist() == [1 << 20] * 9
    assert memory.kv_growth_bytes_per_token == 3 << 20
    assert memory.transient_bytes_per_decode_step == 1 << 20
    assert memory.resident_bytes == 100 << 20 and memory.device_memory_bytes == 80 * GIB
    host = {"device": "cpu", "events": 9, "peak_allocated_bytes": 64 * 9, "peak_reserved_bytes": None}
    assert memory.devices == [host]
    # without a model: the KV tokens that fit beside what was resident before the first step
    assert memory.kv_tokens_capacity == (80 * GIB - (100 << 20)) // (3 << 20)
    assert not [f for f in result.findings if f.id.startswith(("memory-", "reserved-"))]


def test_reserved_far_above_allocated_and_a_peak_near_capacity_say_what_to_change():
    timeline, _ = _gpu_trace(kv_bytes=1 << 20, reserved=30 * GIB, total=32 * GIB, resident=20 * GIB)
    findings = {f.id: f for f in analyze(timeline).findings}
    slack = findings["reserved-far-above-allocated"]
    assert "expandable_segments" in slack.detail and slack.severity == "warn"
    assert slack.evidence["slack_bytes"] == 30 * GIB - (20 * GIB + 9 * (1 << 20) + (1 << 20))
    near = findings["memory-near-capacity"]
    assert near.severity == "warn" and near.evidence["share"] == pytest.approx(30 / 32)


def test_the_gpu_table_gives_the_size_when_the_trace_does_not():
    timeline, _ = _gpu_trace(kv_bytes=1 << 20)
    devices = {0: dataclasses.replace(timeline.meta.devices[0], name="NVIDIA H100 80GB HBM3", memory_bytes=None)}
    timeline = dataclasses.replace(timeline, meta=dataclasses.replace(timeline.meta, devices=devices))
    memory = analyze(timeline).summary.memory
    assert memory.device_memory_bytes == 80 * GIB
    assert any("GPU table" in n for n in memory.notes)


def test_memory_survives_the_perfetto_export_and_the_cache(tmp_path):
    from stepscope.exporters.perfetto_trace import perfetto_trace_bytes
    from stepscope.parsers import parse_trace_bytes
    from stepscope.trace_cache.store import CacheStore
    from stepscope.trace_cache.timelines import load_trace_cached

    trace, _ = _capture("fp32_b1_dynamic")
    timeline = load_trace(trace)
    before = analyze(timeline)
    back = parse_trace_bytes(perfetto_trace_bytes(timeline, before))
    after = analyze(back).summary.memory
    assert back.meta.warnings == ()  # Stepscope's own memory tracks: read back by name, no guessing
    assert after.peak_allocated_bytes == before.summary.memory.peak_allocated_bytes
    assert after.kv_growth_bytes_per_token == pytest.approx(before.summary.memory.kv_growth_bytes_per_token, rel=0.02)
    store = CacheStore(tmp_path / "cache")
    load_trace_cached(trace, store=store)
    warm = load_trace_cached(trace, store=store)
    assert contract(warm, analyze(warm))["summary"]["memory"] == contract(timeline, before)["summary"]["memory"]


def test_a_collector_run_with_profile_memory_records_it_and_its_kv_growth_matches_its_model(tmp_path):
    """`stepscope run --profile-memory` (collectors.run): run.json's spec records profile_memory, the trace holds
    memory events, and the model of run.json (config and dtype) gives the expected KV the trace measured."""
    pytest.importorskip("torch")
    from stepscope.analysis.roofline import shape_from_run_record
    from stepscope.collectors.run import build_parser, run_profiled_generation, spec_from_args
    from stepscope.contracts.run_record import read_run_record

    spec = spec_from_args(build_parser().parse_args(["--device", "cpu", "--new-tokens", "8", "--profile-memory"]))
    run_dir = run_profiled_generation(spec, tmp_path)
    record = read_run_record(run_dir)
    assert record.spec["profile_memory"] is True
    timeline = load_trace(run_dir / "trace.json.gz")  # run.json beside it: attached
    result = with_memory_model(analyze(timeline), timeline, shape_from_run_record(record), record)
    memory = result.summary.memory
    model = shape_from_run_record(record)
    assert memory.expected_kv_bytes_per_token == 2 * model.layers * model.kv_heads * model.head_dim * 4  # fp32, b1
    assert memory.kv_growth_bytes_per_token == pytest.approx(memory.expected_kv_bytes_per_token, rel=0.10)
