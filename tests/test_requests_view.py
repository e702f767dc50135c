"""The requests view on Analyze (issue 41): lanes on the steps' clock, packed or paged; the table; the chosen request
outlined on the timeline; a step's requests; serving cards that say "unknown" and why. On real vLLM captures
(tests/data/captures/vllm) and, for many requests, a SYNTHETIC run made by bench/request_lanes_bench.py's code."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import streamlit as st

from bench.request_lanes_bench import synthetic_served_run
from stepscope.analysis.front_door import NO_CACHE, open_folder
from stepscope.analysis.request_figures import step_requests
from stepscope.app import requests_panel
from stepscope.app.navigation import ANALYZE_KEY
from stepscope.exporters.figures import request_lanes
from stepscope.exporters.figures.timeline import overview_figure
from stepscope.exporters.request_tables import requests_table
from tests.app_pages import page_test

CAPTURES = Path(__file__).resolve().parent / "data" / "captures" / "vllm"
SATURATED = CAPTURES / "saturated_shapes_stacks"
NO_FRONT_END = CAPTURES / "no_front_end"


@pytest.fixture(scope="module")
def saturated():
    return open_folder(SATURATED, cache=NO_CACHE)


def test_each_request_is_drawn_where_its_table_row_says(saturated):
    analysis = saturated.analysis
    rows = analysis.requests.rows
    segments = request_lanes.request_segments(analysis, rows).frame
    origin = analysis.time_origin_ns
    start = (analysis.steps["start_ns"].to_numpy() - origin) / 1e6
    for row in rows.itertuples(index=False):
        mine = segments[segments["request"] == row.request]
        queued = mine[mine["state"] == "queued"]
        assert len(queued) == 1  # every request of this capture waited: seven against four slots
        assert queued["start_ms"].iloc[0] == pytest.approx((row.arrival_ns - origin) / 1e6)
        assert queued["end_ms"].iloc[0] == pytest.approx(start[row.first_step])
        chunks = mine[mine["state"] == "prefill"]
        expected = [s for s in row.steps if s <= row.first_token_step]
        assert list(chunks["start_ms"]) == pytest.approx(list(start[expected]))
        assert (mine["state"].isin(["decode", "open"])).sum() <= 1


def test_packed_lanes_never_overlap_and_use_as_few_lanes_as_the_run_needs():
    analysis, table = synthetic_served_run(300)
    segments = request_lanes.request_segments(analysis, table)
    lane = request_lanes.packed_rows(segments)
    span = segments.frame.groupby("request").agg(lo=("start_ms", "min"), hi=("end_ms", "max"))
    span["lane"] = span.index.map(lane)
    for _, group in span.groupby("lane"):
        group = group.sort_values("lo")
        assert (group["lo"].to_numpy()[1:] > group["hi"].to_numpy()[:-1]).all()
    # at most as many lanes as requests in flight (arrived, not yet done) at any moment, plus one
    times = np.sort(np.concatenate([span["lo"], span["hi"]]))
    busiest = max(((span["lo"] <= t) & (span["hi"] >= t)).sum() for t in times)
    assert max(lane.values()) + 1 <= busiest + 1
    figure = request_lanes.request_lanes_figure(analysis, table, packed=True)
    assert figure.layout.height <= 150 + request_lanes.MAX_HEIGHT_PX  # hundreds of requests stay one screen


def test_a_page_draws_its_requests_one_a_lane():
    analysis, table = synthetic_served_run(120)
    page = table.iloc[40:80]
    figure = request_lanes.request_lanes_figure(analysis, page)
    assert list(figure.layout.yaxis.ticktext) == ["steps", *(f"request {r}" for r in range(40, 80))]


def test_unknown_steps_are_drawn_as_such_with_what_would_tell_them(saturated):
    analysis = saturated.analysis
    steps = analysis.steps.assign(kind=np.where(np.arange(len(analysis.steps)) == 2, "unknown", analysis.steps["kind"]))
    fake = type("A", (), {"steps": steps, "time_origin_ns": analysis.time_origin_ns})()
    figure = request_lanes.request_lanes_figure(fake, analysis.requests.rows)
    names = [t.name for t in figure.data if t.showlegend is not False]
    assert request_lanes.UNKNOWN_LEGEND in names
    assert "record_shapes=True" in request_lanes.UNKNOWN_LEGEND and "API server's trace" in request_lanes.UNKNOWN_LEGEND


def test_the_chosen_request_is_outlined_on_the_timeline(saturated):
    analysis = saturated.analysis
    rows = analysis.requests.rows
    tag = saturated.answer_id[-12:]
    state = {requests_panel.TABLE_KEY.format(tag): {"selection": {"rows": [4], "columns": []}}}
    assert requests_panel.chosen_request(state, saturated) == int(rows["request"].iloc[4])
    overview, _ = overview_figure(analysis)
    before = len(overview.data)
    marked = requests_panel.mark_chosen(overview, state, saturated)
    (outline,) = marked.data[before:]
    steps = list(rows["steps"].iloc[4])
    origin = analysis.time_origin_ns
    xs = np.asarray(outline.x, dtype=float)
    starts = (analysis.steps["start_ns"].to_numpy()[steps] - origin) / 1e6
    assert np.allclose(xs[0::6], starts)  # one outline per step the request ran in, on the phase lane
    unmarked = overview_figure(analysis)[0]
    assert len(requests_panel.mark_chosen(unmarked, {}, saturated).data) == before  # nothing chosen: no outline


def test_a_step_lists_the_requests_it_served(saturated):
    rows = saturated.analysis.requests.rows
    for step in range(len(saturated.analysis.steps)):
        served = step_requests(rows, step)
        assert served == sorted(int(r) for r, s in zip(rows["request"], rows["steps"], strict=True) if step in s)
    assert step_requests(rows, 4) == [0, 1, 2, 3]  # vLLM's scheduler: requests 0-3 decode in step 4 (truth)


def test_the_table_says_where_each_ttft_is_measured_from(saturated):
    table = requests_table(saturated.analysis)
    assert set(table["ttft_from"]) == {"arrival (API server)"}
    assert table["queue_ms"].notna().all() and (table["queue_ms"] > 0).all()


def _open_run(at, rel: str):
    pick = at.selectbox(key="logdir_pick")
    (value,) = [o for o in pick.options if o.startswith(rel)]
    pick.set_value(value).run()
    at.button(key="logdir_open").click().run()
    assert not at.exception, at.exception
    return at


@pytest.fixture()
def logs(tmp_path, monkeypatch):
    root = tmp_path / "logs"
    shutil.copytree(SATURATED, root / "saturated")
    shutil.copytree(NO_FRONT_END, root / "alone")
    monkeypatch.setenv("STEPSCOPE_LOGDIR", str(root))
    monkeypatch.setenv("STEPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    st.cache_resource.clear()
    return root


def test_analyze_shows_a_served_runs_cards_and_requests_view(logs):
    at = _open_run(page_test("analyze", 300).run(), "saturated/")
    assert at.session_state[ANALYZE_KEY] == "logdir:saturated/"
    cards = {m.label: m.value for m in at.metric}
    assert cards["Requests"] == "7" and "TTFT p90" in cards and "Tokens/s (run)" in cards
    assert any(h.value == "Requests (7)" for h in at.subheader)
    assert any(
        (d.value.shape[0] == 7 and "TTFT from" in [str(c) for c in d.value.columns]) or "ttft_from" in d.value
        for d in at.dataframe
    )
    (step,) = [n for n in at.number_input if n.label == "Step"]
    step.set_value(4).run()
    assert any("Requests in it: 0, 1, 2, 3" in m.value for m in at.markdown)


def test_a_capture_without_its_front_end_says_the_request_count_is_unknown_and_why(logs):
    at = page_test("analyze", 300).run()
    pick = at.selectbox(key="logdir_pick")
    (value,) = [o for o in pick.options if o.startswith("alone/")]
    pick.set_value(value).run()
    at.button(key="logdir_open").click().run()
    assert not at.exception
    cards = {m.label: m.value for m in at.metric}
    assert cards["Requests"] == "unknown"
    (why,) = [c.value for c in at.caption if c.value.startswith(":material/help: Requests unknown")]
    assert "API server's trace" in why  # what to record next time
