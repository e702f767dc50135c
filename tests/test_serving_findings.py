"""The serving findings (issue 41, analysis/serving_findings.py) on real vLLM captures made to show each one and
captures made not to (tests/captures/vllm.py; README in tests/data/captures/vllm). What each finding claims is
checked against vLLM's own record of the run (the truth file: its scheduler's steps, its arrival times, the
server's limits), never against Stepscope."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from stepscope.analysis.front_door import NO_CACHE, open_folder

CAPTURES = Path(__file__).resolve().parent / "data" / "captures" / "vllm"
SERVING_IDS = ("prefill-decode-interference", "head-of-line-blocking", "queued-with-room", "batch-never-fills")


def _truth(name: str) -> dict:
    return json.loads((CAPTURES / f"{name}.truth.json").read_text())


_OPENED: dict = {}


def _findings(name: str) -> dict:
    if name not in _OPENED:
        _OPENED[name] = open_folder(CAPTURES / name, cache=NO_CACHE)
    opened = _OPENED[name]
    return {f.id: f for f in opened.analysis.findings if f.id in SERVING_IDS}


def _opened(name: str):
    _findings(name)
    return _OPENED[name]


def _truth_waits(truth: dict, room_only: bool) -> dict[int, list[int]]:
    """Per request (in the order sent), the steps vLLM ran after its arrival and before its first step, the first left
    out (it may have been scheduled before the request reached the engine); `room_only`: only the steps below
    the server's sequence limit and token budget (the real room, from the server's settings)."""
    limits = truth["how"]["server"]
    steps = truth["steps"]
    out = {}
    for r in truth["requests"]:
        after = [s for s in steps if s["ts_us"] >= r["arrival_us"] and s["index"] < r["first_step"]][1:]
        if room_only:
            after = [
                s
                for s in after
                if s["sequence_count"] < limits["max_num_seqs"] and s["tokens"] < limits["max_num_batched_tokens"]
            ]
        out[r["request"]] = [s["index"] for s in after]
    return out


def _truth_token_waits(truth: dict) -> tuple[list[float], list[float]]:
    """A decode token's wait (from the step before's sampling end to this one's) in decode-only and in mixed steps
    that decode, ms, from vLLM's markers."""
    steps = truth["steps"]
    pure, mixed = [], []
    for before, step in itertools.pairwise(steps):
        if step["decode_sequences"] == 0 or before["kind"] == "empty":
            continue
        wait = (step["sample_end_us"] - before["sample_end_us"]) / 1e3
        (mixed if step["kind"] == "mixed" else pure if step["kind"] == "decode" else []).append(wait)
    return pure, mixed


def _in_run(opened, finding) -> None:
    """A finding a page can zoom to: its evidence inside the run, its cost and saving in time."""
    steps = opened.analysis.steps
    lo, hi = finding.at_ns
    assert steps["start_ns"].min() - 1e9 < lo < hi <= steps["end_ns"].max() + 1
    assert finding.cost_us and finding.cost_us > 0
    if hasattr(finding, "saving_us"):
        assert finding.saving_us is not None and 0 <= finding.saving_us <= finding.cost_us + 1e-6


# --- prefill-decode interference ---------------------------------------------------------------------------------


def test_interference_fires_where_prompt_chunks_slow_the_decoding_request():
    truth = _truth("interference_chunks")
    pure, mixed = _truth_token_waits(truth)
    assert len(mixed) >= 2 and np.median(mixed) >= 2 * np.median(pure)  # vLLM's own times say so
    finding = _findings("interference_chunks")["prefill-decode-interference"]
    ev = finding.evidence
    assert ev["decode_token_ms"] == pytest.approx(np.median(pure), rel=0.15)
    assert ev["mixed_token_ms"] == pytest.approx(np.median(mixed), rel=0.15)
    assert ev["mixed_steps"] == len(mixed)
    assert finding.severity == "warn"
    # a chunk half as big: the steps' own time per prompt position, against vLLM's steps (positions, durations)
    steps = [s for s in truth["steps"] if s["kind"] in ("mixed", "decode")]
    slope = np.polyfit([s["prefill_tokens"] for s in steps], [s["dur_us"] / 1e3 for s in steps], 1)[0]
    assert ev["ms_per_prompt_position"] == pytest.approx(slope, rel=0.35)
    assert ev["half_chunk_token_ms"] < ev["mixed_token_ms"]
    _in_run(_opened("interference_chunks"), finding)
    # it says what batching-cost said, priced for the requests: that one gives way
    assert "batching-cost" not in {f.id for f in _opened("interference_chunks").analysis.findings}


def test_interference_where_the_prompt_chunks_are_small_follows_vllms_own_times():
    """Short prompts (6 positions) joining a decoding request. On this shared 2-core machine vLLM's own times put a
    decode token's wait in those mixed steps at about 1.6x a decode-only one (made twice, 2026-12-04: 1.56x and
    1.65x), above the finding's 1.5x but below interference_chunks' 2x warning: the finding follows the truth."""
    from stepscope.analysis.serving_findings import COSTLY_RATIO

    truth = _truth("interference_small_chunks")
    pure, mixed = _truth_token_waits(truth)
    ratio = np.median(mixed) / np.median(pure) if mixed else 0.0
    assert ratio < 2  # vLLM's times: small chunks never cost what interference_chunks' do
    finding = _findings("interference_small_chunks").get("prefill-decode-interference")
    if ratio < COSTLY_RATIO:
        assert finding is None
        return
    assert finding is not None and finding.severity == "info"  # not the warning the big chunks earn
    assert finding.evidence["ratio"] == pytest.approx(ratio, rel=0.15)
    assert finding.evidence["mixed_steps"] == len(mixed)


def test_interference_does_not_fire_where_mixed_steps_carry_one_or_two_prompt_positions():
    """Prompts of 1-2 tokens joining a decoding request one at a time (interference_tiny_prompts): vLLM's own times
    put a decode token's wait in those mixed steps below 1.5x a decode-only one, so the finding stays silent."""
    from stepscope.analysis.serving_findings import COSTLY_RATIO

    truth = _truth("interference_tiny_prompts")
    pure, mixed = _truth_token_waits(truth)
    assert mixed and max(s["prefill_tokens"] for s in truth["steps"] if s["kind"] == "mixed") <= 2
    assert np.median(mixed) / np.median(pure) < COSTLY_RATIO  # vLLM's times: mixing cost next to nothing
    assert "prefill-decode-interference" not in _findings("interference_tiny_prompts")


# --- head-of-line blocking ---------------------------------------------------------------------------------------


def test_head_of_line_blocking_names_the_long_prompt_and_who_waited_behind_it():
    truth = _truth("hol_long_prompt")
    budget = truth["how"]["server"]["max_num_batched_tokens"]
    (blocker,) = [r for r in truth["requests"] if r["first_token_step"] - r["first_step"] + 1 >= 3]
    chunks = range(blocker["first_step"], blocker["first_token_step"] + 1)
    assert all(truth["steps"][i]["tokens"] == budget for i in chunks)  # each chunk took the whole budget
    waits = _truth_waits(truth, room_only=False)
    others = [r for r in truth["requests"] if r is not blocker]
    behind = {r["request"] for r in others if set(waits[r["request"]]) & set(chunks)}
    assert len(behind) == 2
    finding = _findings("hol_long_prompt")["head-of-line-blocking"]
    assert finding.evidence["blocked_requests"] == len(behind)
    assert finding.evidence["prefill_steps"] == len(chunks)
    opened = _opened("hol_long_prompt")
    rows = opened.analysis.requests.rows
    assert int(rows.loc[rows["request"] == finding.evidence["blocker"], "first_step"].iloc[0]) == blocker["first_step"]
    _in_run(opened, finding)


@pytest.mark.parametrize("name", ["never_fills", "saturated_shapes_stacks"])
def test_head_of_line_blocking_does_not_fire_without_a_long_prompt(name):
    truth = _truth(name)
    assert not any(r["first_token_step"] - r["first_step"] + 1 >= 3 for r in truth["requests"])
    assert "head-of-line-blocking" not in _findings(name)


# --- queueing while the batch had room ---------------------------------------------------------------------------


def test_queued_with_room_fires_where_requests_waited_for_kv_space():
    truth = _truth("queued_kv_full")
    waited = [r for r, steps in _truth_waits(truth, room_only=True).items() if len(steps) >= 2]
    assert len(waited) == 2  # the two short requests, while the two long ones held every KV block
    finding = _findings("queued_kv_full")["queued-with-room"]
    assert finding.evidence["requests"] == len(waited)
    rows = _opened("queued_kv_full").analysis.requests.rows
    firsts = sorted(truth["requests"][r]["first_step"] for r in waited)
    assert sorted(rows.loc[rows["queue_ms"] > 50, "first_step"].astype(int)) == firsts  # the same two requests
    _in_run(_opened("queued_kv_full"), finding)


def test_queued_with_room_does_not_fire_where_no_request_waited():
    truth = _truth("never_fills")
    assert not any(len(s) >= 2 for s in _truth_waits(truth, room_only=True).values())
    assert "queued-with-room" not in _findings("never_fills")


# --- a batch that never fills ------------------------------------------------------------------------------------


def test_batch_never_fills_where_no_request_waited_and_the_batch_stayed_below_its_limit():
    truth = _truth("never_fills")
    assert not any(len(s) >= 2 for s in _truth_waits(truth, room_only=False).values())
    assert max(s["sequence_count"] for s in truth["steps"]) < truth["how"]["server"]["max_num_seqs"]
    finding = _findings("never_fills")["batch-never-fills"]
    decoding = [s for s in truth["steps"] if s["decode_sequences"] > 0]
    assert finding.evidence["decode_sequences"] == np.median([s["decode_sequences"] for s in decoding])
    assert finding.evidence["fuller_step_ms"] > 0
    _in_run(_opened("never_fills"), finding)


@pytest.mark.parametrize("name", ["saturated_shapes_stacks", "queued_kv_full", "hol_long_prompt"])
def test_batch_never_fills_does_not_fire_where_requests_waited(name):
    truth = _truth(name)
    assert any(len(s) >= 2 for s in _truth_waits(truth, room_only=False).values())
    assert "batch-never-fills" not in _findings(name)


def test_without_arrivals_no_queueing_finding_is_guessed():
    """The worker's trace alone (no API server's): no arrival, so none of the three findings that read them."""
    found = _findings("no_front_end")
    assert not {"head-of-line-blocking", "queued-with-room", "batch-never-fills"} & set(found)
