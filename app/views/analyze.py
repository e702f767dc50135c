"""Analyze: one trace, everything the analysis found, opened on a sample so a newcomer sees it all at once."""

from __future__ import annotations

import streamlit as st

from ...analysis.event_window import table_page
from ...exporters.figures import step_charts, timeline
from ...exporters.safe_text import for_markdown, plain
from ...parsers import TraceError
from ...parsers.trace_processor import trace_processor_status
from .. import components, logdir_panel, memory_panel, perfetto_panel, report_panel, roofline_panel, tables
from ..analysis_settings import settings_expander
from ..logdir import configured_logdir
from ..navigation import ANALYZE_KEY
from ..source_loading import load_source
from ..stage_timing import mark, stage
from ..trace_sources import TraceSource, all_sources, default_source
from ..uploads import ACCEPTED_TYPES, register_upload, size_limit_text, upload_names

ORIGIN_LABEL = {"sample": "sample", "run": "past run", "upload": "upload", "logdir": "log directory"}


def _pick_source() -> TraceSource | None:
    logdir_panel.picker()  # only with --logdir: big local traces read from disk
    with st.expander("Upload a trace", expanded=False):
        st.caption(size_limit_text())
        st.caption(for_markdown(trace_processor_status()))
        uploaded = st.file_uploader(
            "Drop a trace here (the format is read from the content)", type=ACCEPTED_TYPES, key="analyze_upload"
        )
        if uploaded is not None:
            result = register_upload(st.session_state, uploaded.name, uploaded.getvalue())
            if result.error:
                st.error(f"Could not read the upload: {for_markdown(result.error)}")
            elif st.session_state.get("analyze_last_upload") != result.key:
                st.session_state["analyze_last_upload"] = result.key
                st.session_state[ANALYZE_KEY] = result.key
    sources = all_sources(upload_names(st.session_state)) + logdir_panel.opened_sources(st.session_state)
    if not sources:
        where = "upload one above"
        if configured_logdir() is not None:
            where = "open one from the log directory above, upload one"
        st.info(f"No trace open yet: {where}, or make one on the Run page.")
        return None
    by_key = {s.key: s for s in sources}
    chosen = st.session_state.get(ANALYZE_KEY)
    if chosen not in by_key:
        chosen = default_source(sources).key
    keys = list(by_key)
    picked = st.selectbox(
        "Trace",
        keys,
        index=keys.index(chosen),
        format_func=lambda k: f"{plain(by_key[k].label)}  ({ORIGIN_LABEL[by_key[k].origin]})",
        help="Samples ship with Stepscope; past runs come from the Run page; uploads last for this session.",
    )
    st.session_state[ANALYZE_KEY] = picked
    return by_key[picked]


def _detail_window(loaded) -> tuple[int, int]:
    """The range drawn at kernel level: a range of steps, or a time window when there are no steps."""
    steps = loaded.analysis.steps
    if len(steps) >= 2:
        last = len(steps) - 1
        anat = loaded.analysis.anatomy
        default = (0, min(last, 3))
        if anat is not None and anat.layers.layers and anat.median_step is not None:
            default = (anat.median_step, anat.median_step)  # open on the step drawn as layers
        first_row, last_row = st.slider(
            "Steps drawn at kernel level",
            0,
            last,
            default,
            key=f"detail_steps_{loaded.answer_id}",
            help="Pick a few steps: the detail view draws every kernel and launch call in them (up to a budget). "
            "The step the anatomy reads (the median decode step, else the median of the main kind) is also drawn "
            "as layers when it is in the range.",
        )
        return int(steps["start_ns"].iloc[first_row]), int(steps["end_ns"].iloc[last_row])
    if len(steps) == 1:
        return int(steps["start_ns"].iloc[0]), int(steps["end_ns"].iloc[0])
    ts = loaded.timeline.events["ts"].to_numpy()
    origin = loaded.analysis.time_origin_ns
    span_ms = max(float((ts[-1] - origin) / 1e6), 0.001)
    default_end = float((ts[min(len(ts) - 1, timeline.DETAIL_EVENT_BUDGET)] - origin) / 1e6)
    lo_ms, hi_ms = st.slider(
        "Time window drawn at kernel level (ms)",
        0.0,
        span_ms,
        (0.0, max(default_end, span_ms / 1000)),
        key=f"detail_ms_{loaded.answer_id}",
    )
    return origin + int(lo_ms * 1e6), origin + int(hi_ms * 1e6) + 1


def _empty_timeline() -> None:
    """The timeline's frame on the landing page, before any trace is open: where the timeline will be drawn.

    It is a real Plotly chart on purpose: the browser loads Streamlit's Plotly code (a 4.7 MB script, fetched and
    compiled on a page's first chart: 1-3 s measured in headless Chromium on a loaded 2-core machine) while the user
    is still choosing a trace, instead of after the click, when it would delay the first timeline; its text trace
    also warms up the scatter code the overview draws with, in the browser and in this server
    (bench/browser_open_bench.py measures the click -> first timeline)."""
    st.subheader("Timeline")
    st.plotly_chart(
        timeline.empty_figure("Open a trace: its timeline is drawn here"),
        width="stretch",
        key="empty_timeline",
        config={"staticPlot": True},
    )


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
    anat = loaded.analysis.anatomy
    if anat is not None and anat.layers.layers and anat.median_step is not None:
        note = (note or "") + (
            f"The layers lane shows {anat.role or f'step {anat.median_step}'} as its "
            f"{anat.layers.layers} layers when it is in the range. "
        )
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
    _batch_section(loaded)
    anat = loaded.analysis.anatomy
    if anat is not None and not anat.step_categories.empty:
        st.plotly_chart(
            step_charts.category_chart(anat.step_categories, anat.on_gpu), width="stretch", key="category_chart"
        )
    with st.expander(f"Steps table ({len(steps)} rows; times in ms from trace start)"):
        page = table_page(tables.steps_table(loaded.analysis))  # a bounded page: never millions of rows at once
        st.dataframe(tables.shown_frame(page.rows), width="stretch", hide_index=True)
        if not page.complete:
            st.caption(f"The first {len(page.rows):,} of {page.total:,} steps; download the CSV for all.")


def _batch_section(loaded) -> None:
    """What the batches held, step by step, with what co-scheduled prefill chunks and speculation cost (all of it
    computed in analysis.composition and analysis.speculative)."""
    steps = loaded.analysis.steps
    if not step_charts.has_composition(steps):
        return
    left, right = st.columns([3, 2])
    left.plotly_chart(step_charts.batch_chart(steps), width="stretch", key="batch_chart")
    with right:
        st.markdown("**Batch composition**")
        st.dataframe(tables.composition_table(loaded.analysis), width="stretch", hide_index=True)


def _inside_step_section(loaded) -> None:
    """The median decode step by category, and its layers."""
    anat = loaded.analysis.anatomy
    if anat is None or anat.median_step is None:
        return
    unit = "kernels" if anat.on_gpu else "host ops"
    st.subheader(f"Inside a step: categories and layers ({anat.role or f'step {anat.median_step}'})")
    left, right = st.columns([3, 2])
    table = tables.category_table(loaded.analysis).rename(columns={"count": unit})
    left.dataframe(
        table,
        width="stretch",
        hide_index=True,
        column_config={
            "time_us": st.column_config.NumberColumn("time (us)", format="%.1f"),
            "share_pct": st.column_config.NumberColumn("share", format="%.1f%%"),
        },
    )
    if not anat.on_gpu:
        left.caption("CPU trace: host ops by self time, each op's time counted in its nearest categorised caller.")
    layers = anat.layers
    with right:
        if layers.layers:
            lu = layers.layer_us or {}
            st.metric("Layers", f"{layers.layers}", help=f"{layers.kernels_per_layer} {unit} per layer")
            st.markdown(
                f"Per layer **{lu.get('p50', 0):,.1f} us** median (min {lu.get('min', 0):,.1f}, "
                f"max {lu.get('max', 0):,.1f}; first {lu.get('first', 0):,.1f}, last {lu.get('last', 0):,.1f}). "
                f"Head {layers.head_us or 0:,.1f} us, tail {layers.tail_us or 0:,.1f} us."
            )
        else:
            st.markdown("**Layers not counted**: the step's sequence does not repeat cleanly.")
        st.caption(for_markdown(layers.evidence))
    for note in anat.notes:
        st.caption(for_markdown(note))


def _gap_section(loaded) -> None:
    gaps = loaded.analysis.gaps
    st.subheader(f"Idle gaps ({len(gaps):,})")
    if gaps.empty:
        st.write("No idle gaps above the threshold.")
        return
    left, right = st.columns([3, 2])
    table = tables.gaps_table(loaded.analysis)
    shown = table.nlargest(2000, "length_us").sort_index() if len(table) > 2000 else table
    left.dataframe(
        shown,
        width="stretch",
        hide_index=True,
        height=300,
        column_config={
            "start_ms": st.column_config.NumberColumn("start (ms from trace start)", format="%.3f"),
            "end_ms": st.column_config.NumberColumn("end (ms)", format="%.3f"),
            "length_us": st.column_config.NumberColumn("length (us)", format="%.1f"),
        },
    )
    if len(shown) < len(gaps):
        left.caption(f"The longest {len(shown):,} gaps; download the CSV for all.")
    right.plotly_chart(step_charts.gap_histogram(gaps), width="stretch")


def _kernel_section(loaded) -> None:
    st.subheader("Top kernels per phase" if loaded.analysis.summary.on_gpu else "Top host ops per phase")
    top = loaded.analysis.top_kernels
    if top.empty:
        st.write("No kernels in this trace.")
        return
    phases = list(dict.fromkeys(top["phase"]))
    for phase in phases:
        st.markdown(f"**{for_markdown(phase)}**")
        st.dataframe(  # text shown as text; the full name is its own column (hover a cell to read it all)
            tables.shown_frame(tables.top_kernels_table(top, phase)),
            width="stretch",
            hide_index=True,
            column_config={
                "kernel": st.column_config.TextColumn(
                    "kernel" if loaded.analysis.summary.on_gpu else "host op", width="medium"
                ),
                "share_pct": st.column_config.NumberColumn("share", format="%.1f%%"),
                "full name": st.column_config.TextColumn("full name", width="small"),
            },
        )


def render() -> None:
    mark("analyze script start")  # the bench's split of the click's time: the rerun reaching the page
    st.title("Analyze")
    source = _pick_source()
    if source is None:
        _empty_timeline()
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
    memory_panel.lane(loaded)  # the memory lane, under the timeline
    with stage("below the timeline"):
        _below_timeline(loaded, source, roofline_line)


def _below_timeline(loaded, source, roofline_line) -> None:
    _step_section(loaded)
    memory_panel.section(loaded)
    _inside_step_section(loaded)
    report = roofline_panel.section(loaded, source)
    with roofline_line:
        roofline_panel.summary_line(report)
    roofline_panel.category_section(loaded, report)
    _gap_section(loaded)
    _kernel_section(loaded)
    st.subheader("Findings")
    components.findings_list(loaded)
    st.subheader("Downloads")
    components.downloads(loaded, "analyze")
    report_panel.report_download(loaded)
    perfetto_panel.perfetto_downloads(loaded)
