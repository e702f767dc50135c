"""Analyze: one trace, everything the analysis found, opened on a sample so a newcomer sees it all at once."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `streamlit run` puts app/ first, not the repo

import streamlit as st

from app import components, logdir_panel, perfetto_panel, roofline_panel
from app.analysis_settings import settings_expander
from app.figures import step_charts, timeline
from app.navigation import ANALYZE_KEY
from app.safe_text import for_markdown
from app.source_loading import load_source
from app.stage_timing import stage
from app.trace_sources import TraceSource, all_sources, default_source
from app.uploads import ACCEPTED_TYPES, register_upload, size_limit_text, upload_names
from parsers import TraceError
from parsers.perfetto_reader import trace_processor_status

ORIGIN_LABEL = {"sample": "sample", "run": "past run", "upload": "upload", "logdir": "log directory"}


def _pick_source() -> TraceSource | None:
    logdir_panel.picker()  # only with --logdir: big local traces read from disk
    with st.expander("Upload a trace", expanded=False):
        st.caption(size_limit_text())
        st.caption(for_markdown(trace_processor_status()))
        uploaded = st.file_uploader("Drop a trace here (the format is read from the content)", type=ACCEPTED_TYPES,
                                    key="analyze_upload")
        if uploaded is not None:
            result = register_upload(st.session_state, uploaded.name, uploaded.getvalue())
            if result.error:
                st.error(f"Could not read the upload: {for_markdown(result.error)}")
            elif st.session_state.get("analyze_last_upload") != result.key:
                st.session_state["analyze_last_upload"] = result.key
                st.session_state[ANALYZE_KEY] = result.key
    sources = all_sources(upload_names(st.session_state)) + logdir_panel.opened_sources(st.session_state)
    if not sources:
        st.info("No traces yet: upload one above, or make one on the Run page.")
        return None
    by_key = {s.key: s for s in sources}
    chosen = st.session_state.get(ANALYZE_KEY)
    if chosen not in by_key:
        chosen = default_source(sources).key
    keys = list(by_key)
    picked = st.selectbox(
        "Trace", keys, index=keys.index(chosen),
        format_func=lambda k: f"{by_key[k].label}  ({ORIGIN_LABEL[by_key[k].origin]})",
        help="Samples ship with Stepscope; past runs come from the Run page; uploads last for this session.",
    )
    st.session_state[ANALYZE_KEY] = picked
    return by_key[picked]


def _detail_window(loaded) -> tuple[int, int]:
    """The range drawn at kernel level: a range of steps, or a time window when there are no steps."""
    steps = loaded.analysis.steps
    if len(steps) >= 2:
        last = len(steps) - 1
        first_row, last_row = st.slider(
            "Steps drawn at kernel level", 0, last, (0, min(last, 3)), key=f"detail_steps_{loaded.sha256}",
            help="Pick a few steps: the detail view draws every kernel and launch call in them (up to a budget).",
        )
        return int(steps["start_ns"].iloc[first_row]), int(steps["end_ns"].iloc[last_row])
    if len(steps) == 1:
        return int(steps["start_ns"].iloc[0]), int(steps["end_ns"].iloc[0])
    ts = loaded.timeline.events["ts"].to_numpy()
    origin = loaded.analysis.time_origin_ns
    span_ms = max(float((ts[-1] - origin) / 1e6), 0.001)
    default_end = float((ts[min(len(ts) - 1, timeline.DETAIL_EVENT_BUDGET)] - origin) / 1e6)
    lo_ms, hi_ms = st.slider("Time window drawn at kernel level (ms)", 0.0, span_ms,
                             (0.0, max(default_end, span_ms / 1000)), key=f"detail_ms_{loaded.sha256}")
    return origin + int(lo_ms * 1e6), origin + int(hi_ms * 1e6) + 1


def _timeline_section(loaded) -> None:
    st.subheader("Timeline")
    with stage("figure"):  # built and serialised for the browser
        overview, note = timeline.overview_figure(loaded.analysis)
        st.plotly_chart(overview, width="stretch", key="overview_timeline")
    if note:
        st.caption(note)
    if loaded.timeline.events.empty:
        return
    lo, hi = _detail_window(loaded)
    detail, note = timeline.detail_figure(loaded.timeline, loaded.analysis, lo, hi)
    st.plotly_chart(detail, width="stretch", key="detail_timeline")
    st.caption((note or "") + "Drag to zoom, double-click to reset; hover a segment for its name, length and step.")


def _step_section(loaded) -> None:
    steps = loaded.analysis.steps
    st.subheader("Per step")
    if steps.empty:
        st.write("No steps found, so no per-step charts.")
        return
    left, middle, right = st.columns(3)
    left.plotly_chart(step_charts.step_time_chart(steps), width="stretch")
    middle.plotly_chart(step_charts.kernels_launches_chart(steps), width="stretch")
    right.plotly_chart(step_charts.busy_idle_chart(steps), width="stretch")
    with st.expander(f"Steps table ({len(steps)} rows)"):
        st.dataframe(steps, width="stretch", hide_index=True)


def _gap_section(loaded) -> None:
    gaps = loaded.analysis.gaps
    st.subheader(f"Idle gaps ({len(gaps):,})")
    if gaps.empty:
        st.write("No idle gaps above the threshold.")
        return
    left, right = st.columns([3, 2])
    shown = gaps.nlargest(2000, "dur_ns") if len(gaps) > 2000 else gaps
    left.dataframe(shown, width="stretch", hide_index=True, height=300)
    if len(shown) < len(gaps):
        left.caption(f"The longest {len(shown):,} gaps; download the CSV for all.")
    right.plotly_chart(step_charts.gap_histogram(gaps), width="stretch")


def _kernel_section(loaded) -> None:
    st.subheader("Top kernels per phase")
    top = loaded.analysis.top_kernels
    if top.empty:
        st.write("No kernels in this trace.")
        return
    phases = list(dict.fromkeys(top["phase"]))
    for column, phase in zip(st.columns(len(phases)), phases, strict=True):
        part = top[top["phase"] == phase].drop(columns="phase")
        part = part.assign(total_ms=part["total_ns"] / 1e6).drop(columns="total_ns")
        column.markdown(f"**{for_markdown(phase)}**")
        column.table(part.round({"share_pct": 1, "total_ms": 3}).set_index("name"))  # st.table shows text as text


def render() -> None:
    st.title("Analyze")
    source = _pick_source()
    if source is None:
        return
    settings_expander()
    try:
        loaded = load_source(source, st.session_state)
    except TraceError as exc:
        st.error(f"Could not read {for_markdown(source.label)}: {for_markdown(exc)}")
        return
    components.header(loaded)
    components.summary_cards(loaded.analysis.summary)
    roofline_line = st.container()  # filled once the roofline section below has its inputs
    components.segmentation_box(loaded)
    _timeline_section(loaded)
    with stage("below the timeline"):
        _below_timeline(loaded, source, roofline_line)


def _below_timeline(loaded, source, roofline_line) -> None:
    _step_section(loaded)
    report = roofline_panel.section(loaded, source)
    with roofline_line:
        roofline_panel.summary_line(report)
    _gap_section(loaded)
    _kernel_section(loaded)
    st.subheader("Findings")
    components.findings_list(loaded)
    st.subheader("Downloads")
    components.downloads(loaded, "analyze")
    perfetto_panel.perfetto_downloads(loaded)


render()
