"""The interactive timeline: a phase lane, GPU lanes per stream, a host lane.

Two views keep a 1M-event trace quick: an overview of the whole run at step
level (one segment per step and per gap), and kernel-level detail for a chosen
time window, capped at a budget of events. Segments are lines with None
separators (one trace per lane and colour); each segment is hoverable at its
middle point (labels on every point would quadruple the figure's size).

The detail view draws them with WebGL (Scattergl: 20,000 events stay interactive), or, on the Analyze page, as SVG
rectangles like the overview: there a box selection (issue 42) would redraw every WebGL trace on each move of the
mouse (measured in headless Chromium without a GPU on 20,000 events of the 1.09M-event bench trace: a drag of 8
moves took 17.6 s with WebGL, 0.35 s as SVG; a zoom redrew in 4.6 s against 1.7 s; the first draw took about the
same). The overview, the first
chart a trace shows, draws each lane's segments as rectangles of ONE filled SVG path (plus an invisible trace of
their middle points that carries the hover text), within a budget of about two segments per pixel column.
Measured in headless Chromium without a GPU (WebGL done in software) on this module's overview of a 1M-event
trace: 2,500 segments per lane draw in about 0.2 s so, 0.3 s as SVG lines (Plotly makes one element per line
segment: 2,900 elements against 27), 1.1 s as WebGL; 10,000 as WebGL took 2.1 s. SVG needs no WebGL at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from stepscope.analysis.capture_figures import utilisation
from stepscope.analysis.categories import categorize
from stepscope.analysis.event_window import events_in_range
from stepscope.analysis.model import Analysis
from stepscope.analysis.number_format import format_value
from stepscope.parsers.timeline import GPU_KINDS, HOST_LAUNCH_KINDS, Timeline
from . import palette
from .hover import HOVERLABEL, event_hover, gap_hover, step_hover

DETAIL_EVENT_BUDGET = 20_000  # segments drawn in the detail view
OVERVIEW_SEGMENT_BUDGET = 2_500  # per lane in the overview: ~2 per pixel column; more are not seen, only waited for
GAP_LABELS = 12  # at most this many gaps get their length written on the phase lane
GAP_LABEL_CANDIDATES = 400  # the longest gaps tried for a label (a loop over these, never over all gaps)
PLOT_WIDTH_PX = 1100  # the width a label's room is judged against (the page is wide; hover has the rest)
LABEL_PX = 44  # room one "12.3 ms" label needs
LAYER_LANE = "layers"
LANE_WIDTH_PX = 16
LANE_PX = 50  # about the height of one lane (lanes_figure: 170 + 46 px per lane): a bar's px -> lane units
LABEL_PX_PER_CHAR = 7.5  # a lane name's width at the axis' 12 px font, rounded up
PHASE_LANE = "phase"
STEP_HOVER_POINTS = 5  # a step answers hover at five places across it, so the mouse finds it anywhere on it
GAP_STRIP_OFFSET = 0.34  # idle gaps: a strip under the phase lane's steps (lane units), not drawn over them
GAP_STRIP_PX = 7


@dataclass
class LaneSet:
    """Traces plus the lane names in top-to-bottom order; lane i sits at y = -i.

    Negative positions with an ordinary axis put the first lane on top; a reversed
    axis range misplaces WebGL traces in Plotly, so it is avoided.
    """

    traces: list
    lanes: list[str]
    note: str = ""
    webgl: bool = True  # False: SVG rectangles (the overview; see the module's docstring)
    drawn: list = field(default_factory=list)  # (lane y, the events drawn on it): what a find highlights

    def add_segments(
        self,
        starts_ms,
        ends_ms,
        y: float,
        hover: list[str],
        color: str,
        name: str,
        width: int = LANE_WIDTH_PX,
        hover_points: int = 1,
        legend: bool = True,
        rows=None,
    ) -> None:
        """Every [start, end] drawn on lane y, `width` px thick: WebGL lines, or SVG rectangles (hoverable at
        `hover_points` places across each, so a wide one answers wherever the mouse is). `legend` False: no legend
        entry of its own (it joins the entry of the same name on the lane). `rows`: each segment's event (its row
        in the events), the customdata a click on it reports (the detail's chosen event, issue 43)."""
        if self.webgl:
            trace = _segments(starts_ms, ends_ms, y, hover, color, name, width)
            trace.update(showlegend=legend, legendgroup=f"{name} {y}")
            self.traces.append(trace)
        else:
            bars = _bars(starts_ms, ends_ms, y, hover, color, name, width, hover_points)
            bars[0].showlegend = legend
            if rows is not None:  # clickable: Plotly selects only points with markers (invisible ones here)
                bars[1].customdata = np.tile(np.asarray(rows, dtype=np.int64), hover_points)
                bars[1].update(mode="markers", marker={"size": 10, "opacity": 0}, unselected={"marker": {"opacity": 0}})
            self.traces += bars

    def lane(self, name: str) -> int:
        if name not in self.lanes:
            self.lanes.append(name)
        return -self.lanes.index(name)


def _ms(ns: np.ndarray, origin_ns: int) -> np.ndarray:
    return (np.asarray(ns, dtype=np.int64) - origin_ns) / 1e6


def _segments(starts_ms, ends_ms, y: int, hover: list[str], color: str, name: str, width: int = LANE_WIDTH_PX):
    """One WebGL trace drawing every [start, end] as a thick horizontal line."""
    n = len(starts_ms)
    x = np.empty(n * 4)
    x[0::4] = starts_ms
    x[1::4] = (np.asarray(starts_ms) + np.asarray(ends_ms)) / 2
    x[2::4] = ends_ms
    x[3::4] = np.nan
    yy = np.full(n * 4, float(y))
    yy[3::4] = np.nan
    text = np.full(n * 4, "", dtype=object)
    text[1::4] = hover  # one label per segment, on its middle point: keeps the figure small for the browser
    return go.Scattergl(
        x=x,
        y=yy,
        mode="lines",
        line={"color": color, "width": width},
        name=name,
        hovertext=text,
        hoverinfo="text",
        connectgaps=False,
        showlegend=True,
    )


def _bars(
    starts_ms, ends_ms, y: float, hover: list[str], color: str, name: str, width: int = LANE_WIDTH_PX, points: int = 1
) -> list:
    """Every [start, end] as a rectangle `width` px tall on lane y, all in one filled SVG path (None between
    rectangles), and a trace drawing nothing whose points (`points` across each rectangle, its middle when 1) carry
    the hover text."""
    starts = np.asarray(starts_ms, dtype=float)
    ends = np.asarray(ends_ms, dtype=float)
    n = len(starts)
    half = width / 2 / LANE_PX
    x = np.full(n * 5, np.nan)
    yy = np.full(n * 5, np.nan)
    for corner, (xs, dy) in enumerate(((starts, -half), (ends, -half), (ends, half), (starts, half))):
        x[corner::5] = xs
        yy[corner::5] = y + dy
    group = f"{name} {y}"  # the legend entry hides both traces
    at = [(k + 0.5) / points for k in range(points)]
    hover_x = np.concatenate([starts + (ends - starts) * f for f in at]) if n else starts
    hover_text = list(hover) * points
    return [
        go.Scatter(
            x=x,
            y=yy,
            mode="none",
            fill="toself",
            fillcolor=color,
            name=name,
            legendgroup=group,
            hoverinfo="skip",
            showlegend=True,
        ),
        go.Scatter(
            x=hover_x,
            y=np.full(len(hover_x), float(y)),
            mode="none",
            hovertext=hover_text,
            hoverinfo="text",
            hoveron="points",
            name=name,
            legendgroup=group,
            showlegend=False,
        ),
    ]


def _step_names(steps: pd.DataFrame) -> np.ndarray:
    """ "step 5 · decode (request 0, token 5)": the step's number as the tables and charts use it, then its kind."""
    number = pd.Series(steps.index, index=steps.index).astype(str)
    if "first_step" in steps:  # blocks of consecutive steps (a very long run's overview)
        number = steps["first_step"].astype(str) + "-" + steps["last_step"].astype(str)
        return ("steps " + number + " · " + steps["kind"].astype(str)).to_numpy()
    label = "step " + number + " · " + steps["kind"].astype(str)
    if "request" in steps and "index" in steps:
        label += " (request " + steps["request"].astype(str) + ", token " + steps["index"].astype(str) + ")"
    return label.to_numpy()


def _step_of(ts: np.ndarray, steps: pd.DataFrame) -> np.ndarray:
    """Row of the step each timestamp falls in, -1 outside steps."""
    if steps.empty:
        return np.full(len(ts), -1)
    starts = steps["start_ns"].to_numpy()
    ends = steps["end_ns"].to_numpy()
    row = np.searchsorted(starts, ts, side="right") - 1
    inside = (row >= 0) & (ts < ends[np.clip(row, 0, None)])
    return np.where(inside, row, -1)


def _phase_traces(
    lanes: LaneSet,
    analysis: Analysis,
    origin: int,
    window: tuple[int, int] | None,
    budget: int = OVERVIEW_SEGMENT_BUDGET,
) -> None:
    steps, gaps = analysis.steps, analysis.gaps
    on_gpu = analysis.summary.on_gpu
    idle = "GPU idle" if on_gpu else "idle (no host op running)"
    span_ns = _span_ns(analysis, window)
    if window is not None:
        lo, hi = window
        steps = steps[(steps["end_ns"] > lo) & (steps["start_ns"] < hi)]
        gaps = gaps[(gaps["end_ns"] > lo) & (gaps["start_ns"] < hi)]
    elif len(steps) > budget:  # the overview of a very long run: the longest steps, like the gaps below
        steps = steps.assign(_span=steps["end_ns"] - steps["start_ns"]).nlargest(budget, "_span").sort_index()
        lanes.note += f"Longest {budget:,} of {len(analysis.steps):,} steps drawn. "
    y = lanes.lane(PHASE_LANE)
    if len(steps) > OVERVIEW_SEGMENT_BUDGET:  # keep the figure bounded: draw consecutive steps as blocks
        steps, blocks = _step_blocks(steps, OVERVIEW_SEGMENT_BUDGET), len(steps)
        lanes.note += f"{blocks:,} steps drawn as {len(steps):,} blocks of consecutive steps. "
    if len(steps):
        hover = np.asarray(step_hover(steps, _step_names(steps), on_gpu), dtype=object)
        for name, (mask, color, first) in _phase_groups(steps["kind"].to_numpy()).items():
            if mask.any():
                part = steps[mask]
                lanes.add_segments(
                    _ms(part["start_ns"], origin),
                    _ms(part["end_ns"], origin),
                    y,
                    hover[mask].tolist(),
                    color,
                    name.removesuffix(ALTERNATE),
                    LANE_WIDTH_PX + 8,
                    hover_points=STEP_HOVER_POINTS,
                    legend=first,
                )
    if len(gaps):
        if len(gaps) > budget:
            gaps = gaps.nlargest(budget, "dur_ns").sort_values("start_ns")
            lanes.note += f"Longest {budget:,} of {len(analysis.gaps):,} gaps drawn. "
        lanes.add_segments(  # a strip under the steps, so that a step stays hoverable wherever it idles
            _ms(gaps["start_ns"], origin),
            _ms(gaps["end_ns"], origin),
            y - GAP_STRIP_OFFSET,
            gap_hover(gaps, idle),
            palette.GAP,
            f"{idle} gap",
            GAP_STRIP_PX,
        )
        longest = labelled_gaps(gaps, span_ns)
        mid = (_ms(longest["start_ns"], origin) + _ms(longest["end_ns"], origin)) / 2
        lanes.traces.append(
            go.Scatter(
                x=mid,
                y=np.full(len(longest), y + 0.45),
                mode="text",
                showlegend=False,
                hoverinfo="skip",
                text=[_duration_label(v) for v in longest["dur_ns"]],
                textfont={"color": palette.GAP, "size": 10},
            )
        )


ALTERNATE = " (alternate)"  # a kind's second shade: drawn under the kind's own legend entry
PHASE_KINDS = (  # (kind, legend entry, its two shades)
    ("prefill", "prefill", palette.PREFILL, palette.PREFILL_ODD),
    ("decode", "decode", palette.DECODE_EVEN, palette.DECODE_ODD),
    ("mixed", "mixed (decode + prefill chunk)", palette.MIXED, palette.MIXED_ODD),
    ("verify", "verify (scores draft tokens)", palette.VERIFY, palette.VERIFY_ODD),
    ("draft", "draft model", palette.DRAFT, palette.DRAFT_ODD),
    (None, "empty / several kinds", palette.OTHER_STEP, palette.OTHER_STEP_ODD),
)


def _phase_groups(kind: np.ndarray) -> dict[str, tuple[np.ndarray, str, bool]]:
    """The phase lane's groups: {name: (steps, colour, whether it has the legend entry)}. Each kind has its colour
    in two shades that its steps alternate, so that two neighbouring steps of one kind never read as one bar; steps
    of any other kind (empty, a block of several kinds) grey."""
    named = [k for k, *_ in PHASE_KINDS if k]
    out = {}
    for k, name, first_shade, second_shade in PHASE_KINDS:
        mask = kind == k if k else ~np.isin(kind, named)
        second = mask & (np.cumsum(mask) % 2 == 0)  # the 2nd, 4th, ... step of the kind
        out[name] = (mask & ~second, first_shade, True)
        out[name + ALTERNATE] = (second, second_shade, not (mask & ~second).any())
    return out


def _step_blocks(steps: pd.DataFrame, budget: int) -> pd.DataFrame:
    """At most `budget` rows: each a run of consecutive steps, kind kept when the whole run shares it."""
    size = -(-len(steps) // budget)
    block = np.arange(len(steps)) // size
    grouped = steps.assign(_block=block, _row=steps.index).groupby("_block", sort=True)
    kinds = grouped["kind"].agg(lambda k: k.iloc[0] if (k == k.iloc[0]).all() else "several kinds")
    return pd.DataFrame(
        {
            "kind": kinds.to_numpy(),
            "first_step": grouped["_row"].min().to_numpy(),
            "last_step": grouped["_row"].max().to_numpy(),
            "request": grouped["request"].first().to_numpy(),
            "index": grouped["index"].first().to_numpy(),
            "start_ns": grouped["start_ns"].min().to_numpy(),
            "end_ns": grouped["end_ns"].max().to_numpy(),
            "kernels": grouped["kernels"].sum().to_numpy(),
            "launches": grouped["launches"].sum().to_numpy(),
        }
    )


def _span_ns(analysis: Analysis, window: tuple[int, int] | None) -> int:
    """The time the figure's x axis spans: the window, else the whole run's steps and busy time."""
    if window is not None:
        return max(window[1] - window[0], 1)
    ends = [int(analysis.steps["end_ns"].max())] if len(analysis.steps) else []
    ends += [int(e.max()) for _, e in analysis.busy_intervals.values() if len(e)]
    return max((max(ends) if ends else 0) - analysis.time_origin_ns, 1)


def labelled_gaps(gaps: pd.DataFrame, span_ns: int, width_px: int = PLOT_WIDTH_PX) -> pd.DataFrame:
    """The gaps that get a written length: the longest first, each only where its label fits inside
    the gap and clear of the labels already placed (the rest show their length on hover)."""
    label_ns = span_ns * LABEL_PX / width_px
    chosen: list[int] = []
    taken: list[tuple[float, float]] = []
    candidates = gaps.nlargest(GAP_LABEL_CANDIDATES, "dur_ns")
    for row, start, end in zip(candidates.index, candidates["start_ns"], candidates["end_ns"], strict=True):
        if end - start < label_ns or len(chosen) >= GAP_LABELS:
            break  # sorted longest first: no shorter gap fits a label either
        mid = (start + end) / 2
        lo, hi = mid - label_ns / 2, mid + label_ns / 2
        if all(hi <= a or lo >= b for a, b in taken):
            chosen.append(row)
            taken.append((lo, hi))
    return gaps.loc[chosen]


def _duration_label(ns: float) -> str:
    return f"{ns / 1e6:.1f} ms" if ns >= 1e6 else f"{ns / 1e3:.0f} us"


def _thin(starts: np.ndarray, ends: np.ndarray, budget: int) -> tuple[np.ndarray, np.ndarray]:
    """Join intervals closer than a pixel-ish threshold until at most `budget` remain (overview only)."""
    if len(starts) <= budget:
        return starts, ends
    span = max(int(ends.max() - starts.min()), 1)
    threshold = span / budget
    keep_break = (starts[1:] - ends[:-1]) > threshold
    first = np.concatenate([[0], np.flatnonzero(keep_break) + 1])
    last = np.concatenate([np.flatnonzero(keep_break), [len(starts) - 1]])
    return starts[first], np.maximum.accumulate(ends)[last]


def overview_lanes(analysis: Analysis, budget: int = OVERVIEW_SEGMENT_BUDGET) -> LaneSet:
    """Step-level lanes for the whole run: phases and gaps, then each device's busy time (budget segments each)."""
    lanes = LaneSet([], [], webgl=False)
    origin = analysis.time_origin_ns
    _phase_traces(lanes, analysis, origin, None, budget)
    for device, (starts, ends) in sorted(analysis.busy_intervals.items()):
        if len(starts) == 0:
            continue
        name = f"GPU {device} busy" if device >= 0 else "host ops busy (CPU trace)"
        if analysis.steps.empty:  # no steps: short kernels over a long capture would draw as hairlines
            lanes.traces += _utilisation_traces(analysis, np.asarray(starts), np.asarray(ends), lanes.lane(name), name)
            continue
        starts, ends = _thin(np.asarray(starts), np.asarray(ends), budget)
        hover = [f"{name}<br>{(e - s) / 1e3:,.1f} us" for s, e in zip(starts, ends, strict=True)]
        lanes.add_segments(_ms(starts, origin), _ms(ends, origin), lanes.lane(name), hover, palette.BUSY, name)
    return lanes


def _utilisation_traces(analysis: Analysis, starts: np.ndarray, ends: np.ndarray, y: int, name: str) -> list:
    """A device's busy time as a utilisation line on its lane (the lane's bottom is idle, its top all busy), over
    the capture (analysis.capture_figures.utilisation); filled down to the lane's bottom."""
    origin = analysis.time_origin_ns
    window = (analysis.summary.capture or {}).get("window_ms") or (int(ends.max()) - origin) / 1e6
    centres, share = utilisation(starts, ends, origin, origin + int(window * 1e6))
    x, base = _ms(centres, origin), y - 0.4
    hover = [
        f"{name} {format_value(100 * v, '%')}<br>at {format_value(t, 'ms')}" for v, t in zip(share, x, strict=True)
    ]
    floor = go.Scatter(x=x, y=np.full(len(x), base), mode="lines", line={"width": 0}, hoverinfo="skip")
    floor.showlegend = False
    line = go.Scatter(
        x=x,
        y=base + 0.8 * share,
        mode="lines",
        line={"color": palette.BUSY, "width": 1.5},
        fill="tonexty",
        name=f"{name} (share of time)",
        hovertext=hover,
        hoverinfo="text",
    )
    return [floor, line]


def _window_events(timeline: Timeline, lo: int, hi: int) -> pd.DataFrame:
    return events_in_range(timeline, lo, hi)  # only the range is read (analysis.event_window)


def detail_lanes(
    timeline: Timeline,
    analysis: Analysis,
    lo: int,
    hi: int,
    origin: int | None = None,
    budget: int = DETAIL_EVENT_BUDGET,
    webgl: bool = True,
) -> LaneSet:
    """Kernel-level lanes for events starting in [lo, hi): GPU streams, then host launch calls.

    A CPU-only trace has no GPU lanes; its host ops get one lane per thread instead.
    Beyond the budget the longest events are kept and the note says so. `webgl=False` draws every lane as SVG
    rectangles, as the overview does (the Analyze page's detail, where a box selection would otherwise redraw
    every WebGL trace: app/timeline_detail.py).
    """
    origin = analysis.time_origin_ns if origin is None else origin
    lanes = LaneSet([], [], webgl=webgl)
    _phase_traces(lanes, analysis, origin, (lo, hi))
    _layer_traces(lanes, analysis, origin, lo, hi)
    ev = _window_events(timeline, lo, hi)
    kind = ev["kind"]
    gpu = ev[kind.isin(GPU_KINDS)]
    host = ev[kind.isin(HOST_LAUNCH_KINDS)]
    if gpu.empty:
        host = ev[kind == "cpu_op"]
    total = len(gpu) + len(host)
    if total > budget:
        share = budget / total
        gpu = gpu.nlargest(int(len(gpu) * share), "dur").sort_values("ts")
        host = host.nlargest(int(len(host) * share), "dur").sort_values("ts")
        lanes.note += f"Longest {len(gpu) + len(host):,} of {total:,} events in this range drawn; narrow it for all. "
    steps = analysis.steps
    step_labels = _step_names(steps) if len(steps) else np.array([], dtype=object)
    for (device, stream), part in gpu.groupby(["device", "stream"], sort=True):
        y = lanes.lane(f"GPU {device} stream {stream}")
        for label, color, mask in (
            ("kernels", palette.KERNEL, part["kind"] == "kernel"),
            ("copies / sets", palette.COPY, part["kind"] != "kernel"),
        ):
            sub = part[mask]
            if len(sub):
                _event_trace(lanes, sub, steps, step_labels, origin, y, color, f"{label} s{stream}", window=ev)
    if gpu.empty:
        for tid, part in host.groupby("tid", sort=True):
            y = lanes.lane(f"host ops (thread {tid})")
            _event_trace(lanes, part, steps, step_labels, origin, y, palette.HOST, f"host ops t{tid}")
    elif len(host):
        y = lanes.lane("host launch calls")
        _event_trace(lanes, host, steps, step_labels, origin, y, palette.HOST, "host launch calls")
    _communication_lane(lanes, gpu if len(gpu) else host, steps, step_labels, origin, ev)
    return lanes


COMM_LANE = "communication (collectives)"


def first_communication_ns(timeline: Timeline, default: int) -> int:
    """Where the trace's first collective starts (ns), `default` when it has none: where a window onto a rank
    whose steps align with no other rank opens."""
    events = timeline.events
    if events.empty:
        return default
    _, category = categorize(events["name"].astype(str))
    ts = events["ts"].to_numpy()[np.asarray(category, dtype=object) == "communication"]
    return int(ts.min()) if len(ts) else default


def _communication_lane(lanes: LaneSet, drawn: pd.DataFrame, steps, step_labels, origin: int, window) -> None:
    """The collectives among the drawn events again on a lane of their own, in the communication colour, so that
    they stand out on a run whose ranks share no aligned step (the categories: one look per distinct name)."""
    if drawn.empty:
        return
    _, category = categorize(drawn["name"].astype(str))
    comm = drawn[np.asarray(category, dtype=object) == "communication"]
    if len(comm):
        y = lanes.lane(COMM_LANE)
        color = palette.CATEGORY["communication"]
        _event_trace(lanes, comm, steps, step_labels, origin, y, color, "collectives", window=window)


def _layer_traces(lanes: LaneSet, analysis: Analysis, origin: int, lo: int, hi: int) -> None:
    """The median decode step as layers: alternating bands, one per repeated block (analysis.layers)."""
    anat = analysis.anatomy
    if anat is None or not anat.layers.layers or anat.median_step is None:
        return
    starts = np.asarray(anat.layers.block_starts_ns, dtype=np.int64)
    ends = np.asarray(anat.layers.block_ends_ns, dtype=np.int64)
    if not len(starts) or ends.max() <= lo or starts.min() >= hi:
        return
    y = lanes.lane(f"{LAYER_LANE} (step {anat.median_step})")
    n = len(starts)
    hover = [
        f"layer {i + 1} of {n}<br>{(e - s) / 1e3:,.1f} us" for i, (s, e) in enumerate(zip(starts, ends, strict=True))
    ]
    hover = np.asarray(hover, dtype=object)
    for parity, color in ((0, palette.LAYER_EVEN), (1, palette.LAYER_ODD)):
        mask = np.arange(n) % 2 == parity
        if mask.any():
            name = "layers" if parity == 0 else "layers (odd)"
            lanes.add_segments(_ms(starts[mask], origin), _ms(ends[mask], origin), y, hover[mask].tolist(), color, name)


def _event_trace(
    lanes: LaneSet,
    events: pd.DataFrame,
    steps: pd.DataFrame,
    step_labels: np.ndarray,
    origin: int,
    y: int,
    color: str,
    name: str,
    window: pd.DataFrame | None = None,
) -> None:
    """One lane's events drawn on lane y (and kept in lanes.drawn); `window`: the range's events, where a GPU
    event's launching call is looked up."""
    ts = events["ts"].to_numpy()
    dur = events["dur"].to_numpy()
    row = _step_of(ts, steps)
    step_text = np.where(row >= 0, step_labels[np.clip(row, 0, None)] if len(step_labels) else "", "outside steps")
    hover = event_hover(events, step_text, origin, window)
    rows = events.index.to_numpy()  # the events' RangeIndex: a label is the row (parsers build it so)
    lanes.add_segments(_ms(ts, origin), _ms(ts + dur, origin), y, hover, color, name, LANE_WIDTH_PX - 4, rows=rows)
    lanes.drawn.append((y, events))


def lanes_figure(lanes: LaneSet, title: str, height: int | None = None, x_title: str = "ms from trace start"):
    fig = go.Figure(lanes.traces)
    n = max(len(lanes.lanes), 1)
    fig.update_layout(
        title={"text": title, "font": {"size": 14}},
        height=height or 170 + 46 * n,
        # room for the lane names up front: Plotly otherwise grows the margin after a first draw and draws again
        margin={"l": 16 + round(LABEL_PX_PER_CHAR * max(map(len, lanes.lanes), default=0)), "r": 10, "t": 40, "b": 70},
        hovermode="closest",
        hoverlabel=HOVERLABEL,
        dragmode="zoom",
        legend={"orientation": "h", "yanchor": "top", "y": -0.08 - 0.3 / n, "xanchor": "left", "x": 0.0},
        uirevision=title,
    )
    fig.update_yaxes(
        tickvals=[-i for i in range(n)], ticktext=lanes.lanes, range=[-(n - 0.4), 0.8], fixedrange=True, showgrid=False
    )
    fig.update_xaxes(showgrid=True, zeroline=False)
    fig.update_layout(title={"text": f"{title} ({x_title})"})
    return fig


OVERVIEW_TITLE = "Whole run: steps, idle gaps and busy time"
EMPTY_TITLE = "Timeline: no trace open yet"


def empty_figure(message: str):
    """The overview's frame before any trace is open: its lanes and time axis, and `message` saying what to do,
    written across the lanes as a text trace. Analyze shows it on its landing page; drawing it is what loads (and
    warms up) the Plotly code the trace's overview uses, in the browser and in the server (views/analyze.py)."""
    lanes = LaneSet([], [PHASE_LANE, "GPU busy", "host launch calls"], webgl=False)
    lanes.traces.append(
        go.Scatter(
            x=[50],
            y=[-(len(lanes.lanes) - 1) / 2],
            mode="text",
            text=[message],
            textfont={"size": 15, "color": palette.OTHER_STEP},
            hoverinfo="skip",
            showlegend=False,
        )
    )
    fig = lanes_figure(lanes, EMPTY_TITLE)
    fig.update_xaxes(range=[0, 100], showticklabels=False)
    return fig


def overview_figure(analysis: Analysis, budget: int = OVERVIEW_SEGMENT_BUDGET):
    lanes = overview_lanes(analysis, budget)
    return lanes_figure(lanes, OVERVIEW_TITLE), lanes.note


def detail_figure(timeline: Timeline, analysis: Analysis, lo: int, hi: int, budget: int = DETAIL_EVENT_BUDGET):
    lanes = detail_lanes(timeline, analysis, lo, hi, budget=budget)
    return lanes_figure(lanes, "Kernel detail for the chosen range"), lanes.note
