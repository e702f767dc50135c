"""Which range the kernel detail draws: a range of steps (a slider), or a time window when there are no steps; a
finding's Zoom (app/findings_panel.py) sets the same slider, and stepping to a match of a find (app/find_panel.py)
either sets it to the match's step or draws a window around a match that lies outside every step.

A window around a match is kept with the slider value it was made under: moving the slider, or a Zoom that sets it,
shows the slider's range again without anyone clearing anything.
"""

from __future__ import annotations

import streamlit as st

from stepscope.exporters.figures import timeline
from .workbench import Bench

AROUND_MATCH = 40  # a window around a match outside the steps: this many times its length on each side
AROUND_MATCH_MIN_NS = 200_000  # and at least this much


def _slider_key(bench: Bench) -> str:
    steps = bench.loaded.analysis.steps
    return f"detail_steps_{bench.loaded.answer_id}" if len(steps) >= 2 else f"detail_ms_{bench.loaded.answer_id}"


def detail_range(bench: Bench) -> tuple[int, int]:
    """The range (ns, the trace's clock) the detail draws now, after showing the slider that chooses it."""
    loaded = bench.loaded
    steps = loaded.analysis.steps
    if len(steps) >= 2:
        first_row, last_row = _step_slider(bench)
        lo, hi = int(steps["start_ns"].iloc[first_row]), int(steps["end_ns"].iloc[last_row])
    elif len(steps) == 1:
        lo, hi = int(steps["start_ns"].iloc[0]), int(steps["end_ns"].iloc[0])
    else:
        lo, hi = _time_slider(bench)
    around = bench.state.get(bench.key("around"))
    if around is not None and around[2] == bench.state.get(_slider_key(bench)):
        return around[0], around[1]
    return lo, hi


def _step_slider(bench: Bench) -> tuple[int, int]:
    loaded = bench.loaded
    last = len(loaded.analysis.steps) - 1
    anat = loaded.analysis.anatomy
    default = (0, min(last, 3))
    if anat is not None and anat.layers.layers and anat.median_step is not None:
        default = (anat.median_step, anat.median_step)  # open on the step drawn as layers
    key = _slider_key(bench)
    first_row, last_row = st.slider(
        "Steps drawn at kernel level",
        0,
        last,
        None if key in st.session_state else default,  # a finding's Zoom or a find's Next may have set it
        key=key,
        help="Pick a few steps: the detail view draws every kernel and launch call in them (up to a budget). "
        "The step the anatomy reads (the median decode step, else the median of the main kind) is also drawn "
        "as layers when it is in the range.",
    )
    return int(first_row), int(last_row)


def _time_slider(bench: Bench) -> tuple[int, int]:
    ts = bench.loaded.timeline.events["ts"].to_numpy()
    origin = bench.index.origin_ns
    span_ms = max(float((ts[-1] - origin) / 1e6), 0.001)
    default_end = float((ts[min(len(ts) - 1, timeline.DETAIL_EVENT_BUDGET)] - origin) / 1e6)
    key = _slider_key(bench)
    lo_ms, hi_ms = st.slider(
        "Time window drawn at kernel level (ms)",
        0.0,
        span_ms,
        None if key in st.session_state else (0.0, max(default_end, span_ms / 1000)),
        key=key,
    )
    return origin + int(lo_ms * 1e6), origin + int(hi_ms * 1e6) + 1


def show_event(bench: Bench, start_ns: int, end_ns: int, step: int) -> None:
    """Draw the detail where an event is (a match stepped to): its step on the slider when it has one, else a window
    around it; called from a button's callback, before the widgets are drawn again."""
    steps = bench.loaded.analysis.steps
    key = _slider_key(bench)
    if step >= 0 and len(steps) >= 1:
        if len(steps) >= 2:
            bench.state[key] = (step, step)
        bench.state[bench.key("around")] = None
        return
    pad = max((end_ns - start_ns) * AROUND_MATCH, AROUND_MATCH_MIN_NS)
    lo, hi = start_ns - pad, end_ns + pad
    if len(steps) == 0:  # the slider itself is a time window: move it
        ts = bench.loaded.timeline.events["ts"].to_numpy()
        span_ms = max(float((ts[-1] - bench.index.origin_ns) / 1e6), 0.001)
        bench.state[key] = (max(bench.ms(lo), 0.0), min(bench.ms(hi), span_ms))
        bench.state[bench.key("around")] = None
        return
    bench.state[bench.key("around")] = (int(lo), int(hi), bench.state.get(key))
