"""Ranks: the ranks of one tensor-parallel run side by side (which rank is slow, who waits at which collective).

Opens on the shipped 2-rank CPU capture; any folder of rank traces among the samples or past runs, or several
files uploaded together, can be picked. Numbers come from analysis/ranks.py; this page only arranges them.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from stepscope.analysis.metrics import format_value
from stepscope.analysis.rank_collectives import collectives_in, iteration_windows
from stepscope.exporters.figures import rank_charts
from stepscope.exporters.safe_text import for_markdown, plain
from stepscope.parsers import TraceError
from .. import components, tables
from ..analysis_settings import settings_expander
from ..rank_runs import (
    RANK_UPLOADS_KEY,
    RANKS_KEY,
    LoadedRanks,
    RankSource,
    default_rank_source,
    load_rank_source,
    rank_sources,
)
from ..uploads import ACCEPTED_TYPES, size_limit_text


def _pick_source() -> RankSource | None:
    with st.expander("Upload the traces of one run (one file per rank)", expanded=False):
        st.caption(size_limit_text())
        files = st.file_uploader(
            "Drop every rank's trace here", type=ACCEPTED_TYPES, accept_multiple_files=True, key="ranks_upload"
        )
        if files and len(files) > 1:
            items = tuple((f.name, f.getvalue()) for f in files)
            if st.session_state.get(RANK_UPLOADS_KEY) != items:
                st.session_state[RANK_UPLOADS_KEY] = items
                st.session_state[RANKS_KEY] = "ranks:upload"
        elif files:
            st.info("One file is one rank: drop two or more, or open a single trace on the Analyze page.")
    sources = rank_sources(st.session_state)
    if not sources:
        st.info(
            "No multi-rank runs yet: upload every rank's trace above, or put a folder of rank traces in the "
            "runs folder."
        )
        return None
    by_key = {s.key: s for s in sources}
    chosen = st.session_state.get(RANKS_KEY)
    if chosen not in by_key:
        chosen = default_rank_source(sources).key
    keys = list(by_key)
    picked = st.selectbox(
        "Run",
        keys,
        index=keys.index(chosen),
        format_func=lambda k: plain(by_key[k].label),
        help="A folder holding one trace per rank; the rank comes from distributedInfo, else "
        "the file name (rank-N, TP-N-...), else file order.",
    )
    st.session_state[RANKS_KEY] = picked
    return by_key[picked]


def _header(loaded: LoadedRanks) -> None:
    run = loaded.run
    files = ", ".join(f"rank {f.rank}: {f.path.name} ({f.rank_source})" for f in loaded.ranked.files)
    st.caption(for_markdown(files))
    step = run.get("step_time_ms") or {}
    skew = run.get("skew_us") or {}
    cards = [
        ("Ranks", str(run["ranks"])),
        ("Aligned steps", str(run["aligned_steps"])),
        ("Step time p50 (slowest rank)", format_value(step.get("p50"), "ms")),
        ("Skew p50", format_value(skew.get("p50"), "us")),
        ("Communication", format_value(run.get("comm_pct"), "%")),
        ("Exposed communication", format_value(run.get("exposed_comm_pct"), "%")),
        ("Slowest rank", "—" if run.get("slowest_rank") is None else str(run["slowest_rank"])),
    ]
    for start in range(0, len(cards), 4):
        for column, (label, value) in zip(st.columns(4), cards[start : start + 4], strict=False):
            column.metric(label, value, border=True)
    aligned = (
        f"Steps aligned by {run.get('alignment')}; skew from {run.get('skew_basis')}. " if run["aligned_steps"] else ""
    )
    st.caption(for_markdown(aligned + _clock(run)))
    for warning in run.get("warnings", []):
        st.warning(for_markdown(warning), icon=":material/warning:")


def _clock(run: dict) -> str:
    """Whether the ranks' clocks agree, as the collectives' ends checked it (or why it could not be)."""
    collectives = run.get("collectives") or {}
    checked = collectives.get("clock_note")
    if not run.get("same_clock") and not collectives.get("clock_checked"):
        return f"Clock: {run.get('clock_note', '')}."
    return (
        f"Clock: {checked}." if checked else "Clock: one host and overlapping times, one clock assumed (not checked)."
    )


def _charts(loaded: LoadedRanks) -> None:
    rs = loaded.result.rank_steps
    _side_by_side(loaded)
    _collective_tables(loaded.run.get("collectives") or {})
    if rs.empty:
        st.info(
            "No steps align across these ranks (a training job, or no forward passes): the communication shares "
            "above are over each rank's whole trace."
        )
        tables.show(_totals_display(loaded.result.totals))
        return
    st.subheader("Rank x step")
    label = st.selectbox("Colour by", list(rank_charts.HEATMAP_COLUMNS), key="ranks_heatmap_metric")
    st.plotly_chart(rank_charts.rank_step_heatmap(rs, label), width="stretch", key="ranks_heatmap")
    st.plotly_chart(rank_charts.rank_itl_lines(rs), width="stretch", key="ranks_itl")
    with st.expander(f"Per rank and step ({len(rs)} rows)"):
        tables.show(rs)


def _side_by_side(loaded: LoadedRanks) -> None:
    """Every rank in one window, opening on the iteration (aligned step, else collective to collective) whose
    ranks are furthest apart; the range slider spans it and as long again on each side, so its thumbs start apart."""
    r = loaded.result
    windows = iteration_windows(r.rank_steps, r.collectives)
    st.subheader("Ranks side by side")
    if windows.empty:
        st.info("No aligned step and fewer than two collectives matched across the ranks: no iteration to open on.")
        return
    left, right = st.columns([1, 3])
    widest = int(windows["skew_ns"].astype(float).fillna(0).to_numpy().argmax())
    i = int(
        left.number_input(
            "Iteration",
            min_value=0,
            max_value=len(windows) - 1,
            value=widest,
            key="ranks_iteration",
            help="An aligned step, or without steps the time from one collective to the next; opens on the one "
            "whose ranks are furthest apart.",
        )
    )
    start_ns, end_ns = float(windows["start_ns"].iloc[i]), float(windows["end_ns"].iloc[i])
    pad = max(end_ns - start_ns, 1e3)  # the slider spans the iteration and as much time on each side
    lo_ns, hi_ns = start_ns - pad, end_ns + pad
    start, end = (start_ns - lo_ns) / 1e6, (end_ns - lo_ns) / 1e6
    picked = right.slider(
        f"Window: {windows['label'].iloc[i]} (ms; the iteration and as long again on each side)",
        0.0,
        max((hi_ns - lo_ns) / 1e6, 1e-3),
        (float(start), float(end)),
        key=f"ranks_window_{i}",
    )
    window = (lo_ns + picked[0] * 1e6, lo_ns + picked[1] * 1e6)
    coll = r.collectives
    waits = coll.rows if coll is not None else pd.DataFrame()
    fig, note = rank_charts.ranks_window(
        r.ranks,
        loaded.ranked.timelines,
        r.analyses,
        window,
        coll.offsets_ns if coll else {},
        waits,
        f"{windows['label'].iloc[i]} on every rank",
    )
    st.plotly_chart(fig, width="stretch", key="ranks_window")
    st.caption(
        for_markdown(note) + "Yellow: a rank waiting at a collective for the last rank to arrive. Drag to zoom, "
        "double-click to reset; hover a segment for its name and length."
    )
    if coll is not None:
        _collectives_in_window(collectives_in(coll, *window))


def _collectives_in_window(frame: pd.DataFrame) -> None:
    if frame.empty:
        return
    shown = pd.DataFrame({"collective": frame["collective"], "kind": frame["kind"]})
    for column in [c for c in frame.columns if c.endswith("arrives (ns)")]:
        shown[column.replace("(ns)", "")] = [format_value(v / 1e3, "us") for v in frame[column]]
    shown["last to arrive"] = "rank " + frame["last_rank"].astype(str)
    for column, label in (("skew_ns", "arrival skew"), ("wait_ns", "wait it caused"), ("transfer_ns", "transfer")):
        shown[label] = [format_value(v / 1e3, "us") for v in frame[column]]
    st.caption(
        "The collectives in the window: each rank's arrival (from the window's start), who came last and the "
        "wait that caused the others, and the transfer after the last arrival."
    )
    tables.show(shown)


def _collective_tables(summary: dict) -> None:
    """Arrival skew and transfer per collective kind, waits per rank (the ranks JSON's run.collectives)."""
    if not summary.get("by_kind"):
        return
    st.subheader("Arrivals at collectives")
    matched = f"{summary['matched']} collectives matched across the ranks"
    if summary.get("unmatched"):
        matched += f" ({summary['unmatched']} had no partner on every rank: peers outside these files)"
    st.caption(for_markdown(matched + "."))
    kinds = pd.DataFrame(
        {
            "kind": [k["kind"] for k in summary["by_kind"]],
            "collectives": [k["count"] for k in summary["by_kind"]],
            "arrival skew p50": [format_value(k["arrival_skew_us"]["p50"], "us") for k in summary["by_kind"]],
            "arrival skew p90": [format_value(k["arrival_skew_us"]["p90"], "us") for k in summary["by_kind"]],
            "transfer p50": [format_value(k["transfer_us"]["p50"], "us") for k in summary["by_kind"]],
        }
    )
    ranks = pd.DataFrame(
        {
            "rank": [r["rank"] for r in summary["by_rank"]],
            "waited": [format_value(r["wait_us"], "us") for r in summary["by_rank"]],
            "wait it caused": [format_value(r["caused_wait_us"], "us") for r in summary["by_rank"]],
            "last to arrive": [r["last_arrivals"] for r in summary["by_rank"]],
        }
    )
    left, right = st.columns(2)
    with left:
        tables.show(kinds)
    with right:
        tables.show(ranks)


def _totals_display(totals):
    """Each rank's totals in ms (the contract keeps ns), one unit for the table."""
    out = totals.copy()
    for column in [c for c in out.columns if c.endswith("_ns")]:
        out[column.removesuffix("_ns") + " (ms)"] = out.pop(column) / 1e6
    return out


def render() -> None:
    st.title("Ranks")
    source = _pick_source()
    if source is None:
        return
    settings_expander()
    try:
        loaded = load_rank_source(source, st.session_state)
    except TraceError as exc:
        st.error(f"Could not read {for_markdown(source.label)}: {for_markdown(exc)}")
        return
    _header(loaded)
    _charts(loaded)
    st.subheader("Findings")
    if loaded.result.findings:
        components.finding_alerts(loaded.result.findings)
    elif loaded.result.rank_steps.empty:
        st.write("No step aligns across the ranks, so stragglers and skew could not be judged.")
    else:
        st.write("No straggler, communication-bound steps or imbalance above the thresholds (over the aligned steps).")
