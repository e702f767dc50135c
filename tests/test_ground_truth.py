"""Ground truth: real CPU captures made here by the collectors, with per-forward markers.

Each trace is analysed twice: as captured (steps from the markers) and with every marker
stripped (steps inferred from the trace itself). Both must find the same forwards, in order,
each marker's midpoint inside its inferred step, and agree with the harness timings in run.json.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from stepscope.analysis import analyze
from stepscope.collectors.run import RunSpec, run_profiled_generation
from stepscope.contracts.markers import MARKER_PREFIX, parse_marker
from stepscope.parsers import load_trace

CASES = {
    "llama-b1": RunSpec(preset="tiny-llama", device="cpu", prompt_tokens=12, new_tokens=6, record_shapes=True),
    "qwen2-b3-sampling": RunSpec(
        preset="tiny-qwen2", device="cpu", prompt_tokens=9, new_tokens=5, batch=3, sample=True, record_shapes=True
    ),
    "phi3-two-requests": RunSpec(
        preset="tiny-phi3", device="cpu", prompt_tokens=7, new_tokens=4, requests=2, record_shapes=True
    ),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("runs")
    return {name: run_profiled_generation(spec, out_dir=out) for name, spec in CASES.items()}


def _strip_markers(trace: Path, dest: Path) -> Path:
    with gzip.open(trace, "rt") as fh:
        doc = json.load(fh)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith(MARKER_PREFIX)]
    dest.write_text(json.dumps(doc))
    return dest


def _markers(trace: Path) -> list[tuple]:
    with gzip.open(trace, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    found = []
    for e in events:
        marker = parse_marker(str(e.get("name", ""))) if e.get("ph") == "X" else None
        if marker and e.get("cat") == "user_annotation":
            found.append((e["ts"] * 1000 + e["dur"] * 500, marker))
    return sorted(found, key=lambda item: item[0])


@pytest.mark.parametrize("case", list(CASES))
def test_stripped_markers_give_the_same_steps(runs, case, tmp_path):
    trace = runs[case] / "trace.json.gz"
    spec = CASES[case]
    marked = analyze(load_trace(trace))
    stripped = analyze(load_trace(_strip_markers(trace, tmp_path / "stripped.json")))
    assert marked.segmentation.method == "stepscope-markers"
    assert stripped.segmentation.method == "embedding-lookup"

    forwards = spec.requests * spec.new_tokens  # one prefill + new_tokens - 1 decodes per request
    assert len(marked.steps) == len(stripped.steps) == forwards
    cols = ["kind", "request", "index", "tokens", "batch"]
    assert marked.steps[cols].reset_index(drop=True).equals(stripped.steps[cols].reset_index(drop=True))

    markers = _markers(trace)
    assert len(markers) == forwards
    starts, ends = stripped.steps["start_ns"].to_numpy(), stripped.steps["end_ns"].to_numpy()
    for (midpoint, marker), s, e, kind in zip(markers, starts, ends, stripped.steps["kind"], strict=True):
        assert s <= midpoint < e
        assert marker.kind == kind
    assert list(marked.steps["tokens"]) == [m.tokens * m.batch for _, m in markers]


@pytest.mark.parametrize("case", list(CASES))
def test_trace_itl_agrees_with_the_harness(runs, case):
    """Behaviour, not timing: the harness's wall clock and the trace's clock are two measurements, and on a loaded
    machine they drift apart (bench/ and `stepscope gpu-check` print both side by side). What must hold on any
    machine: one ITL per harness ITL, per request; each is the time between that request's consecutive tokens on
    the trace's clock; and no token comes sooner than its own forward (its marker) takes to run."""
    run = json.loads((runs[case] / "run.json").read_text())
    result = analyze(load_trace(runs[case] / "trace.json.gz"))
    steps = result.steps
    assert result.summary.prefill_steps == CASES[case].requests
    markers = _markers(runs[case] / "trace.json.gz")
    durations = {(m.request, m.index): dur for dur, m in _marker_durations(runs[case] / "trace.json.gz")}
    assert len(durations) == len(markers)
    for req, timing in enumerate(run["timings"]["per_request"]):
        mine = steps[steps["request"] == req].sort_values("token_ns")
        decodes = mine[mine["itl_ns"] > 0]
        assert len(decodes) == len(timing["itl_ms"]) == CASES[case].new_tokens - 1
        assert list(decodes["itl_ns"]) == list(np.diff(mine["token_ns"].to_numpy()))
        for index, itl in zip(decodes["index"], decodes["itl_ns"], strict=True):
            assert itl >= durations[(req, index)] * 1000 * 0.99


def _marker_durations(trace: Path) -> list[tuple]:
    with gzip.open(trace, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    found = []
    for e in events:
        marker = parse_marker(str(e.get("name", ""))) if e.get("ph") == "X" else None
        if marker and e.get("cat") == "user_annotation":
            found.append((e["dur"], marker))
    return found


SHIPPED = Path(__file__).resolve().parents[1] / "sample_traces"


@pytest.mark.parametrize("sample", ["cpu_tiny-llama_eager", "cpu_tiny-llama_compile"])
def test_shipped_samples_give_the_same_steps_without_markers(sample, tmp_path):
    """The compile sample's decode forwards are torch.compile'd: no aten::embedding on the host at all."""
    trace = SHIPPED / sample / "trace.json.gz"
    marked = analyze(load_trace(trace))
    stripped = analyze(load_trace(_strip_markers(trace, tmp_path / "stripped.json")))
    assert marked.segmentation.method == "stepscope-markers"
    assert len(stripped.steps) == len(marked.steps) == 32
    cols = ["kind", "request", "index", "tokens", "batch"]
    assert marked.steps[cols].reset_index(drop=True).equals(stripped.steps[cols].reset_index(drop=True))
    # a marker opens a little before the forward's first op: ops in between may fall to the other side
    assert marked.summary.kernels_per_decode_step == stripped.summary.kernels_per_decode_step
    markers = _markers(trace)
    for (midpoint, _), s, e in zip(markers, stripped.steps["start_ns"], stripped.steps["end_ns"], strict=True):
        assert s <= midpoint < e
    itl_marked, itl_stripped = marked.summary.itl_ms["p50"], stripped.summary.itl_ms["p50"]
    assert abs(itl_marked - itl_stripped) <= 0.05 * itl_marked
