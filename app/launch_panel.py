"""The chosen event on the kernel detail (issue 43): click a kernel or a launch call and the detail draws the link
from the call to its work with the launch latency, outlines everything the call launched (a graph launch: every
kernel it replays, "covers 778 kernels, 10.2 ms") and offers that span as the Selection panel's selection; a host
call that launched nothing (a 23 ms cudaEventSynchronize) offers its own span, which shows the kernels it waited
on. When the chosen work is its step's first, the step's GPU lead is drawn with the host span before the launch.

Every number is analysis/launch_links.py's (the API's launch_of, kernels_of, gpu_lead); this module lays it out.
"""

from __future__ import annotations

import math

import numpy as np
import streamlit as st

from stepscope.analysis.event_find import steps_of
from stepscope.analysis.launch_links import Launch, cover_line, launch_link, lead_attrs, link_attrs, step_lead
from stepscope.analysis.number_format import format_value
from stepscope.analysis.selection import Selection
from stepscope.exporters.figures.timeline_marks import Marks
from stepscope.exporters.safe_text import for_markdown
from .selection_panel import on_box
from .workbench import Bench


def on_pick(bench: Bench, chart_key: str) -> None:
    """The detail's selection event: a click on a segment chooses its event; a box (Select mode) is a range. A box
    selects the points inside it too, so the box is looked at first: a drag must not become a click on its first
    segment."""
    event = bench.state.get(chart_key) or {}
    selection = event.get("selection") or {}
    if selection.get("box"):
        on_box(bench, chart_key)
        return
    for point in selection.get("points") or []:
        row = point.get("customdata")
        row = row[0] if isinstance(row, list | tuple) and row else row
        if isinstance(row, int | float) and math.isfinite(row) and 0 <= row < len(bench.loaded.timeline.events):
            bench.state[bench.key("chosen")] = int(row)
            return
    on_box(bench, chart_key)


def chosen_row(bench: Bench) -> int | None:
    row = bench.state.get(bench.key("chosen"))
    return row if isinstance(row, int) and 0 <= row < len(bench.loaded.timeline.events) else None


def choose(bench: Bench, row: int | None) -> None:
    bench.state[bench.key("chosen")] = row


def _link(bench: Bench, row: int) -> Launch | None:
    memo = bench.state.get(bench.key("chosen_link"))
    if memo is not None and memo[0] == row:
        return memo[1]
    launch = launch_link(bench.loaded.timeline, row)
    bench.state[bench.key("chosen_link")] = (row, launch)
    return launch


def _lead(bench: Bench, row: int, launch: Launch | None) -> dict | None:
    """The step's lead when this launch started the step's first device work, else None."""
    if launch is None or not len(launch.work_rows) or bench.index.event_rows is None:
        return None
    ts = bench.loaded.timeline.events["ts"].to_numpy()
    step = int(steps_of(bench.index, np.array([row]), ts[[row]])[0])
    if step < 0:
        return None
    lead = step_lead(bench.loaded.timeline, bench.loaded.analysis, bench.index.event_rows, bench.index.step, step)
    if lead.first_row is None or lead.first_row not in set(launch.work_rows.tolist()) or lead.lead_ns <= 0:
        return None
    return lead_attrs(bench.loaded.timeline, lead, bench.index.origin_ns)


def marks(bench: Bench, evidence: tuple[float, float, str] | None = None) -> Marks | None:
    """What the detail outlines now: the chosen event's link and lead, and a finding's evidence."""
    row = chosen_row(bench)
    if row is None:
        return Marks(evidence=evidence) if evidence is not None else None
    launch = _link(bench, row)
    if launch is None:
        return Marks(evidence=evidence) if evidence is not None else None
    events = bench.loaded.timeline.events.iloc[launch.work_rows]
    work_lanes = tuple(
        dict.fromkeys(f"GPU {d} stream {s}" for d, s in zip(events["device"], events["stream"], strict=True))
    )
    lead = _lead(bench, row, launch)
    start = None
    if lead is not None:
        start = bench.ms(int(bench.loaded.analysis.steps["start_ns"].iloc[lead["step"]]))
    return Marks(link_attrs(launch, bench.index.origin_ns), work_lanes, lead, start, evidence)


def section(bench: Bench) -> None:
    """The chosen event in words, with the span it offers as a selection."""
    row = chosen_row(bench)
    if row is None:
        st.caption("Click a kernel or a launch call on the detail to follow it to its launch or its kernels.")
        return
    events = bench.loaded.timeline.events
    name, kind = str(events["name"].iat[row]), str(events["kind"].iat[row])
    start, dur = int(events["ts"].iat[row]), int(events["dur"].iat[row])
    launch = _link(bench, row)
    with st.container(key=bench.key("chosen_event"), border=True):
        head = st.container(horizontal=True, vertical_alignment="center", gap="small")
        head.markdown(
            f"**Chosen:** **{for_markdown(name[:120])}** ({kind}) at {bench.ms(start):,.3f} ms, "
            f"{format_value(dur / 1e3, 'us')}",
            width="stretch",
        )
        head.button("Clear", key=bench.key("chosen_clear"), on_click=choose, args=(bench, None))
        if launch is None:
            st.caption("No launch link: the event carries no correlation id, or it is not a launch or device work.")
        else:
            _link_lines(bench, launch, row)
        if launch is None or not len(launch.work_rows):  # a call that launched nothing: what ran while it did
            label = f"during {name[:60]} ({format_value(dur / 1e3, 'us')})"
            st.button(
                "Select its span",
                key=bench.key("chosen_span"),
                icon=":material/straighten:",
                on_click=bench.select,
                args=(Selection.of_range(start, start + max(dur, 1), label),),
                help="The Selection panel below shows what ran on the device while it lasted.",
            )
        lead = _lead(bench, row, launch)
        if lead is not None:
            host = (
                f"the longest host span before the launch is **{for_markdown(lead['host_name'][:80])}** "
                f"({format_value(lead['host_dur_us'], 'us')})"
                if lead.get("host_name")
                else "no host span is recorded between the step's start and the launch"
            )
            st.markdown(
                f"Step {lead['step']}'s GPU starts **{format_value(lead['lead_us'], 'us')}** after the step begins: "
                f"this is its first work; {host}."
            )


def _link_lines(bench: Bench, launch: Launch, row: int) -> None:
    attrs = link_attrs(launch, bench.index.origin_ns)
    latency = format_value(attrs["latency_us"], "us") if attrs["latency_us"] is not None else "unknown"
    call = for_markdown(launch.call_name or "a call not in the trace")
    if launch.call_row is not None and row != launch.call_row:
        st.markdown(f"Launched by **{call}** at {attrs['call_start_ms']:,.3f} ms · launch latency **{latency}**")
    if not len(launch.work_rows):
        return
    what = "replays a graph that " if launch.graph else ""
    line = f"**{call}** {what}**{cover_line(launch, bench.index.unit)}**"
    if launch.call_row == row:
        line += f" · launch latency **{latency}**"
    st.markdown(line)
    label = f"the {len(launch.work_rows):,} kernels {launch.call_name or 'the call'} launched"
    st.button(
        "Select what it launched",
        key=bench.key("chosen_work"),
        icon=":material/select_all:",
        on_click=bench.select,
        args=(Selection.of_range(launch.first_start_ns, launch.last_end_ns, label),),
        help="Make the span of its work the selection: the panel below lists it by name.",
    )
