"""The kernel detail and the tools that work on it (issue 42): Find over every event, the detail timeline with a
Select mode beside Zoom, and the Selection panel, in Streamlit fragments: an interaction with any of them reruns
its fragment only, never the page (the cards, the findings, the overview and the sections below are neither
computed nor sent again). The panel is a fragment inside the detail's: a typed range, a step pick or Pin as A
reruns the panel alone; a find, Next or a drag on the detail reruns both.

Speed, measured on this 2-core machine (bench/timeline_tools_bench.py):
- the detail's lanes (their hover texts: about a second for 20,000 events) and the figure made of them are kept per
  answer, range, find and match (st.cache_resource), so a rerun that changes none of them does not build them;
- the lanes are SVG rectangles, not WebGL: Plotly redraws every WebGL trace of a figure on each move of a box
  selection (a drag of 8 moves over 20,000 events took 17.6 s in headless Chromium without a GPU, 0.35 s as SVG;
  exporters/figures/timeline.py);
- a selection does not change the figure: a changed figure is a new chart element, drawn again from scratch; the
  drag's own box stays drawn;
- the panel is written before the chart is (into a slot above it), so its answer does not wait for the chart's
  JSON, and the find's count line is written before both.
"""

from __future__ import annotations

import functools

import streamlit as st

from stepscope.analysis.event_find import FindQuery
from stepscope.exporters.figures import timeline_marks
from stepscope.exporters.figures.timeline import LaneSet, detail_lanes
from . import find_panel, findings_panel, launch_panel, selection_panel
from .cache import LoadedTrace
from .detail_window import detail_range
from .stage_timing import mark
from .workbench import Bench

DETAIL_KEY = "detail_timeline"
DRAG_MODES = ("Zoom", "Select")
FIGURES_KEPT = 8  # detail figures kept for the server (each a few MB: 20,000 segments with their hover texts)


@st.cache_resource(max_entries=FIGURES_KEPT, show_spinner=False)
def _lanes(answer_id: str, lo: int, hi: int, _loaded: LoadedTrace) -> LaneSet:
    """The detail's lanes of [lo, hi) for this answer (read only: figures are made from them, never change them)."""
    return detail_lanes(_loaded.timeline, _loaded.analysis, lo, hi, webgl=False)  # SVG: see the module's docstring


@st.cache_resource(max_entries=FIGURES_KEPT, show_spinner=False)
def _figure(
    answer_id: str,
    lo: int,
    hi: int,
    query: FindQuery | None,
    focus_ms: tuple[float, float] | None,
    dragmode: str,
    marks_key: str,
    _loaded: LoadedTrace,
    _hits,
    _marks: timeline_marks.Marks | None,
):
    """The detail figure with its marks: (figure, note, matches drawn), keyed by what it shows (`marks_key`: the
    chosen event and the evidence outlined, by value)."""
    lanes = _lanes(answer_id, lo, hi, _loaded)
    origin = _loaded.analysis.time_origin_ns
    fig, drawn = timeline_marks.detail_figure(lanes, origin, _hits, focus_ms, dragmode, _marks)
    return fig, lanes.note, drawn


def section(loaded: LoadedTrace) -> None:
    """Under the overview: the workbench, when the trace has events to draw."""
    if loaded.timeline.events.empty:
        return
    _workbench(loaded)


@st.fragment
def _workbench(loaded: LoadedTrace) -> None:
    mark("workbench start")  # bench/timeline_tools_bench.py splits an interaction's time at these marks
    bench = Bench.of(loaded, st.session_state)
    found = find_panel.find_box(bench)
    lo, hi = detail_range(bench)
    mode = st.segmented_control(
        "Drag on the detail to",
        DRAG_MODES,
        default="Zoom",
        key=bench.key("drag"),
        help="Zoom: drag to zoom in, double-click to reset. Select: drag across a range to see what it holds below. "
        "The chart's toolbar switches between its zoom and box-select tools too.",
    )
    chart = st.container()
    _panel(loaded, (lo, hi))  # written before the chart, shown under it
    query = found.found.query if found is not None else None
    marks = launch_panel.marks(bench, findings_panel.evidence_ms(st.session_state, loaded))
    fig, note, drawn = _figure(
        loaded.answer_id,
        lo,
        hi,
        query,
        find_panel.focus_ms(bench, found),
        "select" if mode == "Select" else "zoom",
        repr(marks),
        loaded,
        found.found.hits if found is not None else None,
        marks,
    )
    mark("workbench figure built")
    with chart:
        st.plotly_chart(
            fig,
            width="stretch",
            key=DETAIL_KEY,
            on_select=functools.partial(launch_panel.on_pick, bench, DETAIL_KEY),
            selection_mode=("points", "box"),  # a click chooses an event (issue 43), a drag in Select a range
            config={"displayModeBar": True},
        )
        st.caption(_caption(loaded, note, found, drawn))
        launch_panel.section(bench)  # the chosen event: its launch, its kernels, its step's lead
    mark("workbench end")


@st.fragment
def _panel(loaded: LoadedTrace, detail: tuple[int, int]) -> None:
    mark("selection panel start")
    bench = Bench.of(loaded, st.session_state)
    selection_panel.controls(bench, detail)
    selection_panel.panel(bench)
    mark("selection panel end")


def _caption(loaded: LoadedTrace, note: str, found, drawn: int) -> str:
    text = note or ""
    anat = loaded.analysis.anatomy
    if anat is not None and anat.layers.layers and anat.median_step is not None:
        text += (
            f"The layers lane shows {anat.role or f'step {anat.median_step}'} as its "
            f"{anat.layers.layers} layers when it is in the range. "
        )
    if found is not None:
        text += f"{drawn:,} of the matches are in this range, in red; the rest is dimmed. "
    return text + (
        "Zoom: drag to zoom, double-click to reset. Select: drag across a range. Hover a segment to name it; "
        "click it to follow it to its launch or its kernels."
    )
