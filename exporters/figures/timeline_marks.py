"""What the kernel detail marks on top of its lanes (issue 42): the matches of a find, bright on every lane with the
rest dimmed; the match stepped to, with a line. And the matches over the whole run, as a
strip of counts, so a find shows where its matches are even when the detail draws a few steps.

Issue 43 adds the chosen event's launch link (an arrow from the launch call to its first work, labelled with the
launch latency, and the span of everything it launched outlined: a graph launch's replayed kernels), a step's GPU
lead (the idle before its first work, and the host span before the launch call), and a finding's evidence (an
outlined span). The numbers come from analysis/launch_links.py; here they are only drawn.

Which names match is decided once per distinct name (analysis.event_find.name_hits): here a name's code looks its
answer up, for the events the detail drew (timeline.LaneSet.drawn), never for the whole trace.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from stepscope.analysis.number_format import format_value
from . import palette
from .hover import HOVERLABEL, event_hover
from .timeline import LANE_WIDTH_PX, LaneSet, _ms, lanes_figure

MATCH = "#f03e3e"  # a match: the one bright colour on a dimmed timeline
DIMMED = 0.22  # opacity of everything that does not match while a find is on
STRIP_BINS = 240  # bars of the matches-over-the-run strip (about 4 px each on a wide page)
DETAIL_TITLE = "Kernel detail for the chosen range"
LINK = "#7048e8"  # the chosen launch's arrow and outline
EVIDENCE = "#f08c00"  # a finding's evidence
HOST_LANE = "host launch calls"


@dataclass(frozen=True)
class Marks:
    """What the detail outlines (all ms from the trace's start): `link` (analysis.launch_links.link_attrs of the
    chosen event's launch) with the lanes its work runs on; `lead` (lead_attrs of a step) with the step's start;
    `evidence` (start, end, label) of a finding's Zoom."""

    link: dict | None = None
    work_lanes: tuple[str, ...] = ()
    lead: dict | None = None
    step_start_ms: float | None = None
    evidence: tuple[float, float, str] | None = None


def detail_figure(
    lanes: LaneSet,
    origin: int,
    hits: np.ndarray | None = None,
    focus_ms: tuple[float, float] | None = None,
    dragmode: str = "zoom",
    marks: Marks | None = None,
):
    """The detail figure of `lanes` (timeline.detail_lanes) with its marks; (figure, matches drawn). `hits`: per
    name code (and a last False for code -1) whether the name matches a find; `focus_ms`: a match stepped to, which
    the x axis zooms to. The lanes are not changed (a caller may keep them for the next figure)."""
    fig = lanes_figure(lanes, DETAIL_TITLE)
    drawn = 0
    if hits is not None:
        fig.update_traces(opacity=DIMMED)
        matched, drawn = match_traces(lanes, hits, origin)
        fig.add_traces(matched)
    fig.update_layout(dragmode=dragmode, selectdirection="h")
    if focus_ms is not None:
        mid = (focus_ms[0] + focus_ms[1]) / 2
        pad = max((focus_ms[1] - focus_ms[0]) * 4, 0.02)
        fig.update_xaxes(range=[mid - pad, mid + pad])
        fig.add_vline(x=focus_ms[0], line_color=MATCH, line_width=1, line_dash="dot")
        fig.update_layout(uirevision=f"focus {focus_ms[0]:.6f}")  # a new match wins over the last drag
    if marks is not None:
        draw_marks(fig, lanes.lanes, marks)
    return fig, drawn


def _lane_y(lanes: list[str], name: str) -> float | None:
    return -float(lanes.index(name)) if name in lanes else None


def draw_marks(fig, lanes: list[str], marks: Marks) -> None:
    """The evidence, the lead and the launch link on `fig` (a detail or the overview: lanes missing from it are
    left out of the marks)."""
    if marks.evidence is not None:
        lo, hi, label = marks.evidence
        line = {"color": EVIDENCE, "width": 2}
        fig.add_vrect(x0=lo, x1=hi, line=line, fillcolor=EVIDENCE, opacity=0.12, layer="below")
        fig.add_annotation(x=hi, y=0.75, xanchor="left", text=label, showarrow=False, font={"color": EVIDENCE})
    if marks.lead is not None and marks.step_start_ms is not None:
        _lead_marks(fig, lanes, marks.lead, marks.step_start_ms)
    if marks.link is not None:
        _link_marks(fig, lanes, marks.link, marks.work_lanes)


def _link_marks(fig, lanes: list[str], link: dict, work_lanes: tuple[str, ...]) -> None:
    """An arrow from the call (host lane) to its first work, labelled with the latency, and the work's span
    outlined across its lanes."""
    ys = [y for y in (_lane_y(lanes, name) for name in work_lanes) if y is not None]
    if link.get("start_ms") is None or not ys:
        return
    fig.add_shape(
        type="rect",
        x0=link["start_ms"],
        x1=link["end_ms"],
        y0=min(ys) - 0.42,
        y1=max(ys) + 0.42,
        line={"color": LINK, "width": 2, "dash": "dot"},
        name="launched work",
    )
    host_y = _lane_y(lanes, HOST_LANE)
    if host_y is None or link.get("call_start_ms") is None:
        return
    latency = format_value(link["latency_us"], "us") if link.get("latency_us") is not None else "?"
    fig.add_annotation(
        x=link["start_ms"],
        y=max(ys),
        ax=link["call_start_ms"],
        ay=host_y,
        axref="x",
        ayref="y",
        showarrow=True,
        arrowhead=2,
        arrowwidth=2,
        arrowcolor=LINK,
        text=f"launch latency {latency}",
        font={"color": LINK, "size": 11},
        bgcolor="rgba(255,255,255,0.85)",
    )


def _lead_marks(fig, lanes: list[str], lead: dict, step_start_ms: float) -> None:
    """The step's GPU lead as a bracket on the phase lane, and the host span before the launch outlined."""
    first = lead.get("first_start_ms")
    if first is None or first <= step_start_ms:
        return
    fig.add_shape(type="line", x0=step_start_ms, x1=first, y0=0.55, y1=0.55, line={"color": EVIDENCE, "width": 3})
    fig.add_annotation(
        x=(step_start_ms + first) / 2,
        y=0.62,
        text=f"GPU starts {format_value(lead['lead_us'], 'us')} after the step",
        showarrow=False,
        font={"color": EVIDENCE, "size": 11},
    )
    host_y = _lane_y(lanes, HOST_LANE)
    if lead.get("host_start_ms") is not None and host_y is not None:
        x0 = lead["host_start_ms"]
        x1 = x0 + lead["host_dur_us"] / 1e3
        fig.add_shape(type="rect", x0=x0, x1=x1, y0=host_y - 0.3, y1=host_y + 0.3, line={"color": EVIDENCE, "width": 2})


def match_traces(lanes: LaneSet, hits: np.ndarray, origin: int) -> tuple[list, int]:
    """The drawn events whose name matches, again on their own lanes, in the match colour and drawn the way the
    lanes are (WebGL lines or SVG rectangles); (the traces, how many events they draw)."""
    marks = LaneSet([], list(lanes.lanes), webgl=lanes.webgl)
    count = 0
    for y, events in lanes.drawn:
        mask = _matching(events["name"], hits)
        if not mask.any():
            continue
        part = events[mask]
        ts, dur = part["ts"].to_numpy(), part["dur"].to_numpy()
        hover = event_hover(part, np.full(len(part), "a match"), origin)
        rows = part.index.to_numpy()  # clickable as the lanes' own segments are (a click chooses the event)
        marks.add_segments(_ms(ts, origin), _ms(ts + dur, origin), y, hover, MATCH, "matches", LANE_WIDTH_PX, rows=rows)
        count += len(part)
    for i, trace in enumerate(marks.traces):  # one legend entry for every lane's matches
        trace.legendgroup = "matches"
        trace.showlegend = i == 0
    return marks.traces, count


def _matching(names: pd.Series, hits: np.ndarray) -> np.ndarray:
    if isinstance(names.dtype, pd.CategoricalDtype) and len(names.cat.categories) + 1 == len(hits):
        return hits[np.asarray(names.cat.codes)]
    return np.zeros(len(names), dtype=bool)  # not the events' own column: nothing to look up (never drawn so)


def match_strip(start_ms: np.ndarray, dur_us: np.ndarray, span_ms: float, focus_ms: float | None = None):
    """The matches over the whole run: count per bin of the run's time, the bars' hover their count and time."""
    span_ms = max(float(span_ms), 1e-6)
    edges = np.linspace(0.0, span_ms, STRIP_BINS + 1)
    count, _ = np.histogram(np.clip(start_ms, 0, span_ms), bins=edges)
    time_us, _ = np.histogram(np.clip(start_ms, 0, span_ms), bins=edges, weights=dur_us)
    mid = (edges[:-1] + edges[1:]) / 2
    keep = count > 0
    fig = go.Figure(
        go.Bar(
            x=mid[keep],
            y=count[keep],
            width=(edges[1] - edges[0]) * 0.9,
            marker_color=MATCH,
            customdata=np.stack([time_us[keep] / 1e3], axis=-1) if keep.any() else None,
            hovertemplate="%{x:.3f} ms: %{y} matches, %{customdata[0]:.3f} ms<extra></extra>",
        )
    )
    fig.update_layout(
        height=130,
        margin={"l": 40, "r": 10, "t": 28, "b": 30},
        title={"text": "Matches over the whole run (count per slice of time)", "font": {"size": 12}},
        hoverlabel=HOVERLABEL,
        showlegend=False,
        dragmode=False,
        bargap=0,
    )
    fig.update_xaxes(range=[0, span_ms], title=None, fixedrange=True)
    fig.update_yaxes(fixedrange=True, rangemode="tozero")
    if focus_ms is not None:
        fig.add_vline(x=focus_ms, line_color=palette.HOST, line_width=2)
    return fig
