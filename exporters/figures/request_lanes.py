"""Requests on the steps' clock (issue 41): one lane per request (queued, its prompt's chunks, decoding, finished),
under a lane of the steps by kind, where a step of unknown kind is drawn as such; and the mark a chosen request puts
on the timeline's phase lane.

Everything drawn comes from the analysis's request table (analysis.serving.request_list) and steps; this module only
places it. Hundreds of requests stay readable two ways: `packed` puts requests that do not overlap in time on one
lane (first fit, by start), `page` shows a page of them one a lane. Each state is drawn as rectangles of one filled
SVG path, as the timeline's overview draws its lanes (exporters/figures/timeline.py), with an invisible trace of
their middle points carrying the hover text: a figure of a thousand requests is a dozen traces
(bench/request_lanes_bench.py prints its draw time).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from stepscope.analysis.model import Analysis
from stepscope.analysis.number_format import format_value
from . import palette
from .hover import HOVERLABEL
from .timeline import LaneSet

STEPS_LANE = "steps"
LANE_HEIGHT_PX = 20  # one request's lane
BAR = 0.62  # a bar's height as a share of a lane
PAGE = 40  # requests one a lane on a page
MAX_HEIGHT_PX = 900  # more lanes than fit share this height (thinner); their names are left out past NAMED_LANES
NAMED_LANES = 60
STEP_GAP = 0.04  # a step is drawn this share of its length short of the next
UNKNOWN_LEGEND = (
    "unknown kind (record_shapes=True, the engine's step annotations or the API server's trace would tell it)"
)
STATES = {  # state: (legend, colour)
    "queued": ("queued (arrival to its first step)", palette.QUEUED),
    "prefill": ("prompt chunk (a step its prompt ran in)", palette.PREFILL),
    "running": ("in a step, phase not known", palette.OTHER_STEP),
    "decode": ("decoding (first token to last)", palette.DECODE_EVEN),
    "open": ("decoding, end not known", palette.DECODE_ODD),
}
STEP_KINDS = {  # the steps lane: kind -> (legend, colour)
    "prefill": ("prefill step", palette.PREFILL),
    "decode": ("decode step", palette.DECODE_EVEN),
    "mixed": ("mixed step (decode + prompt chunk)", palette.MIXED),
    "verify": ("verify step", palette.VERIFY),
    "draft": ("draft step", palette.DRAFT),
    "unknown": (UNKNOWN_LEGEND, palette.UNKNOWN_STEP),
}


@dataclass(frozen=True)
class Segments:
    """Every drawn piece of the requests: its lane row, state, start and end (ms from the trace's start) and hover."""

    frame: pd.DataFrame  # request, state, start_ms, end_ms, hover
    finished: pd.DataFrame  # request, at_ms, hover: the last token of each request whose end is known


def request_segments(analysis: Analysis, rows: pd.DataFrame) -> Segments:
    """The pieces of each request in `rows` (a part of the request table), on the trace's clock as ms from its start."""
    steps = analysis.steps
    origin = analysis.time_origin_ns
    start = (steps["start_ns"].to_numpy() - origin) / 1e6
    end = (steps["end_ns"].to_numpy() - origin) / 1e6
    token = (steps["token_ns"].to_numpy() - origin) / 1e6 if "token_ns" in steps else end
    last_ms = float(end.max()) if len(end) else 0.0
    pieces, finished = [], []
    for row in rows.itertuples(index=False):
        rid, first, last = int(row.request), int(row.first_step), int(row.last_step)
        token_step = int(row.first_token_step)
        ran = np.asarray(row.steps, dtype=np.int64)
        if row.arrival_ns >= 0:
            arrival = (row.arrival_ns - origin) / 1e6
            until = start[first] if first >= 0 else last_ms
            if until > arrival:
                pieces.append((rid, "queued", arrival, until, f"request {rid}: queued {_ms(until - arrival)}"))
        state = "prefill" if token_step >= 0 else "running"
        for s in ran[ran <= token_step] if token_step >= 0 else ran:  # its prompt's chunks (a request's few steps)
            pieces.append((rid, state, start[s], end[s], f"request {rid}: step {s} ({_state_word(state)})"))
        if token_step >= 0:
            stop = token[last] if last >= 0 else (end[ran.max()] if len(ran) else token[token_step])
            if stop > token[token_step]:
                state = "decode" if last >= 0 else "open"
                what = f"{_ms(stop - token[token_step])} from its first token"
                pieces.append((rid, state, token[token_step], stop, f"request {rid}: decoding, {what}"))
        if last >= 0:
            finished.append((rid, token[last], f"request {rid}: finished at step {last}"))
    frame = pd.DataFrame(pieces, columns=["request", "state", "start_ms", "end_ms", "hover"])
    return Segments(frame, pd.DataFrame(finished, columns=["request", "at_ms", "hover"]))


def packed_rows(segments: Segments) -> dict[int, int]:
    """A lane for each request, requests that do not overlap in time sharing one (first fit, by start)."""
    span = segments.frame.groupby("request").agg(lo=("start_ms", "min"), hi=("end_ms", "max")).sort_values("lo")
    ends: list[float] = []
    lane = {}
    for rid, lo, hi in zip(span.index, span["lo"], span["hi"], strict=True):
        free = next((i for i, e in enumerate(ends) if e < lo), None)
        if free is None:
            ends.append(hi)
            free = len(ends) - 1
        ends[free] = hi
        lane[int(rid)] = free
    return lane


def request_lanes_figure(
    analysis: Analysis, rows: pd.DataFrame, packed: bool = False, chosen: int | None = None, title: str = "Requests"
) -> go.Figure:
    """The steps lane, then one lane per request of `rows` (or, `packed`, as few lanes as they fit in); `chosen`: a
    request drawn with an outline."""
    segments = request_segments(analysis, rows)
    if packed:
        lane_of = packed_rows(segments)
        names = [f"lane {i}" for i in range(max(lane_of.values(), default=-1) + 1)]
    else:
        order = [int(r) for r in rows["request"]]
        lane_of = {rid: i for i, rid in enumerate(order)}
        names = [f"request {rid}" for rid in order]
    lanes = LaneSet([], [STEPS_LANE, *names], webgl=False)
    frame = segments.frame
    span = (float(frame["start_ms"].min()), float(frame["end_ms"].max())) if len(frame) else None
    _steps_lane(lanes, analysis, span)
    y = -1 - frame["request"].map(lane_of).to_numpy(dtype=float) if len(frame) else np.zeros(0)
    for state, (legend, color) in STATES.items():
        mask = (frame["state"] == state).to_numpy() if len(frame) else np.zeros(0, dtype=bool)
        if mask.any():
            _draw(lanes, frame[mask], y[mask], color, legend)
    if len(segments.finished):
        done = segments.finished
        lanes.traces.append(
            go.Scatter(
                x=done["at_ms"],
                y=-1 - done["request"].map(lane_of).to_numpy(dtype=float),
                mode="markers",
                marker={
                    "symbol": "line-ns",
                    "size": LANE_HEIGHT_PX - 4,
                    "line": {"width": 2, "color": palette.FINISHED},
                },
                name="finished (last token)",
                hovertext=done["hover"],
                hoverinfo="text",
            )
        )
    if chosen is not None and chosen in lane_of and len(frame):
        mine = frame[frame["request"] == chosen]
        lanes.traces.append(_outline(mine["start_ms"].min(), mine["end_ms"].max(), -1 - lane_of[chosen], chosen))
    return _figure(lanes, title)


def _steps_lane(lanes: LaneSet, analysis: Analysis, span_ms: tuple[float, float] | None) -> None:
    """The steps by kind (within `span_ms`, the requests' time, when given), each a little short of the next so
    that neighbours of one kind stay two steps."""
    steps = analysis.steps
    if not len(steps):
        return
    origin = analysis.time_origin_ns
    kind = steps["kind"].to_numpy(dtype=object)
    start, end = (steps["start_ns"].to_numpy() - origin) / 1e6, (steps["end_ns"].to_numpy() - origin) / 1e6
    index = np.arange(len(steps))
    inside = np.ones(len(steps), dtype=bool) if span_ms is None else (end >= span_ms[0]) & (start <= span_ms[1])
    shown_end = end - STEP_GAP * (end - start)
    for k, (legend, color) in {**STEP_KINDS, None: ("empty step", palette.OTHER_STEP)}.items():
        mask = inside & (kind == k if k else ~np.isin(kind, list(STEP_KINDS)))
        if mask.any():
            hover = [f"step {i} · {kind[i]}" for i in index[mask]]
            lanes.traces += rectangles(start[mask], shown_end[mask], 0.0, hover, color, legend, hover_points=3)


def _draw(lanes: LaneSet, part: pd.DataFrame, y: np.ndarray, color: str, legend: str) -> None:
    lanes.traces += rectangles(part["start_ms"].to_numpy(), part["end_ms"].to_numpy(), y, part["hover"], color, legend)


def rectangles(starts, ends, y, hover, color: str, legend: str, hover_points: int = 1) -> list:
    """Every [start, end] as a rectangle BAR of a lane tall on its own lane y, all in one filled SVG path (None
    between rectangles), and a trace drawing nothing whose points (`hover_points` across each) carry the hover text.
    As timeline.LaneSet draws one lane, for any number of lanes at once."""
    starts, ends = np.asarray(starts, dtype=float), np.asarray(ends, dtype=float)
    y = np.broadcast_to(np.asarray(y, dtype=float), starts.shape)
    n, half = len(starts), BAR / 2
    x, yy = np.full(n * 5, np.nan), np.full(n * 5, np.nan)
    for corner, (xs, dy) in enumerate(((starts, -half), (ends, -half), (ends, half), (starts, half))):
        x[corner::5], yy[corner::5] = xs, y + dy
    at = [(k + 0.5) / hover_points for k in range(hover_points)]
    fill = go.Scatter(
        x=x, y=yy, mode="none", fill="toself", fillcolor=color, name=legend, legendgroup=legend, hoverinfo="skip"
    )
    points = go.Scatter(
        x=np.concatenate([starts + (ends - starts) * f for f in at]),
        y=np.tile(y, hover_points),
        mode="none",
        hovertext=list(hover) * hover_points,
        hoverinfo="text",
        hoveron="points",
        name=legend,
        legendgroup=legend,
        showlegend=False,
    )
    return [fill, points]


def _outline(lo: float, hi: float, y: float, request: int) -> go.Scatter:
    half = 0.5
    return go.Scatter(
        x=[lo, hi, hi, lo, lo],
        y=[y - half, y - half, y + half, y + half, y - half],
        mode="lines",
        line={"color": palette.CHOSEN, "width": 2},
        name=f"request {request} (chosen)",
        hoverinfo="skip",
    )


def _figure(lanes: LaneSet, title: str) -> go.Figure:
    n = len(lanes.lanes)
    fig = go.Figure(lanes.traces)
    height = min(LANE_HEIGHT_PX * n, MAX_HEIGHT_PX)  # a browser draws a tall SVG slowly (bench/request_lanes_bench.py)
    fig.update_layout(
        title={"text": f"{title} (ms from trace start, the timeline's clock)", "font": {"size": 14}},
        height=150 + height,
        margin={"l": 90, "r": 10, "t": 40, "b": 60},
        hovermode="closest",
        hoverlabel=HOVERLABEL,
        dragmode="zoom",
        legend={"orientation": "h", "yanchor": "top", "y": -30 / (height + 60), "x": 0.0},
        uirevision=title,
    )
    fig.update_yaxes(
        tickvals=[-i for i in range(n)] if n <= NAMED_LANES else [0],
        ticktext=lanes.lanes if n <= NAMED_LANES else [STEPS_LANE],
        range=[-(n - 0.4), 0.6],
        fixedrange=True,
        showgrid=False,
    )
    fig.update_xaxes(showgrid=True, zeroline=False)
    return fig


def mark_steps(fig: go.Figure, analysis: Analysis, steps: list[int], label: str) -> go.Figure:
    """Outline `steps` on the timeline overview's phase lane (lane 0): the steps a chosen request ran in."""
    rows = analysis.steps.iloc[[s for s in steps if 0 <= s < len(analysis.steps)]]
    if not len(rows):
        return fig
    origin = analysis.time_origin_ns
    lo, hi = (rows["start_ns"].to_numpy() - origin) / 1e6, (rows["end_ns"].to_numpy() - origin) / 1e6
    n = len(rows)
    x, y = np.full(n * 6, np.nan), np.full(n * 6, np.nan)
    for corner, (xs, dy) in enumerate(((lo, -0.45), (hi, -0.45), (hi, 0.45), (lo, 0.45), (lo, -0.45))):
        x[corner::6], y[corner::6] = xs, dy
    fig.add_trace(
        go.Scatter(x=x, y=y, mode="lines", line={"color": palette.CHOSEN, "width": 2.5}, name=label, hoverinfo="skip")
    )
    return fig


def _state_word(state: str) -> str:
    return "a prompt chunk" if state == "prefill" else "phase not known"


def _ms(value: float) -> str:
    return format_value(value, "ms")
