"""Served runs whose steps state no batch (no annotations, shapes or python frames): the size classes, the phase
follow, the host-work change signal and the count ledger's bound on the decoders running when the trace began, on
small synthetic inputs and on the real vLLM captures' twins."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from stepscope.analysis.front_door import NO_CACHE, open_folder
from stepscope.analysis.serving import _unchecked_changes
from stepscope.analysis.serving.ledger import UNKNOWN as U
from stepscope.analysis.serving.ledger import resolve
from stepscope.analysis.serving.observations import empty_observations, short_of_largest, size_classes
from stepscope.analysis.serving.phases import follow_phases
from tests.captures.vllm import make_twins
from tests.captures.vllm_truth import score

DATA = Path(__file__).parent / "data" / "captures" / "vllm"


def test_size_classes_split_when_every_product_is_longer():
    # synthetic: medians and lower quartiles both a clear gap apart: chunks against decodes
    sizes = np.array([[100.0, 80.0], [30.0, 25.0], [32.0, 26.0], [110.0, 90.0], [31.0, 24.0]])
    assert size_classes(sizes).tolist() == [1, -1, -1, 1, -1]


def test_size_classes_no_claim_when_only_some_products_are_longer():
    # synthetic: as tests/data/captures/vllm/hol_long_prompt on a CPU, a new shape's first products lift two steps'
    # medians tenfold while their lower quartiles stay among the others': no step is called small or big
    sizes = np.array([[960.0, 50.0], [66.0, 46.0], [61.0, 45.0], [69.0, 53.0], [665.0, 49.0], [64.0, 56.0]])
    assert size_classes(sizes).tolist() == [0] * 6


def test_a_step_clearly_smaller_than_another_is_short_of_the_budget():
    # synthetic, the shape of tests/data/captures/vllm/interference_chunks (ns): a 16-position first chunk, decodes,
    # then 256-position steps; the first chunk's median is far under the big steps' lower quartiles
    sizes = np.array([[683e3, 335e3], [133e3, 73e3], [3.6e6, 3.2e6], [3.3e6, 1.7e6], [np.nan, np.nan]])
    assert short_of_largest(sizes).tolist() == [True, True, False, False, False]


def test_a_one_time_cost_makes_no_step_look_short():
    # synthetic, the shape of tests/data/captures/vllm/no_front_end: new shapes lift two steps' medians, not their
    # lower quartiles; 50, 64 and 33 positions are not told apart, so no step is called short
    sizes = np.array([[150e3, 87e3], [36e3, 27e3], [583e3, 116e3], [749e3, 125e3]])
    assert short_of_largest(sizes).tolist() == [False, True, False, False]
    assert not short_of_largest(np.full((3, 2), np.nan)).any()


def _obs(changed: list[int], size: list[int], idle: bool = True, short: list[bool] | None = None) -> pd.DataFrame:
    """Synthetic observations of an opaque run: only `changed`, `size` (and `short`) known, the rest UNKNOWN."""
    frame = empty_observations(len(changed))
    frame["changed"], frame["size"] = changed, size
    if short is not None:
        frame["short"] = short
    frame.attrs["idle_before"] = idle
    return frame


def test_a_step_after_a_small_step_with_no_change_decodes():
    # idle engine: step 0's requests all join (a prefill, big); step 1, no change, too small to be budget-full: every
    # prompt in it completes, whatever it held; step 2, no change: only decoders are left
    phases = follow_phases(_obs([U, 0, 0], [1, -1, 0]))
    assert phases.followed
    assert phases.kinds.tolist() == ["prefill", "unknown", "decode"]


def test_a_first_chunk_short_of_the_budget_completes_so_the_next_step_decodes():
    # a big first step might have been cut by the budget (its prompt carried on); one clearly smaller than a later
    # step was not: its prompt completed, and with no change the next small step only decodes
    assert follow_phases(_obs([U, 0, 1], [1, -1, 1])).kinds.tolist() == ["prefill", "unknown", "unknown"]
    phases = follow_phases(_obs([U, 0, 1], [1, -1, 1], short=[True, True, False]))
    assert phases.kinds.tolist() == ["prefill", "decode", "unknown"]


def test_a_step_after_a_decode_with_no_change_decodes_and_a_change_unknown():
    phases = follow_phases(_obs([U, 0, 0, 0, 1, 0], [1, -1, 0, 0, 0, 0]))
    # a change after decoders: some may have finished, prompts may have joined (which the budget may cut)
    assert phases.kinds.tolist() == ["prefill", "unknown", "decode", "decode", "unknown", "unknown"]


def test_without_an_idle_start_or_a_small_step_nothing_is_claimed():
    # no change from step to step, but nothing says whether a cut prompt is carried: any of prefill, decode, mixed
    phases = follow_phases(_obs([U, 0, 0], [0, 0, 0], idle=False))
    assert phases.followed and phases.kinds.tolist() == ["unknown"] * 3


def test_a_change_after_an_empty_step_is_forced_to_prefill():
    # nothing runs after an empty step: a change there can only be requests joining, and nobody decodes yet
    phases = follow_phases(_obs([U, U, 1], [0, 0, 0], idle=False), empty=np.array([False, True, False]))
    assert phases.kinds.tolist() == ["unknown", "empty", "prefill"]


def test_a_big_step_after_a_small_one_with_no_change_contradicts_every_reading():
    # step 0 small: its prompts all complete; step 1 no change, so nobody joins, yet it carries a prompt chunk
    phases = follow_phases(_obs([U, 0, 0], [-1, 1, 0]))
    assert not phases.followed and "step 1" in phases.reason
    assert phases.kinds.tolist() == ["unknown"] * 3


def test_known_kinds_bind_every_reading():
    # step 1 known to be a prefill (other evidence): step 0's prompt was cut, so step 0 did not use less than the budget
    assert follow_phases(_obs([U, 0], [1, 0]), known=np.array(["unknown", "prefill"], dtype=object)).followed
    assert not follow_phases(_obs([U, 0], [-1, 0]), known=np.array(["unknown", "prefill"], dtype=object)).followed


def test_unchecked_changes_that_no_reading_allows_are_dropped():
    obs = _obs([U, 0, 0], [-1, 1, 0])
    obs.attrs["changes_unchecked"] = True
    warnings = _unchecked_changes(obs, np.zeros(3, dtype=bool))
    assert len(warnings) == 1 and "not used" in warnings[0]
    assert (obs["changed"] == U).all() and not obs.attrs["changes_unchecked"]
    kept = _obs([U, 0, 0], [1, -1, 0])
    kept.attrs["changes_unchecked"] = True
    assert _unchecked_changes(kept, np.zeros(3, dtype=bool)) == [] and kept["changed"].tolist() == [U, 0, 0]


def test_bare_twins_of_every_capture_have_no_wrong_phase_and_most_kinds_known(tmp_path):
    """Every real capture's worker trace with annotations, python frames and record_shapes' inputs removed (vLLM's
    default profile without its annotations or stacks): every forward found, none of a wrong phase, and at least
    70% of them of known kind over all captures (71.5%, 203 of 284, when this was written: the host work's two
    groups say where the batch changed, the products' sizes where a prompt chunk ran or none was cut)."""
    known = forwards = 0
    for capture in sorted(p for p in DATA.iterdir() if p.is_dir()):
        worker = next(p for p in capture.iterdir() if ".async_llm." not in p.name)
        doc = make_twins(json.loads(gzip.decompress(worker.read_bytes())), python=True, shapes=False)
        assert not any("Input Dims" in (e.get("args") or {}) for e in doc["traceEvents"])
        folder = tmp_path / capture.name
        folder.mkdir()
        (folder / worker.name.removesuffix(".gz")).write_text(json.dumps(doc))
        report = open_folder(folder, cache=NO_CACHE).report
        s = score(report, json.loads((DATA / f"{capture.name}.truth.json").read_text()))
        assert not s["wrong"] and not s["missed"] and not s["split"], (capture.name, s)
        assert report["requests"] is None, capture.name  # booleans count no requests
        known, forwards = known + s["known"], forwards + s["forwards"]
    assert known >= 0.70 * forwards, (known, forwards)


def test_the_ledger_does_not_bound_running_decoders_by_the_largest_finish_count():
    # synthetic: a profile opened while the batch runs, only the worker's frames stated (joins and finishes): one
    # finish before steps 1 and 2 each, none after. Bounded by the largest count stated (1), every reading ran out of
    # decoders by step 2 and called steps 2 and 3 empty; four sequences may have been running (a real capture,
    # saturated_shapes_stacks cut mid-run with shapes stripped)
    obs = empty_observations(4)
    obs["J"], obs["F"], obs["size"] = [0, 0, 0, 0], [0, 1, 1, 0], [-1, -1, -1, -1]
    resolved = resolve(obs, None)
    assert resolved.followed
    assert resolved.counts["kind"].tolist()[2:] == ["unknown", "unknown"]


def test_the_ledger_does_not_follow_when_nothing_bounds_running_decoders():
    obs = empty_observations(3)
    obs["J"], obs["F"] = [0, 0, U], [0, 1, U]
    resolved = resolve(obs, None)
    assert not resolved.followed and "when the trace began" in resolved.reason


@pytest.mark.parametrize(
    ("capture", "at", "python"),
    (("saturated_shapes_stacks", 5, False), ("long_defaults_detailed", 6, True), ("queued_kv_full", 3, True)),
)
def test_a_bare_profile_opened_while_requests_run_has_no_wrong_phase(capture, at, python, tmp_path):
    """A shapes-stripped twin cut 1.5 ms before engine step `at` (the profile opened while the batch runs, so no idle
    start): no step of a wrong phase. saturated_shapes_stacks with its frames kept had two decode steps called empty
    before the ledger bounded the decoders running at the start by the finishes stated."""
    truth = json.loads((DATA / f"{capture}.truth.json").read_text())
    worker = next(p for p in (DATA / capture).iterdir() if ".async_llm." not in p.name)
    doc = make_twins(json.loads(gzip.decompress(worker.read_bytes())), python=python, shapes=False)
    cut = truth["steps"][at]["ts_us"] - 1500
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("ph") != "X" or e["ts"] >= cut]
    (tmp_path / worker.name.removesuffix(".gz")).write_text(json.dumps(doc))
    s = score(open_folder(tmp_path, cache=NO_CACHE).report, truth)
    assert not s["wrong"] and s["missed"] == list(range(at)), s
