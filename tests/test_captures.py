"""Real CPU captures of today's generation shapes (tests/data/captures, made by tests/captures/make.py): the steps
Stepscope finds against the truth each run recorded of itself (its forward calls, timed on the trace's clock, and
what the engine scheduled in each), never against Stepscope's own output.

For every capture: the prefill / decode / mixed / verify / draft / empty step counts and the request count equal
the truth; the k-th true forward's midpoint lies inside the k-th step; ITL p50 is within 5% of the spacing of the
decode forwards where both are defined.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from stepscope.analysis import analyze
from stepscope.analysis.composition import request_count
from stepscope.analysis.report import contract
from stepscope.parsers import load_trace
from tests.conftest import missing

CAPTURES = Path(__file__).resolve().parent / "data" / "captures"
SHAPES = (
    "continuous_batching",
    "assisted_generation",
    "speculative_verify_only",
    "compiled_forward",
    "compiled_forward_shapes",
    "launching_thread_only",
    "launching_thread_only_stack",
    "background_all_threads",
    "two_requests_stack",
    "beam_search",
    "left_padded_sampling",
    "moe",
    "pipeline_chat",
)
KINDS = ("prefill", "decode", "mixed", "verify", "draft", "empty")


def _capture(shape: str):
    trace, truth = CAPTURES / f"{shape}.json.gz", CAPTURES / f"{shape}.truth.json"
    if not trace.exists() or not truth.exists():
        missing(f"{trace} is not in this checkout")
    timeline = load_trace(trace)
    return timeline, analyze(timeline), json.loads(truth.read_text())


@pytest.fixture(scope="module", params=SHAPES)
def captured(request):
    return request.param, *_capture(request.param)


def _recorded(truth: dict) -> list[dict]:
    return [f for f in truth["forwards"] if f["recorded"]]


def test_step_kinds_and_requests_equal_the_truth(captured):
    shape, _, result, truth = captured
    counts = Counter(result.steps["kind"])
    assert {k: counts.get(k, 0) for k in KINDS} == truth["counts"], (shape, result.segmentation)
    assert request_count(result.steps) == truth["requests_recorded"]
    s = result.summary
    assert (s.prefill_steps, s.decode_steps, s.mixed_steps) == tuple(truth["counts"][k] for k in KINDS[:3])
    assert (s.verify_steps, s.draft_steps) == (truth["counts"]["verify"], truth["counts"]["draft"])


def test_every_true_forward_lies_inside_the_step_of_the_same_order(captured):
    shape, _, result, truth = captured
    forwards = _recorded(truth)
    steps = result.steps
    assert len(steps) == len(forwards)
    for k, (forward, start, end, kind) in enumerate(
        zip(forwards, steps["start_ns"], steps["end_ns"], steps["kind"], strict=True)
    ):
        midpoint_ns = (forward["ts_us"] + forward["dur_us"] / 2) * 1000
        assert start <= midpoint_ns < end, (shape, k)
        assert kind == forward["kind"], (shape, k)


def test_itl_p50_is_the_spacing_of_decode_forwards(captured):
    shape, _, result, truth = captured
    decode_starts = [f["ts_us"] for f in _recorded(truth) if f["kind"] == "decode"]
    itl = result.summary.itl_ms
    if len(decode_starts) < 3 or itl is None:
        assert len(decode_starts) < 3 or shape == "assisted_generation"
        return
    spacing_ms = float(np.median(np.diff(decode_starts))) / 1000
    assert abs(itl["p50"] - spacing_ms) <= 0.05 * spacing_ms, (shape, itl["p50"], spacing_ms)


def test_composition_of_each_step_equals_the_truth(captured):
    """sequences, tokens, prefill tokens and decoding sequences per step, where the capture recorded shapes."""
    shape, timeline, result, truth = captured
    report = contract(timeline, result)
    for step, forward in zip(report["steps"], _recorded(truth), strict=True):
        if step["tokens"] is None:  # no input shapes recorded: nothing is claimed
            assert step["sequences"] is None and step["prefill_tokens"] in (None, 0), shape
            continue
        assert (step["sequences"], step["tokens"]) == (forward["sequences"], forward["tokens"]), shape
        if forward["kind"] != "draft":
            assert step["prefill_tokens"] == forward["prefill_tokens"], shape
            assert step["decode_sequences"] == forward["decode_sequences"], shape


def test_continuous_batching_counts_sequences_not_tokens():
    """HF generate_batch, 4 prompts: one all-prefill forward chunking the longest prompt, a second finishing it
    with another prompt, a mixed forward (2 decodes, 2 prompts joining), then decodes of 4 and of the last 2."""
    timeline, result, truth = _capture("continuous_batching")
    steps = result.steps
    assert steps["kind"].tolist() == ["prefill", "prefill", "mixed"] + ["decode"] * 7
    assert steps["batch"].tolist() == [1, 2, 4, 4, 4, 4, 4, 4, 4, 2]
    assert steps["opens"].tolist() == [1, 1, 2, 0, 0, 0, 0, 0, 0, 0]
    report = contract(timeline, result)
    assert report["requests"] == 4 == truth["requests"]
    assert not any(f["id"] == "prefill-dominated" for f in report["findings"])
    assert "mask blocks" in " ".join(result.segmentation.evidence)
    # each request's TTFT runs from the step it joined in to the step that ended its prompt
    assert len(result.summary.ttft_ms_by_request) == 4


def test_continuous_batching_without_mask_blocks_says_what_it_cannot_tell(tmp_path):
    """The same capture with the per-sequence mask ops removed (as a flash-attention engine records none): packed
    decodes still count sequences, and the forwards holding more positions than sequences are said to be
    uncertain instead of being called prefills of new requests."""
    import gzip

    source = CAPTURES / "continuous_batching.json.gz"
    if not source.exists():
        missing(f"{source} is not in this checkout")
    doc = json.loads(gzip.decompress(source.read_bytes()))
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("name") != "aten::triu_"]
    path = tmp_path / "no_mask.json"
    path.write_text(json.dumps(doc))
    result = analyze(load_trace(path))
    kinds = result.steps["kind"].tolist()
    assert kinds[0] == "prefill" and kinds[3:] == ["decode"] * 7
    assert set(kinds[1:3]) <= {"prefill", "mixed"}
    assert result.steps["batch"].tolist()[3:] == [4] * 6 + [2]
    assert any("split between them" in w for w in result.segmentation.warnings)


def test_assisted_generation_tells_the_draft_model_apart():
    timeline, result, truth = _capture("assisted_generation")
    steps = result.steps
    assert (steps["kind"] == "draft").tolist() == [f["model"] == "draft" for f in _recorded(truth)]
    assert steps.loc[steps["kind"] == "draft", "opens"].eq(0).all()
    spec = contract(timeline, result)["summary"]["speculative"]
    assert spec["verify_steps"] == 14 and spec["draft_steps"] == 15 and spec["draft_tokens_per_verify"] == 1
    # the target's cache grows by one position per verify: no draft token was accepted (random weights)
    assert spec["acceptance_known"] and spec["accepted_tokens_per_step"] == 0
    assert spec["itl_ms_per_token"]["p50"] == pytest.approx(spec["verify_step_ms"]["p50"])
    assert "draft model" in " ".join(result.segmentation.evidence)


def test_a_fully_compiled_forward_is_found_without_shapes_or_an_embedding():
    timeline, result, _ = _capture("compiled_forward")
    assert result.segmentation.method == "compiled-regions"
    assert not (timeline.events["name"].astype(str) == "aten::embedding").any()
    assert "nn.Module: LlamaForCausalLM" in " ".join(result.segmentation.evidence)


def test_a_trace_of_the_launching_thread_only_says_how_to_fix_it(tmp_path):
    import subprocess
    import sys

    _, result, truth = _capture("launching_thread_only")
    assert truth["forwards_called"] > 0 and truth["forwards_recorded"] == 0
    assert result.segmentation.method == "none" and result.steps.empty
    assert any("profile_all_threads=True" in w for w in result.segmentation.warnings)
    out = subprocess.run(
        [sys.executable, "-m", "app.cli", "analyze", str(CAPTURES / "launching_thread_only.json.gz"), "--json"],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "STEPSCOPE_CACHE_DIR": str(tmp_path)},
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["steps"] == [] and report["segmentation"]["method"] == "none"
    assert any("profile_all_threads" in w for w in report["segmentation"]["warnings"])
