"""Analyze: one trace, everything the analysis found, opened on a sample so a newcomer sees it all at once."""

from __future__ import annotations

import streamlit as st

from stepscope.analysis.event_window import table_page
from stepscope.analysis.number_format import convert, format_value, shared_unit
from stepscope.exporters.figures import step_charts, timeline, timeline_marks
from stepscope.exporters.safe_text import for_markdown, plain
from stepscope.parsers import TraceError
from .. import (
    components,
    findings_panel,
    logdir_panel,
    memory_panel,
    perfetto_panel,
    report_panel,
    requests_panel,
    roofline_panel,
    tables,
    timeline_detail,
)
from ..analysis_settings import settings_expander
from ..cache import open_log_of
from ..logdir import configured_logdir
from ..navigation import ANALYZE_KEY
from ..source_loading import load_source
from ..stage_timing import mark, stage
from ..trace_sources import TraceSource, all_sources, default_source
from ..upload_box import upload_box
from ..uploads import upload_names, upload_run_names

ORIGIN_LABEL = {"sample": "sample", "run": "past run", "upload": "upload", "logdir": "log directory"}


FIRST_STEP = "A shipped sample is open: open your own in the sidebar, or profile one on Run."


def _pick_source() -> TraceSource | None:
    """The trace to show, chosen in the sidebar: the trace list first, then the upload and the log directory."""
    with st.sidebar:
        choice = st.container()
        new = upload_box(st.session_state, "analyze_upload")
        if new is not None:
            st.session_state[ANALYZE_KEY] = new
        logdir_panel.picker()  # only with --logdir: big local traces read from disk
        settings_expander()
    state = st.session_state
    sources = all_sources(upload_names(state), upload_run_names(state)) + logdir_panel.opened_sources(state)
    if not sources:
        where = "upload one in the sidebar"
        if configured_logdir() is not None:
            where = "open one from the log directory in the sidebar, upload one"
        st.info(f"No trace open yet: {where}, or make one on the Run page.")
        return None
    by_key = {s.key: s for s in sources}
    default = default_source(sources).key
    chosen = st.session_state.get(ANALYZE_KEY)
    if chosen not in by_key:
        chosen = default
    keys = list(by_key)
    picked = choice.selectbox(
        "Trace",
        keys,
        index=keys.index(chosen),
        format_func=lambda k: f"{plain(by_key[k].label)}  ({ORIGIN_LABEL[by_key[k].origin]})",
        help="Samples ship with Stepscope; past runs come from the Run page; uploads last for this session.",
    )
    st.session_state[ANALYZE_KEY] = picked
    if picked == default and by_key[picked].origin == "sample":
        st.caption(FIRST_STEP)  # what to do first, while the page shows what it opened on
    return by_key[picked]


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


def _zoomed(overview, loaded):
    """The overview at the range a finding's Zoom asked for (app/findings_panel.py), the evidence outlined and the
    zoomed window shown as a brush on the whole run under it (a range slider: drag it, or its ends), else as
    drawn."""
    zoom = findings_panel.zoomed_range_ms(st.session_state, loaded)
    if zoom is not None:
        overview.update_xaxes(range=list(zoom), rangeslider={"visible": True, "thickness": 0.12})
        overview.update_layout(uirevision=f"zoom {zoom[0]:.6f} {zoom[1]:.6f}")  # a new zoom wins over the last drag
        overview.update_layout(height=overview.layout.height + 50)  # the brush's room
        evidence = findings_panel.evidence_ms(st.session_state, loaded)
        marks = timeline_marks.Marks(evidence=evidence)
        timeline_marks.draw_marks(overview, list(overview.layout.yaxis.ticktext), marks)
    return overview


def _timeline_section(loaded) -> None:
    opening = open_log_of(st.session_state, loaded)  # a long open just made: say that drawing runs now
    drawing = st.empty() if opening is not None else None
    if drawing is not None:
        opening("draw")
        drawing.caption(opening.message())
    with stage("figure"):  # built and serialised for the browser
        overview, note = timeline.overview_figure(loaded.analysis)
        overview = requests_panel.mark_chosen(overview, st.session_state, loaded)  # the chosen request's steps
        st.plotly_chart(_zoomed(overview, loaded), width="stretch", key="overview_timeline")
    if drawing is not None:
        drawing.empty()
    if note:
        st.caption(note)
    timeline_detail.section(loaded)  # the kernel detail, Find and the Selection panel (one fragment)


def _step_section(loaded) -> None:
    steps = loaded.analysis.steps
    st.subheader("Per step")
    if steps.empty:
        st.write("No steps found, so no per-step charts.")
        return
    left, middle, right = st.columns(3)
    on_gpu = loaded.analysis.summary.on_gpu
    left.plotly_chart(step_charts.step_time_chart(steps), width="stretch")
    middle.plotly_chart(step_charts.kernels_launches_chart(steps, on_gpu), width="stretch")
    right.plotly_chart(step_charts.busy_idle_chart(steps, on_gpu), width="stretch")
    _batch_section(loaded)
    anat = loaded.analysis.anatomy
    if anat is not None and not anat.step_categories.empty:
        st.plotly_chart(
            step_charts.category_chart(anat.step_categories, anat.on_gpu), width="stretch", key="category_chart"
        )
    with st.expander(f"Steps table ({len(steps):,} rows; every time in ms)"):
        page = table_page(tables.steps_display(loaded.analysis))  # a bounded page: never millions of rows at once
        tables.show(page.rows)
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
        tables.show(tables.composition_table(loaded.analysis))


def _inside_step_section(loaded) -> None:
    """The median decode step by category, and its layers."""
    anat = loaded.analysis.anatomy
    if anat is None or anat.median_step is None:
        return
    unit = "kernels" if anat.on_gpu else "host ops"
    st.subheader(f"Inside a step: categories and layers ({anat.role or f'step {anat.median_step}'})")
    left, right = st.columns([3, 2])
    table = tables.category_table(loaded.analysis).rename(columns={"count": unit})
    shown_unit = shared_unit(table["time_us"], "us")
    table["time_us"] = table["time_us"].map(lambda v: convert(v, "us", shown_unit))
    tables.show(
        table,
        left,
        column_config={
            "time_us": st.column_config.NumberColumn(f"time ({shown_unit})", format="localized"),
            "share_pct": st.column_config.NumberColumn("share", format="%.1f%%"),
        },
    )
    if not anat.on_gpu:
        left.caption("CPU trace: host ops by self time, each op's time counted in its nearest categorised caller.")
    layers = anat.layers
    with right:
        if layers.layers:
            lu = layers.layer_us or {}

            def us(value) -> str:
                return format_value(value or 0, "us")

            st.metric("Layers", f"{layers.layers}", help=f"{layers.kernels_per_layer} {unit} per layer")
            st.markdown(
                f"Per layer **{us(lu.get('p50'))}** median (min {us(lu.get('min'))}, max {us(lu.get('max'))}; "
                f"first {us(lu.get('first'))}, last {us(lu.get('last'))}). "
                f"Head {us(layers.head_us)}, tail {us(layers.tail_us)}."
            )
        else:
            st.markdown("**Layers not counted**: the step's sequence does not repeat cleanly.")
        st.caption(for_markdown(layers.evidence))
    for note in anat.notes:
        st.caption(for_markdown(note))


GAPS_SHOWN = 2000  # rows of the gaps table on the page (the CSV has all)


def _gap_section(loaded) -> None:
    gaps = loaded.analysis.gaps
    st.subheader(f"Idle gaps ({len(gaps):,})")
    if gaps.empty:
        st.write("No idle gaps above the threshold.")
        return
    left, right = st.columns([3, 2])
    table = tables.gaps_table(loaded.analysis)
    shown = table.nlargest(GAPS_SHOWN, "length_us")  # the longest first, as the caption says
    tables.show(
        shown,
        left,
        height=300,
        column_config={
            "start_ms": st.column_config.NumberColumn("start (ms from trace start)", format="localized"),
            "end_ms": st.column_config.NumberColumn("end (ms)", format="localized"),
            "length_us": st.column_config.NumberColumn("length (us)", format="localized"),
            "step_kind": st.column_config.TextColumn("step kind"),
        },
    )
    left.caption(
        f"The longest {len(shown):,} of {len(gaps):,} gaps, longest first; download the CSV for all."
        if len(shown) < len(gaps)
        else "Longest first; click a column's header to sort by it."
    )
    right.plotly_chart(step_charts.gap_histogram(gaps), width="stretch")


def _kernel_section(loaded) -> None:
    on_gpu = loaded.analysis.summary.on_gpu
    what = "kernel" if on_gpu else "host op"
    st.subheader(f"Top {what}s per phase")
    top = loaded.analysis.top_kernels
    if top.empty:
        st.write(f"No {what}s in this trace.")
        return
    by_short = st.toggle(
        "Group by short name",
        key=f"top_by_short_{loaded.answer_id[-10:]}",
        help=f"Sum the {what}s that share a short name (a family: one GEMM library's tiles, one ATen op's dtypes) "
        "among the heaviest listed.",
    )
    for phase in dict.fromkeys(top["phase"]):
        st.markdown(f"**{for_markdown(phase)}**")
        table = tables.top_kernels_display(top, phase, by_short)
        config = {
            "kernel": st.column_config.TextColumn(what, width="large"),
            "total_ms": st.column_config.NumberColumn("total (ms)", format="localized"),
            "share_pct": st.column_config.NumberColumn("share", format="%.1f%%"),
        }
        if "full name" in table and not (table["full name"] != "").any():
            table = table.drop(columns="full name")  # every label is the name itself
        elif "full name" in table:
            config["full name"] = st.column_config.TextColumn("full name (hover to read all)", width="large")
        tables.show(table, column_config=config, key=f"top_{phase}_{loaded.answer_id[-10:]}")


def render() -> None:
    mark("analyze script start")  # the bench's split of the click's time: the rerun reaching the page
    st.title("Analyze")
    source = _pick_source()
    if source is None:
        _empty_timeline()
        return
    try:
        loaded = load_source(source, st.session_state)
    except TraceError as exc:
        st.error(f"Could not read {for_markdown(source.label)}: {for_markdown(exc)}")
        return
    components.header(loaded)
    components.summary_cards(loaded.analysis.summary, first_row=components.FIRST_ROW_CARDS)  # one row, rest: more
    findings_panel.top_findings(loaded)  # findings first, compact, each with a button to its evidence
    _timeline_section(loaded)  # on the first screen at 1280x720 (and 1500): what else the page says comes after it
    findings_panel.context_lines(findings_panel.ordered(loaded))  # what the run is: under the timeline
    roofline_line = st.container()  # filled once the roofline section below has its inputs
    findings_panel.all_findings(loaded)
    components.segmentation_box(loaded)
    components.cpu_note(loaded.analysis.summary)
    memory_panel.lane(loaded)  # the memory lane, under the timeline
    requests_panel.section(loaded)  # a served run's requests, on the timeline's clock
    with stage("below the timeline"):
        _below_timeline(loaded, source, roofline_line)


def _below_timeline(loaded, source, roofline_line) -> None:
    _step_section(loaded)
    memory_panel.section(loaded)
    _inside_step_section(loaded)
    report = roofline_panel.section(loaded, source)
    with roofline_line:
        roofline_panel.summary_line(report, loaded)
    roofline_panel.category_section(loaded, report)
    _gap_section(loaded)
    _kernel_section(loaded)
    st.subheader("Downloads")
    components.downloads(loaded, "analyze")
    report_panel.report_download(loaded)
    perfetto_panel.perfetto_downloads(loaded)
