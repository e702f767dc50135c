"""Each collective across ranks: arrivals, the waits they caused, the clock check (issue 45 item 3), and the Ranks
page that stacks the ranks in one window.

Inputs: SYNTHETIC collectives built here (their right answers follow from how they are built), the shipped
2-rank CPU capture (sample_traces/cpu_tiny-llama_tp2_eager, its run.json) and tests/data/real/hta_sampled_2rank
(facebookresearch/HolisticTraceAnalysis, MIT: two ranks of a 128-rank job with NCCL send/recv kernels).
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from stepscope.analysis.front_door import NO_CACHE, open_run
from stepscope.analysis.rank_collectives import collective_kind, iteration_windows, match_collectives
from stepscope.app.rank_runs import RANK_UPLOADS_KEY, RANKS_KEY
from tests.app_pages import page_test
from tests.conftest import ROOT, real_trace

TP2 = ROOT / "sample_traces" / "cpu_tiny-llama_tp2_eager"
MS = 1_000_000


def _colls(starts_ms, ends_ms, name="ncclDevKernel_AllReduce_Sum_bf16_RING_LL") -> pd.DataFrame:
    return pd.DataFrame(
        {
            "start_ns": [int(s * MS) for s in starts_ms],
            "end_ns": [int(e * MS) for e in ends_ms],
            "lane": 7,
            "name": name,
        }
    )


def test_synthetic_clock_offset_is_found_and_arrivals_compared_after_it():
    """SYNTHETIC: rank 1's clock reads 5 ms ahead; on the true clock rank 1 arrives 0.3 ms after rank 0 at each
    all-reduce and both end together 0.2 ms after rank 1 arrives."""
    true_starts = [10.0, 20.0, 30.0, 40.0]
    rank0 = _colls(true_starts, [s + 0.5 for s in true_starts])
    rank1 = _colls([s + 0.3 + 5 for s in true_starts], [s + 0.5 + 5 for s in true_starts])
    found = match_collectives((0, 1), [rank0, rank1], same_clock=False)
    assert found.clock_checked and found.matched_by == "order"
    assert found.offsets_ns[1] == pytest.approx(5 * MS)
    assert "shifted" in found.clock_note and "rank 1 by 5.00 ms" in found.clock_note
    per = found.per_collective
    assert (per["last_rank"] == 1).all() and per["skew_ns"].tolist() == pytest.approx([0.3 * MS] * 4)
    assert per["transfer_ns"].tolist() == pytest.approx([0.2 * MS] * 4)  # the last arriver's own time in it
    waits = found.rows.groupby("rank")["wait_ns"].sum()
    assert waits[0] == pytest.approx(4 * 0.3 * MS) and waits[1] == 0


def test_synthetic_ends_that_do_not_meet_leave_the_clock_unchecked():
    """SYNTHETIC: the same four all-reduces, but their ends scattered by milliseconds (a CPU backend's host ops)."""
    rank0 = _colls([10, 20, 30, 40], [10.5, 22.0, 30.5, 44.0])
    rank1 = _colls([10.2, 20.1, 30.3, 40.1], [13.0, 20.6, 35.0, 40.4])
    found = match_collectives((0, 1), [rank0, rank1], same_clock=True)
    assert not found.clock_checked and found.matched_by == "order" and len(found.per_collective) == 4
    assert found.clock_note.startswith("not checked") and "one clock assumed" in found.clock_note


def test_collective_kinds():
    assert collective_kind("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*)") == "all-reduce"
    assert collective_kind("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t") == "send/recv"
    assert collective_kind("c10d::allreduce_") == "all-reduce"
    assert collective_kind("ncclDevKernel_AllGather_RING_LL") == "all-gather"
    assert collective_kind("void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>") == "all-reduce"


def test_hta_two_of_128_ranks_pair_send_recv_by_their_ends():
    run = open_run(real_trace("hta_sampled_2rank"), cache=NO_CACHE).report["run"]
    c = run["collectives"]
    assert c["clock_checked"] and c["matched_by"] == "ends" and c["clock_note"].startswith("checked")
    assert c["matched"] == 5 and c["unmatched"] == 10  # 10 send/recv kernels each; half have their peer here
    (kind,) = c["by_kind"]
    assert kind["kind"] == "send/recv" and kind["count"] == 5 and kind["arrival_skew_us"]["p50"] > 0
    by_rank = {r["rank"]: r for r in c["by_rank"]}
    assert by_rank[1]["last_arrivals"] == 5 and by_rank[1]["caused_wait_us"] == pytest.approx(by_rank[0]["wait_us"])


def test_tp_sample_all_reduces_match_by_order_and_the_clock_is_stated_as_assumed():
    spec = json.loads((TP2 / "run.json").read_text())["spec"]
    opened = open_run(TP2, cache=NO_CACHE)
    c = opened.report["run"]["collectives"]
    assert spec["ranks"] == 2 and c["matched_by"] == "order" and c["unmatched"] == 0
    (kind,) = c["by_kind"]
    assert kind["kind"] == "all-reduce" and kind["count"] == c["matched"] > 0
    assert not c["clock_checked"] and "assumed" in c["clock_note"]
    waited = sum(r["wait_us"] for r in c["by_rank"])
    assert waited == pytest.approx(sum(r["caused_wait_us"] for r in c["by_rank"]))
    windows = iteration_windows(opened.result.rank_steps, opened.result.collectives)
    assert len(windows) == opened.report["run"]["aligned_steps"] and (windows["end_ns"] > windows["start_ns"]).all()


@pytest.fixture
def ranks_page(tmp_path, monkeypatch):
    from tests.app_samples import sample_folder

    sample_folder(tmp_path, monkeypatch, extra=(TP2,))
    return page_test("ranks", 240)


def _window(at) -> tuple[dict, tuple[float, float], float, float]:
    spec = next(json.loads(c.proto.spec) for c in at.get("plotly_chart") if "every rank" in c.proto.spec)
    slider = next(s for s in at.slider if s.key and s.key.startswith("ranks_window_"))
    return spec, slider.value, slider.min, slider.max


def test_ranks_page_stacks_the_tp_sample_in_one_window_on_one_iteration(ranks_page):
    at = ranks_page.run()
    assert not at.exception, [e.message for e in at.exception]
    spec, (lo, hi), low, high = _window(at)
    lanes = spec["layout"]["yaxis"]["ticktext"]
    assert "rank 0: waiting at collectives" in lanes or "rank 1: waiting at collectives" in lanes
    assert any(t.startswith("rank 0:") for t in lanes) and any(t.startswith("rank 1:") for t in lanes)
    assert low < lo < hi < high and 0.1 < (hi - lo) / (high - low) < 0.9  # one iteration, thumbs apart
    assert "Arrivals at collectives" in [h.value for h in at.subheader]
    shown = [m.value for m in at.metric] + [c.value for c in at.caption] + [m.value for m in at.markdown]
    assert not [t for t in shown if "n/a" in t]
    assert any("Clock" in c and "assumed" in c for c in (x.value.replace("\\", "") for x in at.caption))


def test_ranks_page_on_the_hta_pair_checks_the_clock_and_opens_between_collectives(ranks_page):
    at = ranks_page
    folder = real_trace("hta_sampled_2rank")
    at.session_state[RANK_UPLOADS_KEY] = tuple((p.name, p.read_bytes()) for p in sorted(folder.glob("*.json.gz")))
    at.session_state[RANKS_KEY] = "ranks:upload"
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    captions = " ".join(c.value.replace("\\", "") for c in at.caption)
    assert "Clock: checked: the ends of 5 collectives" in captions
    assert "one host, one clock: step ends and collective arrivals compared directly" not in captions
    spec, (lo, hi), low, high = _window(at)
    assert spec["layout"]["title"]["text"].startswith("collective ") and low <= lo < hi <= high
    assert {m.label: m.value for m in at.metric}["Slowest rank"] == "—"
    table = next(d.value for d in at.dataframe if "last to arrive" in d.value.columns and "kind" in d.value.columns)
    assert set(table["kind"]) == {"send/recv"}


def test_cli_text_says_the_clock_check_not_the_hosts_claim(tmp_path):
    from stepscope.exporters.text_report import render_ranks_text

    report = open_run(real_trace("hta_sampled_2rank"), cache=NO_CACHE).report
    text = render_ranks_text(report)
    assert "clock    checked: the ends of 5 collectives" in text and "send/recv" in text
    assert "one host, one clock" not in text


def test_synthetic_ranks_on_two_hosts_get_their_clock_offset_and_the_late_rank(tmp_path):
    """SYNTHETIC (tests/test_ranks.py's builder): rank 1 on another host with its clock 5 s ahead; rank 2 starts
    each step's work last (its OFFSET), so it arrives last at every all-reduce."""
    from stepscope.analysis.ranks import analyze_ranks
    from stepscope.analysis.ranks_report import run_summary
    from tests.test_ranks import load_ranks as load
    from tests.test_ranks import write_run

    ranked = load(write_run(tmp_path / "run", host=("a", "b", "a"), clock_shift_us=(0.0, 5e6, 0.0)))
    assert not ranked.same_clock
    c = run_summary(analyze_ranks(ranked))["collectives"]
    assert c["clock_checked"] and c["clock_offset_us"]["1"] == pytest.approx(5e6)
    assert "rank 1 by 5.00 s" in c["clock_note"]
    by_rank = {r["rank"]: r for r in c["by_rank"]}
    assert by_rank[2]["last_arrivals"] == c["matched"] and by_rank[2]["wait_us"] == 0
