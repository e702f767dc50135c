"""The real traces in tests/data/real give the right answers (sources: PROVENANCE.md there;
AMD-AGI/TraceLens, facebookresearch/HolisticTraceAnalysis, pytorch/kineto, facebookresearch/param)."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from itertools import pairwise

import pytest

from stepscope.analysis import analyze
from stepscope.parsers import load_trace, parse_trace_bytes
from tests.conftest import real_trace

GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")  # Kineto's names, written out here on purpose


def _raw(name: str) -> list[dict]:
    path = real_trace(name)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        doc = json.load(fh)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def _without_annotations(name: str, drop) -> bytes:
    """A variant of a real trace (in memory; the file is never edited) without the annotations `drop` names."""
    path = real_trace(name)
    doc = json.loads(gzip.decompress(path.read_bytes()))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not (e.get("cat") == "user_annotation" and drop(e["name"]))]
    return json.dumps(doc).encode()


def _analyze(name: str):
    timeline = load_trace(real_trace(name))
    return timeline, analyze(timeline)


def test_sglang_trace_is_one_decode_step_at_batch_32():
    # The file carries a vLLM-style annotation too, which would decide alone: drop it so that the SGLang
    # step[DECODE bs=32] annotation is what is tested.
    name = "tracelens_sglang_qwen3-8b_decode_mi300x.json.gz"
    result = analyze(parse_trace_bytes(_without_annotations(name, lambda n: n.startswith("execute_"))))
    assert result.segmentation.method == "sglang-annotations"
    steps = result.steps
    assert len(steps) == 1
    step = steps.iloc[0]
    assert step["kind"] == "decode" and step["batch"] == 32 and step["label"] == "step[DECODE bs=32]"
    # Work belongs to the step whose host range holds its launch call. Counted from the JSON: kernels whose
    # launch (same correlation id) starts inside the step[DECODE] annotation. The graph replay's 544 kernels
    # are among them; 5 eager kernels launched just before or after the annotation are not.
    raw = [e for e in _raw(name) if e.get("ph") == "X"]
    ann = next(e for e in raw if e["name"] == "step[DECODE bs=32]")
    launch_ts = {
        e["args"]["correlation"]: e["ts"]
        for e in raw
        if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})
    }
    inside = sum(
        1
        for e in raw
        if e.get("cat") == "kernel"
        and ann["ts"] <= launch_ts.get(e["args"].get("correlation"), -1) < ann["ts"] + ann["dur"]
    )
    assert step["kernels"] == inside == 550
    assert step["graph_launches"] == 1


def test_vllm_full_graph_step_owns_all_its_kernels():
    timeline, result = _analyze("tracelens_vllm_gptoss_decode_fullgraph_rocm.json.gz")
    assert result.segmentation.method == "vllm-annotations"
    steps = result.steps
    assert len(steps) == 1 and steps.iloc[0]["kind"] == "decode"
    assert steps.iloc[0]["kernels"] == timeline.kind_counts()["kernel"] == 425
    # the replayed kernels run long after the annotation closes; the step extends to the last of them
    ev = timeline.events
    last_kernel_end = (ev.loc[ev["kind"] == "kernel", "ts"] + ev.loc[ev["kind"] == "kernel", "dur"]).max()
    assert steps.iloc[0]["end_ns"] == last_kernel_end


def test_vllm_piecewise_trace_is_one_mixed_step():
    _, result = _analyze("tracelens_vllm_gptoss_mixed_piecewise_rocm.json.gz")
    steps = result.steps
    assert steps["kind"].tolist() == ["mixed"]
    assert steps.iloc[0]["graph_launches"] == 25
    assert steps.iloc[0]["tokens"] == 8192 and steps.iloc[0]["batch"] == 9 + 37


def test_b200_eager_trace_is_one_prefill_step():
    _, result = _analyze("tracelens_vllm_gptoss_prefill_eager_b200.json.gz")
    steps = result.steps
    assert steps["kind"].tolist() == ["prefill"]
    assert steps.iloc[0]["tokens"] == 888
    assert steps.iloc[0]["kernels"] == 768 and steps.iloc[0]["graph_launches"] == 0
    assert result.summary.decode_steps == 0 and result.summary.itl_ms is None


def test_hf_qwen_trace_is_one_forward_and_no_decode():
    _, result = _analyze("tracelens_hf_qwen1.5-0.5b_forward_h100.json.gz")
    steps = result.steps
    assert steps["kind"].tolist() == ["prefill"]
    assert steps.iloc[0]["batch"] == 16 and steps.iloc[0]["tokens"] == 16 * 559  # aten::embedding input [16, 559]
    assert result.summary.decode_steps == 0


@pytest.mark.parametrize(
    "name",
    [
        "hta_training_cudagraph_a100.json.gz",
        "hta_sampled_no_device_props.json.gz",
        "param_linear_rtx2080ti.json.gz",
        "kineto_resnet50_v100_legacy_categories.json.gz",
        "hta_alexnet_a100.json.gz",
        "kineto_tiny_sync_h100.json",
    ],
)
def test_traces_without_generation_have_no_steps_but_idle_figures(name):
    _, result = _analyze(name)
    assert result.segmentation.method == "none"
    assert result.steps.empty
    assert result.segmentation.warnings
    assert result.summary.gpu_busy_pct is not None and 0 < result.summary.gpu_busy_pct <= 100


def test_graph_replays_on_a_real_trace_without_annotations():
    # vLLM's piecewise trace, its step annotation dropped: 25 hipGraphLaunch calls are all that is left to cut by
    name = "tracelens_vllm_gptoss_mixed_piecewise_rocm.json.gz"
    result = analyze(parse_trace_bytes(_without_annotations(name, lambda n: True)))
    assert result.segmentation.method == "graph-replays"
    raw = [e for e in _raw(name) if e.get("ph") == "X"]
    launches = [e for e in raw if e["name"] == "hipGraphLaunch"]
    assert len(result.steps) == len(launches) == 25
    assert (result.steps["graph_launches"] == 1).all()
    # A step owns the kernels whose launch call starts between its graph launch and the next one (the
    # replay's own, same correlation id, plus eager kernels launched in between). Counted from the JSON.
    launches.sort(key=lambda e: e["ts"])
    launch_ts = {
        e["args"]["correlation"]: e["ts"]
        for e in raw
        if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})
    }
    kernel_launch_ts = [
        launch_ts[e["args"]["correlation"]]
        for e in raw
        if e.get("cat") == "kernel" and e.get("args", {}).get("correlation") in launch_ts
    ]
    starts = [e["ts"] for e in launches]
    expected = [sum(1 for t in kernel_launch_ts if a <= t < b) for a, b in pairwise(starts)]
    assert result.steps["kernels"].tolist()[:-1] == expected
    replayed_by_last = sum(
        1
        for e in raw
        if e.get("cat") == "kernel" and e.get("args", {}).get("correlation") == launches[-1]["args"]["correlation"]
    )
    assert result.steps["kernels"].iloc[-1] >= replayed_by_last > 0


def _idle_gaps_and_busy_share(name: str, threshold_ns: int = 1000) -> tuple[int, float]:
    """Straight from the JSON: per device, merge the GPU intervals; count holes of at least the threshold;
    busy share = merged time / (last end - first start) over all devices together."""
    by_device, everything = defaultdict(list), []
    for e in _raw(name):
        if e.get("ph") == "X" and e.get("cat") in GPU_CATEGORIES:
            start = round(e["ts"] * 1000)
            interval = (start, start + round(e["dur"] * 1000))
            by_device[e.get("args", {}).get("device", e.get("pid"))].append(interval)
            everything.append(interval)

    def merged(intervals):
        out = []
        for s, t in sorted(intervals):
            if out and s <= out[-1][1]:
                out[-1][1] = max(out[-1][1], t)
            else:
                out.append([s, t])
        return out

    gaps = sum(sum(1 for a, b in pairwise(m) if b[0] - a[1] >= threshold_ns) for m in map(merged, by_device.values()))
    union = merged(everything)
    busy = sum(t - s for s, t in union)
    return gaps, 100.0 * busy / (union[-1][1] - union[0][0])


def test_training_trace_gaps_are_found_and_caused():
    _, result = _analyze("hta_training_cudagraph_a100.json.gz")
    gaps = result.gaps
    expected_gaps, expected_busy = _idle_gaps_and_busy_share("hta_training_cudagraph_a100.json.gz")
    assert len(gaps) == expected_gaps == 7075
    assert result.summary.gpu_busy_pct == pytest.approx(expected_busy, abs=1e-6)
    assert set(gaps["cause"]) <= {"launch", "sync", "other"} and "launch" in set(gaps["cause"])
    assert (gaps["placement"] == "outside generation").all()
    assert (gaps["dur_ns"] >= 1000).all()
