"""What each step's batch holds, from engine annotations: the real vLLM and SGLang traces in tests/data/real, and
SYNTHETIC traces built here (vLLM V1 step annotations around kernels) whose right answer is what they were built
with: speculative verify steps, mixed steps that cost the decoding sequences, Compare's composition rows."""

from __future__ import annotations

import pytest

from stepscope.analysis import analyze
from stepscope.analysis.annotations import sglang_label, vllm_label
from stepscope.analysis.compare import compare
from stepscope.analysis.report import contract
from stepscope.parsers import load_trace
from tests.conftest import real_trace
from tests.synthetic_traces import annotation, kernel, launch, write


@pytest.mark.parametrize(
    ("name", "kind", "tokens", "sequences", "prefill", "decoding"),
    [
        ("execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk55086sqsq32sqsk55086)", "decode", 32, 32, 0, 32),
        ("execute_8192_context_9(sq8155sk8430sqsq7475785sqsk7671310)_generation_37(sq37sk34489sqsq37sqsk34489)",
         "mixed", 8192, 46, 8155, 37),
        ("execute_context_1(888_788544)_generation_0(0)", "prefill", 888, 1, 888, 0),
        ("execute_context_0(0)_generation_1(5)", "verify", 5, 1, 0, 1),  # one sequence scoring 5 positions
        ("execute_20_context_0(sq0sk0sqsq0sqsk0)_generation_4(sq20sk900sqsq100sqsk4500)", "verify", 20, 4, 0, 4),
    ],
)  # fmt: skip
def test_vllm_step_names_give_the_composition(name, kind, tokens, sequences, prefill, decoding):
    label = vllm_label(name)
    assert (label.kind, label.tokens, label.batch) == (kind, tokens, sequences)
    assert (label.prefill_tokens, label.decode_sequences) == (prefill, decoding)


def test_sglang_batch_spans():
    decode, extend = sglang_label("step[DECODE bs=32]"), sglang_label("step[EXTEND bs=3]")
    assert (decode.kind, decode.batch, decode.decode_sequences, decode.prefill_tokens) == ("decode", 32, 32, 0)
    assert (extend.kind, extend.batch, extend.decode_sequences, extend.prefill_tokens) == ("prefill", 3, 0, None)


@pytest.mark.parametrize(
    ("trace", "kind", "sequences", "prefill", "decoding"),
    [
        ("tracelens_vllm_gptoss_decode_fullgraph_rocm.json.gz", "decode", 32, 0, 32),
        ("tracelens_vllm_gptoss_mixed_piecewise_rocm.json.gz", "mixed", 46, 8155, 37),
        ("tracelens_vllm_gptoss_prefill_eager_b200.json.gz", "prefill", 1, 888, 0),
    ],
)
def test_real_vllm_traces_carry_their_composition(trace, kind, sequences, prefill, decoding):
    timeline = load_trace(real_trace(trace))
    report = contract(timeline, analyze(timeline))
    step = report["steps"][0]
    assert (step["kind"], step["sequences"], step["prefill_tokens"], step["decode_sequences"]) == (
        kind,
        sequences,
        prefill,
        decoding,
    )
    assert report["summary"]["verify_steps"] == report["summary"]["draft_steps"] == 0
    assert report["summary"]["speculative"] is None


def _synthetic_vllm(names_and_kernel_us: list[tuple[str, float]], spacing_us: float = 50.0) -> list[dict]:
    """SYNTHETIC: one vLLM V1 step annotation per entry, each around one launch and its kernel of the given time."""
    events, t = [], 1000.0
    for corr, (name, kernel_us) in enumerate(names_and_kernel_us, start=1):
        events.append(annotation(name, t, 5.0))
        events.append(launch(t + 1.0, 2.0, corr))
        events.append(kernel("fused_forward", t + 3.0, kernel_us, corr))
        t += 3.0 + kernel_us + spacing_us
    return events


def test_speculative_verify_steps_state_itl_as_a_range(tmp_path):
    """SYNTHETIC: vLLM verify steps of one sequence scoring 5 positions (4 draft tokens): ITL per emitted token is
    not one figure; the range and a warning say so."""
    steps = [("execute_context_1(12_144)_generation_0(0)", 400.0)]
    steps += [("execute_context_0(0)_generation_1(5)", 1000.0)] * 4
    path = write(tmp_path / "synthetic_spec.json", _synthetic_vllm(steps))
    timeline = load_trace(path)
    result = analyze(timeline)
    report = contract(timeline, result)
    assert [s["kind"] for s in report["steps"]] == ["prefill"] + ["verify"] * 4
    summary = report["summary"]
    assert summary["decode_steps"] == 0 and summary["verify_steps"] == 4 and summary["itl_ms"] is None
    spec = summary["speculative"]
    assert spec["draft_tokens_per_verify"] == 4 and not spec["acceptance_known"]
    step_ms = spec["verify_step_ms"]["p50"]
    assert step_ms == pytest.approx((3.0 + 1000.0 + 50.0) / 1000, rel=0.01)  # start to start of verify steps
    assert spec["itl_ms_range"] == pytest.approx({"min": step_ms / 5, "max": step_ms})
    assert any("between" in w and "accepted" in w for w in report["segmentation"]["warnings"])
    assert any(f["id"] == "speculative-decoding" for f in report["findings"])


def test_mixed_steps_that_stall_decodes_are_a_finding(tmp_path):
    """SYNTHETIC: 8 decode steps of 31 sequences (100 us) and 4 mixed ones carrying a 512-token prefill chunk
    (300 us): the finding gives the ratio and the decoding sequences' wait."""
    decode = ("execute_31_context_0(sq0sk0sqsq0sqsk0)_generation_31(sq31sk3100sqsq31sqsk3100)", 100.0)
    mixed = ("execute_543_context_1(sq512sk512sqsq262144sqsk262144)_generation_31(sq31sk3100sqsq31sqsk3100)", 300.0)
    names = [decode, decode, mixed, decode, decode, mixed, decode, decode, mixed, decode, decode, mixed]
    path = write(tmp_path / "synthetic_mixed.json", _synthetic_vllm(names))
    result = analyze(load_trace(path))
    # the engine's annotations make it a served run: prefill-decode interference says it per decode token, priced
    # for the requests, and batching-cost gives way to it (analysis.pipeline.with_serving)
    ids = [f.id for f in result.findings]
    assert "prefill-decode-interference" in ids and "batching-cost" not in ids
    finding = next(f for f in result.findings if f.id == "prefill-decode-interference")
    # a step runs from its start to the next one's: the kernel plus the 53 us of host time around it
    assert finding.evidence["ratio"] == pytest.approx((300 + 53) / (100 + 53), rel=0.01)
    assert finding.evidence["mixed_steps"] == 4 and finding.evidence["chunk_positions"] == 512
    assert "31 a mixed step" in finding.detail
    assert result.summary.mixed_steps == 4 and result.summary.decode_steps == 8


def test_compare_shows_composition_differences(tmp_path):
    decode = ("execute_31_context_0(sq0sk0sqsq0sqsk0)_generation_31(sq31sk3100sqsq31sqsk3100)", 100.0)
    single = ("execute_1_context_0(sq0sk0sqsq0sqsk0)_generation_1(sq1sk100sqsq1sqsk100)", 90.0)
    mixed = ("execute_543_context_1(sq512sk512sqsq262144sqsk262144)_generation_31(sq31sk3100sqsq31sqsk3100)", 300.0)
    a = analyze(load_trace(write(tmp_path / "synthetic_a.json", _synthetic_vllm([single] * 6))))
    b = analyze(load_trace(write(tmp_path / "synthetic_b.json", _synthetic_vllm([decode] * 5 + [mixed]))))
    result = compare(a, b, "one sequence", "batched")
    rows = result.composition.set_index("key")
    assert rows.loc["sequences_per_decode_step", "a"] == 1 and rows.loc["sequences_per_decode_step", "b"] == 31
    assert rows.loc["mixed_steps", "a"] == 0 and rows.loc["mixed_steps", "b"] == 1
    assert "31 sequences per decode step against 1" in result.sentence
    assert result.composition_json()[0]["key"] == "sequences_per_decode_step"
