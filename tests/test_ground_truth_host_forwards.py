"""Ground truth for the host-forwards strategy: real CPU captures made here by the collectors with
with_stack and with_modules (python and nn.Module spans), eager and torch.compile'd, markers stripped.

The stripped trace must give the same forwards as the markers did: count, order, kind, and each
marker's midpoint inside its step, found from the host's call tree alone.
"""

from __future__ import annotations

import pytest

from stepscope.analysis import analyze
from stepscope.collectors.run import RunSpec, run_profiled_generation
from stepscope.parsers import load_trace
from tests.test_ground_truth import _markers, _strip_markers

CASES = {
    # no input shapes: kinds come from position only
    "llama-eager": RunSpec(
        preset="tiny-llama", device="cpu", prompt_tokens=12, new_tokens=6, with_stack=True, with_modules=True
    ),
    # compiled decodes never call aten::embedding on the host; the eager prefill's shapes give the batch
    "llama-compile-b2": RunSpec(
        preset="tiny-llama",
        device="cpu",
        prompt_tokens=9,
        new_tokens=5,
        batch=2,
        mode="compile",
        with_stack=True,
        with_modules=True,
        record_shapes=True,
    ),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("stack_runs")
    return {name: run_profiled_generation(spec, out_dir=out) for name, spec in CASES.items()}


@pytest.mark.parametrize("case", list(CASES))
def test_host_spans_give_the_marked_forwards(runs, case, tmp_path):
    trace = runs[case] / "trace.json.gz"
    spec = CASES[case]
    stripped_timeline = load_trace(_strip_markers(trace, tmp_path / "stripped.json"))
    assert stripped_timeline.kind_counts()["python"] > 0  # a with_stack capture
    assert stripped_timeline.events["name"].astype(str).str.startswith("nn.Module: ").any()  # with_modules
    stripped = analyze(stripped_timeline)
    assert stripped.segmentation.method == "host-forwards", stripped.segmentation
    assert stripped.segmentation.evidence

    markers = _markers(trace)
    assert len(markers) == spec.new_tokens == len(stripped.steps)
    steps = stripped.steps
    assert steps["kind"].tolist() == [m.kind for _, m in markers]
    for (midpoint, _), s, e in zip(markers, steps["start_ns"], steps["end_ns"], strict=True):
        assert s <= midpoint < e
    if spec.record_shapes:
        assert steps["tokens"].tolist() == [m.tokens * m.batch for _, m in markers]
        assert steps["batch"].tolist() == [spec.batch] * len(markers)
