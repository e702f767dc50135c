"""Ranks: the ranks of one tensor-parallel run side by side (which rank is slow, how much is communication).

Opens on the shipped 2-rank CPU capture; any folder of rank traces among the samples or past runs, or several
files uploaded together, can be picked. Numbers come from analysis/ranks.py; this page only arranges them.
"""

from __future__ import annotations

import streamlit as st

from ...analysis.metrics import format_value
from ...exporters.figures import rank_charts
from ...exporters.figures import timeline as timeline_figures
from ...exporters.safe_text import for_markdown, plain
from ...parsers import TraceError
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
        ("Slowest rank", "n/a" if run.get("slowest_rank") is None else str(run["slowest_rank"])),
    ]
    for start in range(0, len(cards), 4):
        for column, (label, value) in zip(st.columns(4), cards[start : start + 4], strict=False):
            column.metric(label, value, border=True)
    st.caption(
        for_markdown(
            f"Steps aligned by {run.get('alignment')}; skew from {run.get('skew_basis')}. {run.get('clock_note', '')}."
        )
    )
    for warning in run.get("warnings", []):
        st.warning(for_markdown(warning), icon=":material/warning:")


def _charts(loaded: LoadedRanks) -> None:
    rs = loaded.result.rank_steps
    if rs.empty:
        st.info(
            "No steps align across these ranks (a training job, or no forward passes): the communication shares "
            "above are over each rank's whole trace, and the window below shows one rank's time with its "
            "collectives on a lane of their own."
        )
        tables.show(_totals_display(loaded.result.totals))
        _rank_window(loaded)
        return
    st.subheader("Rank x step")
    label = st.selectbox("Colour by", list(rank_charts.HEATMAP_COLUMNS), key="ranks_heatmap_metric")
    st.plotly_chart(rank_charts.rank_step_heatmap(rs, label), width="stretch", key="ranks_heatmap")
    st.plotly_chart(rank_charts.rank_itl_lines(rs), width="stretch", key="ranks_itl")
    st.subheader("One step on every rank")
    steps = loaded.result.steps
    last = int(steps["step"].max())
    slowest_step = int(steps.loc[steps["step_ns"].idxmax(), "step"])
    step = st.number_input(
        "Aligned step",
        min_value=0,
        max_value=last,
        value=slowest_step,
        step=1,
        key="ranks_step",
        help="Opens on the slowest step of the run.",
    )
    r = loaded.result
    fig, note = rank_charts.rank_step_timeline(
        r.ranks, loaded.ranked.timelines, r.analyses, rs, int(step), r.same_clock
    )
    st.plotly_chart(fig, width="stretch", key="ranks_timeline")
    st.caption(for_markdown(note) + "Drag to zoom, double-click to reset; hover a segment for its name and length.")
    with st.expander(f"Per rank and step ({len(rs)} rows)"):
        tables.show(rs)


WINDOW_MS = 20.0  # the window a rank opens on: this long, from its first collective (else its first event)


def _totals_display(totals):
    """Each rank's totals in ms (the contract keeps ns), one unit for the table."""
    out = totals.copy()
    for column in [c for c in out.columns if c.endswith("_ns")]:
        out[column.removesuffix("_ns") + " (ms)"] = out.pop(column) / 1e6
    return out


def _rank_window(loaded: LoadedRanks) -> None:
    """One rank's time window at kernel level, its collectives highlighted (exporters/figures/timeline.py's
    communication lane): where steps do not align, the place to look at communication."""
    r = loaded.result
    left, right = st.columns([1, 3])
    rank = left.selectbox("Rank", list(r.ranks), key="ranks_window_rank")
    i = list(r.ranks).index(rank)
    timeline, analysis = loaded.ranked.timelines[i], r.analyses[i]
    events = timeline.events
    if events.empty:
        st.write("This rank's trace holds no events.")
        return
    origin = int(analysis.time_origin_ns)
    span_ms = max((int(events["ts"].max()) - origin) / 1e6, 1e-3)
    start_ms = (timeline_figures.first_communication_ns(timeline, origin) - origin) / 1e6
    width = min(WINDOW_MS, span_ms)
    lo_ms, hi_ms = right.slider(
        "Window (ms from the rank's start)",
        0.0,
        float(span_ms),
        (float(max(min(start_ms, span_ms - width), 0.0)), float(min(start_ms + width, span_ms))),
        key=f"ranks_window_{rank}",
    )
    fig, note = timeline_figures.detail_figure(timeline, analysis, origin + int(lo_ms * 1e6), origin + int(hi_ms * 1e6))
    fig.update_layout(title={"text": f"Rank {rank}: kernel detail, collectives in red"})
    st.plotly_chart(fig, width="stretch", key="ranks_window")
    if note:
        st.caption(for_markdown(note))


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
