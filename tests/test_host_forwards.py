"""Steps from the host's forward spans on SYNTHETIC serving traces shaped like vLLM V1 (tests/synthetic_serving.py):
no annotations, piecewise graph replays, an eager prefill, several ranks. Expected answers come from the
generator's own record of what each forward launched, not from the analysis."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from stepscope.analysis import analyze
from stepscope.analysis.step_finding import STRATEGIES
from stepscope.parsers import load_trace
from tests.conftest import real_trace
from tests.synthetic_serving import (
    DECODE_KERNELS_PER_LAYER,
    HEAD_GRAPH_KERNELS,
    LAYERS,
    PREFILL_HEAD_KERNELS,
    PREFILL_KERNELS_PER_LAYER,
    SAMPLER_KERNELS,
    serving_trace,
)
from tests.synthetic_traces import cpu_op, write


def _analyze(doc: dict, tmp_path):
    path = write(tmp_path / "trace.json", doc)
    timeline = load_trace(path)
    return timeline, analyze(timeline)


def _check_steps(result, truth, graph_launches_per_decode: int):
    steps = result.steps
    assert result.segmentation.method == "host-forwards"
    assert steps["kind"].tolist() == truth.kinds == ["prefill"] + ["decode"] * 9 + ["empty"]
    assert steps["start_ns"].tolist() == [round(s * 1000) for s in truth.starts_us]
    assert steps["kernels"].tolist() == truth.kernels
    assert steps["graph_launches"].tolist() == truth.graph_launches
    decode_kernels = LAYERS * DECODE_KERNELS_PER_LAYER + HEAD_GRAPH_KERNELS + SAMPLER_KERNELS
    assert truth.kernels[0] == LAYERS * PREFILL_KERNELS_PER_LAYER + PREFILL_HEAD_KERNELS + SAMPLER_KERNELS == 1133
    assert truth.kernels[1:-1] == [decode_kernels] * 9 and decode_kernels == 1378
    assert set(truth.graph_launches[1:-1]) - {0} == {graph_launches_per_decode}
    s = result.summary
    assert s.prefill_steps == 1 and s.decode_steps == 9
    assert s.kernels_per_decode_step == decode_kernels
    spacing_ms = np.median(np.diff(truth.starts_us[1:-1])) / 1000
    assert abs(s.itl_ms["p50"] - spacing_ms) <= 0.05 * spacing_ms
    # TTFT: from the prefill's start to its token, about the prefill's 1133 kernels of 60-78 us
    assert s.ttft_ms is not None and 80 < s.ttft_ms < 100


def test_piecewise_graphs_are_pieces_of_one_forward(tmp_path):
    doc, truth = serving_trace()
    _, result = _analyze(doc, tmp_path)
    _check_steps(result, truth, graph_launches_per_decode=LAYERS + 1)
    evidence = " | ".join(result.segmentation.evidence)
    assert "gpu_worker.py(330): execute_model" in evidence  # the outermost span that repeats once per forward
    assert "process 1000" in evidence and "2 processes" in evidence  # rank 0 has the most forwards
    assert "kernel launch grids" in evidence and "empty" in evidence
    assert result.segmentation.confidence == pytest.approx(0.75)


def test_full_graph_decodes_on_rocm(tmp_path):
    doc, truth = serving_trace(api="hip", full_graph=True, device_name="AMD Instinct MI300X")
    for d in doc["deviceProperties"]:
        d["id"] += 4  # ROCm numbers the kernels' devices differently from deviceProperties: a name is still found
    timeline, result = _analyze(doc, tmp_path)
    _check_steps(result, truth, graph_launches_per_decode=1)
    assert timeline.device_name == "AMD Instinct MI300X"


@pytest.mark.parametrize("grids", [True, False])
def test_an_eager_decode_among_graphed_ones_stays_a_decode_step(tmp_path, grids):
    doc, truth = serving_trace(ranks=1, eager_decodes=(4,))
    if not grids:
        for e in doc["traceEvents"]:
            e.get("args", {}).pop("grid", None)
    _, result = _analyze(doc, tmp_path)
    assert truth.graph_launches[4] == 0 and truth.kernels[4] == truth.kernels[3]
    _check_steps(result, truth, graph_launches_per_decode=LAYERS + 1)


def test_sglang_rocm_trace_names_its_device():
    timeline = load_trace(real_trace("tracelens_sglang_qwen3-8b_decode_mi300x.json.gz"))
    assert timeline.device_name == "AMD Instinct MI300X"  # deviceProperties id 0, kernels on device 9


def test_without_grids_kinds_come_from_kernel_time(tmp_path):
    doc, truth = serving_trace(ranks=1)
    for e in doc["traceEvents"]:
        e.get("args", {}).pop("grid", None)
        e.get("args", {}).pop("block", None)
    timeline, result = _analyze(doc, tmp_path)
    assert "grid" not in timeline.events
    _check_steps(result, truth, graph_launches_per_decode=LAYERS + 1)
    evidence = " | ".join(result.segmentation.evidence)
    assert "kernel time per forward" in evidence and "processes" not in evidence


def test_python_spans_nest_six_deep_around_the_module_span(tmp_path):
    """The generator's shape, checked from the events: the stack a with_stack capture holds."""
    doc, _ = serving_trace(ranks=1)
    py = [e for e in doc["traceEvents"] if e["cat"] == "python_function"]
    module = next(e for e in py if e["name"].startswith("nn.Module"))
    mid = module["ts"] + module["dur"] / 2
    enclosing = [e for e in py if e["ts"] <= mid < e["ts"] + e["dur"] and e is not module]
    assert len(enclosing) == 6
    assert not any(e["cat"] == "user_annotation" for e in doc["traceEvents"])


def test_a_training_trace_with_repeating_spans_has_no_steps(tmp_path):
    doc, _ = serving_trace(ranks=1)
    forwards = [e for e in doc["traceEvents"] if e["name"].endswith("gpu_worker.py(330): execute_model")]
    doc["traceEvents"] += [cpu_op("autograd::engine::evaluate_function: MmBackward0", e["ts"] + 1, 1) for e in forwards]
    _, result = _analyze(doc, tmp_path)
    assert result.segmentation.method == "none" and result.steps.empty


def test_annotations_still_win_over_host_spans(tmp_path):
    doc, truth = serving_trace(ranks=1)
    doc = copy.deepcopy(doc)
    first = truth.starts_us[0]
    doc["traceEvents"].append(
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "execute_context_1(1049)_generation_0(0)",
            "pid": 1000,
            "tid": 1000,
            "ts": first,
            "dur": 50.0,
        }
    )
    _, result = _analyze(doc, tmp_path)
    assert result.segmentation.method == "vllm-annotations"


def test_strategies_are_ordered_from_most_specific():
    names = [s.__name__ for s in STRATEGIES]
    assert names.index("stepscope_markers") < names.index("training_guard") < names.index("host_forwards")
    assert names.index("host_forwards") < names.index("embedding_lookup") < names.index("graph_replays")


def test_cli_json_says_what_decided(tmp_path):
    import subprocess
    import sys

    doc, _ = serving_trace(ranks=1)
    path = write(tmp_path / "t.json", doc)
    out = subprocess.run(
        [sys.executable, "-m", "app.cli", "analyze", str(path), "--json"], capture_output=True, text=True, check=True
    )
    seg = json.loads(out.stdout)["segmentation"]
    assert seg["method"] == "host-forwards"
    assert any("execute_model" in line for line in seg["evidence"])
