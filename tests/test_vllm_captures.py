"""Served runs against the truth of real vLLM 0.32 captures (tests/data/captures/vllm, README there): a vLLM OpenAI
server on this machine's CPU, profiled while bursts of requests ran; the truth is what vLLM's scheduler gave each
step and what the API answered, never Stepscope's. Each capture is read as `analyze DIR` reads its folder, and as
the traces other setups produce (tests/captures/vllm.py `make_twins`: vLLM's step annotations removed; annotations
and python frames removed), with and without the API server's file.

The rules (issue 38): every forward found; with annotations every step's kind and composition exact; without them
no step of a wrong phase (its kind is the truth's or "unknown") and sequences exact where shapes were recorded;
`requests` right or null; with the API server's stacks the request count exact and one request_list entry per
request, whose times lie between what the client and vLLM recorded.
"""

from __future__ import annotations

import gzip
import json
import shutil
from functools import cache
from pathlib import Path

import pytest

from stepscope.analysis.front_door import NO_CACHE, open_folder
from stepscope.parsers.errors import TraceError
from tests.captures.vllm import make_twins
from tests.captures.vllm_truth import align, score

DATA = Path(__file__).parent / "data" / "captures" / "vllm"
CAPTURES = sorted(p.name for p in DATA.iterdir() if p.is_dir())
VARIANTS = ("as is", "no annotations", "no python")


def _truth(capture: str) -> dict:
    return json.loads((DATA / f"{capture}.truth.json").read_text())


def _front_files(capture: str) -> list[Path]:
    return [p for p in (DATA / capture).iterdir() if ".async_llm." in p.name]


@cache
def _report(capture: str, variant: str, front_end: bool, tmp_root: str) -> dict:
    """The analyze DIR object of a capture's folder (or of a twin of its worker's trace), with or without the API
    server's file."""
    folder = Path(tmp_root) / f"{capture}-{variant.replace(' ', '_')}-{int(front_end)}"
    folder.mkdir(parents=True, exist_ok=True)
    worker = next(p for p in (DATA / capture).iterdir() if ".async_llm." not in p.name)
    if variant == "as is":
        shutil.copy(worker, folder / worker.name)
    else:
        doc = make_twins(json.loads(gzip.decompress(worker.read_bytes())), python=variant == "no python")
        (folder / worker.name.removesuffix(".gz")).write_text(json.dumps(doc))
    for path in _front_files(capture) if front_end else []:
        shutil.copy(path, folder / path.name)
    return open_folder(folder, cache=NO_CACHE).report


@pytest.fixture(scope="module")
def tmp_root(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("vllm-captures"))


@pytest.mark.parametrize("capture", CAPTURES)
@pytest.mark.parametrize("variant", VARIANTS)
def test_every_forward_found_and_no_step_of_a_wrong_phase(capture, variant, tmp_root):
    truth = _truth(capture)
    report = _report(capture, variant, bool(_front_files(capture)), tmp_root)
    s = score(report, truth)
    assert not s["missed"] and not s["split"] and not s["unexplained"], s
    assert not s["wrong"], s["wrong"]
    assert not s["sequences_wrong"], s["sequences_wrong"]
    assert s["requests"] in (None, s["requests_truth"])
    if truth["how"]["server"]["record_shapes"]:
        assert s["sequences_stated"] == s["forwards"]  # the attention's per-sequence metadata states every batch


@pytest.mark.parametrize("capture", CAPTURES)
def test_with_annotations_every_kind_and_composition_is_exact(capture, tmp_root):
    truth = _truth(capture)
    for front_end in {False, bool(_front_files(capture))}:
        s = score(_report(capture, "as is", front_end, tmp_root), truth)
        assert s["known"] == s["forwards"] and not s["wrong"] and not s["composition_wrong"], s


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_preempted_request_recomputing_is_a_prefill(variant, tmp_root):
    """preempt_small: vLLM preempted a request for KV space and recomputed it (its truth says so); each step the
    recomputation ran in is prefill work in every variant (its kind the truth's or unknown, never decode), and the
    request count right or null."""
    truth = _truth("preempt_small")
    preempted_at = [t["index"] for t in truth["steps"] if t["preempted_before"]]
    assert preempted_at, "the capture holds no preemption"
    recompute = [
        t
        for t in truth["steps"]
        if t["index"] > preempted_at[0] and any(q["resumed"] and q["phase"] == "prefill" for q in t["sequences"])
    ]
    assert recompute and all(t["kind"] in ("prefill", "mixed") for t in recompute)  # vLLM's own record
    report = _report("preempt_small", variant, True, tmp_root)
    kinds = {t["index"]: s["kind"] for s, t in zip(report["steps"], align(report["steps"], truth), strict=True) if t}
    for t in recompute:
        assert kinds[t["index"]] in (t["kind"], "unknown"), (t["index"], kinds[t["index"]])
        if variant == "as is":
            assert kinds[t["index"]] == t["kind"]
    assert report["requests"] in (None, truth["requests_in_trace"])
    if variant == "as is" and report["requests"] is None:  # the annotation says a request rejoined: the reason
        assert any("preempted request recomputes" in w for w in report["segmentation"]["warnings"])


def test_an_empty_engine_call_is_an_empty_step_and_annotated_steps_tile(tmp_root):
    report = _report("saturated_shapes_stacks", "as is", True, tmp_root)
    matched = align(report["steps"], _truth("saturated_shapes_stacks"))
    assert [s["kind"] for s, t in zip(report["steps"], matched, strict=True) if t["kind"] == "empty"] == ["empty"]
    assert report["summary"]["unknown_steps"] == 0 and report["summary"]["step_kind"] == "decode"


@pytest.mark.parametrize("variant", ("as is", "no annotations"))
def test_the_front_end_with_stacks_counts_every_request(variant, tmp_root):
    """The API server's trace (stacks on) gives the exact count and one entry per request, first come first served:
    each arrival lies between the client's send and vLLM's own arrival time, and the queue and TTFT it gives lie
    between the figures measured from those two."""
    for capture in ("saturated_shapes_stacks", "long_defaults_detailed"):
        truth = _truth(capture)
        report = _report(capture, variant, True, tmp_root)
        assert report["front_end"]["files"] == [p.name for p in _front_files(capture)]
        assert report["requests"] == truth["requests_in_trace"] == len(report["request_list"])
        index = {t["index"]: i for i, t in enumerate(align(report["steps"], truth)) if t is not None}
        for got, want in zip(report["request_list"], truth["requests"], strict=True):
            assert want["client_sent_us"] - 1 <= got["arrival_us"] <= want["arrival_us"] + 1000
            assert got["first_step"] == index[want["first_step"]]
            assert got["prompt_tokens"] in (None, want["prompt_tokens"])
            assert got["output_tokens"] in (None, want["output_tokens"])
            if got["ttft_ms"] is not None:
                assert got["ttft_from"] == "arrival"
                assert want["ttft_us"] / 1000 - 5 <= got["ttft_ms"]
                assert got["ttft_ms"] <= (want["ttft_us"] + want["arrival_us"] - want["client_sent_us"]) / 1000 + 5


def test_detailed_annotations_state_a_prompt_length_where_one_prompt_completes_alone(tmp_root):
    """vLLM's detailed annotation sums each phase's sequence lengths (sk): a step whose only prefilling sequence
    ends its prompt states that prompt's length (cached positions included); several together state only a sum."""
    report = _report("long_defaults_detailed", "as is", True, tmp_root)
    prompts = [r["prompt_tokens"] for r in report["request_list"]]
    truth = [r["prompt_tokens"] for r in _truth("long_defaults_detailed")["requests"]]
    assert prompts[0] == truth[0] == 300
    assert all(got in (None, want) for got, want in zip(prompts, truth, strict=True))


def test_without_shapes_or_annotations_or_a_front_end_nothing_is_guessed(tmp_root):
    """A bare trace (no annotations, no python frames, no shapes): the forwards are found, no kind is a guess and
    the request count is null with its reason. The host waited long before the first forward (an idle engine, then
    requests sent): that forward's sequences all join in it, so it prefills; after it only the host work's two groups
    (a change or not) and the products' sizes say anything (analysis.serving.phases), and how many joined stays
    unknown."""
    report = _report("long_defaults_detailed", "no python", False, tmp_root)
    s = score(report, _truth("long_defaults_detailed"))
    assert not s["wrong"] and report["requests"] is None
    assert report["steps"][0]["kind"] == "prefill" and report["steps"][0]["decode_sequences"] == 0
    assert any(w.startswith("requests unknown") for w in report["segmentation"]["warnings"])
    assert report["summary"]["step_kind"] != "unknown"


def test_without_shapes_or_annotations_the_worker_frames_decide_most_kinds(tmp_root):
    """Shapes off, annotations removed, python frames kept (vLLM's default profile less its annotations): the
    worker's frames count joins and finishes, the host's wait before its first step says the engine was idle when
    the profile began, and the matrix products' sizes say which steps carry a prompt chunk; together they decide at
    least 75% of the forwards (issue 38), none of a wrong phase, and the request count."""
    truth = _truth("long_defaults_detailed")
    s = score(_report("long_defaults_detailed", "no annotations", False, tmp_root), truth)
    assert not s["wrong"] and not s["missed"] and s["known"] >= 0.75 * s["forwards"], s
    assert s["requests"] == truth["requests_in_trace"]


@pytest.mark.parametrize("variant", ("no annotations", "no python"))
@pytest.mark.parametrize(("capture", "at"), (("long_defaults_detailed", 6), ("hol_long_prompt", 5), ("never_fills", 3)))
def test_a_profile_opened_while_requests_run_is_not_read_as_idle(capture, at, variant, tmp_path):
    """The worker's trace cut 1.5 ms before engine step `at` (a profile opened while the batch runs: the host does
    not wait before its first step): no step of a wrong phase, and the request count, where given, counts the
    requests with a step after the cut."""
    truth = _truth(capture)
    worker = next(p for p in (DATA / capture).iterdir() if ".async_llm." not in p.name)
    doc = make_twins(json.loads(gzip.decompress(worker.read_bytes())), python=variant == "no python")
    cut = truth["steps"][at]["ts_us"] - 1500
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("ph") != "X" or e["ts"] >= cut]
    (tmp_path / worker.name.removesuffix(".gz")).write_text(json.dumps(doc))
    report = open_folder(tmp_path, cache=NO_CACHE).report
    s = score(report, truth)
    assert not s["wrong"] and s["missed"] == list(range(at)), s
    running = {r["request"] for t in truth["steps"][at:] for r in t["sequences"]}
    assert report["requests"] in (None, len(running))


def test_a_folder_with_two_captures_is_refused_in_one_line(tmp_path):
    for capture in ("no_front_end", "overlap_shapes_nostack"):
        for path in (DATA / capture).iterdir():
            shutil.copy(path, tmp_path / path.name)
    with pytest.raises(TraceError, match="more than one capture") as caught:
        open_folder(tmp_path, cache=NO_CACHE)
    assert "\n" not in str(caught.value)


def test_a_worker_alone_is_one_trace_without_a_front_end(tmp_path):
    worker = next((DATA / "no_front_end").iterdir())
    shutil.copy(worker, tmp_path / worker.name)
    opened = open_folder(tmp_path, cache=NO_CACHE)
    assert "ranks" not in opened.report and opened.report["front_end"] is None
