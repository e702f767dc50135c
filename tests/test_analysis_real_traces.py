"""The real traces in ../shared/real_traces give the right answers (sources: PROVENANCE.md there;
AMD-AGI/TraceLens, facebookresearch/HolisticTraceAnalysis, pytorch/kineto, facebookresearch/param)."""

from __future__ import annotations

import pytest

from analysis import analyze
from parsers import load_trace
from tests.conftest import real_trace


def _analyze(name: str):
    timeline = load_trace(real_trace(name))
    return timeline, analyze(timeline)


def test_sglang_trace_is_one_decode_step_at_batch_32():
    _, result = _analyze("tracelens_sglang_qwen3-8b_decode_mi300x.json.gz")
    steps = result.steps
    assert len(steps) == 1
    step = steps.iloc[0]
    assert step["kind"] == "decode" and step["batch"] == 32
    assert step["kernels"] == 555  # every kernel in the file, replayed by one hipGraphLaunch
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


def test_training_trace_gaps_are_found_and_caused():
    _, result = _analyze("hta_training_cudagraph_a100.json.gz")
    gaps = result.gaps
    assert len(gaps) > 100
    assert set(gaps["cause"]) <= {"launch", "sync", "other"} and "launch" in set(gaps["cause"])
    assert (gaps["placement"] == "outside generation").all()
    assert (gaps["dur_ns"] >= 1000).all()
