"""Memory figures: the memory lane (allocated and reserved over time per device, on the timeline's clock, with the
step boundaries) and each step's memory (allocated at its end and its peak) as a chart.

The lane shares the overview timeline's x axis (ms from the trace's first event), so it reads as a lane under it.
A device with more samples than the budget is drawn as the envelope of each time bucket (its first, lowest, highest
and last total), so a million memory events stay a few thousand points and no peak is lost.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from stepscope.analysis.memory import device_series
from stepscope.analysis.model import Analysis
from stepscope.parsers.timeline import Timeline
from . import palette, step_charts
from .hover import HOVERLABEL

LANE_POINT_BUDGET = 2_500  # buckets per device and figure: about two per pixel column, as the overview
LANE_HEIGHT = 280
MEMORY_LANE_TITLE = "Memory over the run: allocated and reserved per device, with the step boundaries"
ALLOCATED_COLOR, RESERVED_COLOR = "#1c7ed6", "#f59f00"
OTHER_DEVICE_COLORS = ("#2b8a3e", "#c2255c", "#5f3dc4", "#868e96")
_UNITS = ((1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"), (1, "B"))


def byte_unit(largest: float) -> tuple[int, str]:
    """The binary unit a figure's axis is drawn in: GiB from 2 GiB up, and so on down to bytes."""
    for size, name in _UNITS:
        if largest >= 2 * size:
            return size, name
    return 1, "B"


def memory_lane_figure(timeline: Timeline, analysis: Analysis, budget: int = LANE_POINT_BUDGET) -> go.Figure | None:
    """The lane, None when the trace has no memory events. The model's device comes first (analysis.memory)."""
    series = device_series(timeline.memory)
    memory = analysis.summary.memory
    if not series or memory is None:
        return None
    ordered = sorted(series.values(), key=lambda s: s.label != memory.device)
    largest = max(float(np.nanmax(np.append(np.append(s.allocated, s.reserved), 0))) for s in ordered)
    size, unit = byte_unit(largest)
    origin = analysis.time_origin_ns
    fig = go.Figure()
    for i, s in enumerate(ordered):
        main = s.label == memory.device
        color = ALLOCATED_COLOR if main else OTHER_DEVICE_COLORS[(i - 1) % len(OTHER_DEVICE_COLORS)]
        for figure, values, dash in (("allocated", s.allocated, "solid"), ("reserved", s.reserved, "dot")):
            if not np.isfinite(values).any():
                continue
            x, y = _envelope(s.ts, values, budget)
            fig.add_trace(
                go.Scatter(
                    x=(x - origin) / 1e6,
                    y=y / size,
                    mode="lines",
                    line={"color": RESERVED_COLOR if main and figure == "reserved" else color, "dash": dash},
                    line_shape="hv",
                    name=f"{figure} · {s.label}",
                    hovertemplate=f"{figure} · {s.label}<br>%{{y:,.2f}} {unit}<br>%{{x:,.3f}} ms<extra></extra>",
                )
            )
    _step_boundaries(fig, analysis, largest / size)
    fig.update_layout(
        title={"text": MEMORY_LANE_TITLE, "font": {"size": 14}},
        height=LANE_HEIGHT,
        margin={"l": 10, "r": 10, "t": 40, "b": 40},
        legend={"orientation": "h", "y": -0.25},
        hovermode="closest",
        uirevision=MEMORY_LANE_TITLE,
    )
    fig.update_yaxes(title=unit, rangemode="tozero")
    fig.update_xaxes(title="ms from trace start", showgrid=True, zeroline=False)
    return fig


def _envelope(ts: np.ndarray, values: np.ndarray, budget: int) -> tuple[np.ndarray, np.ndarray]:
    """At most about 4 x budget points: per time bucket its first, lowest, highest and last value, in time order."""
    known = np.isfinite(values)
    ts, values = ts[known], values[known]
    if len(ts) <= 4 * budget:
        return ts, values
    edges = np.linspace(ts[0], ts[-1], budget + 1)
    bucket = np.clip(np.searchsorted(edges, ts, side="right") - 1, 0, budget - 1)
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    ends = np.r_[starts[1:], len(ts)] - 1
    low = np.minimum.reduceat(values, starts)
    high = np.maximum.reduceat(values, starts)
    # within a bucket: first, the lower extreme, the higher, last (the order they came in matters less than the span)
    x = np.column_stack([ts[starts], ts[starts], ts[ends], ts[ends]]).ravel()
    y = np.column_stack([values[starts], low, high, values[ends]]).ravel()
    return x, y


def _step_boundaries(fig: go.Figure, analysis: Analysis, top: float, budget: int = LANE_POINT_BUDGET) -> None:
    """One trace of thin vertical lines at each step's start (prefill starts in their own colour)."""
    steps = analysis.steps
    if not len(steps) or len(steps) > budget:
        return
    origin = analysis.time_origin_ns
    for kind, color, name in (("prefill", palette.PREFILL, "prefill starts"), (None, "#adb5bd", "step boundaries")):
        rows = steps[(steps["kind"] == "prefill") if kind else (steps["kind"] != "prefill")]
        if not len(rows):
            continue
        t = (rows["start_ns"].to_numpy() - origin) / 1e6
        x = np.column_stack([t, t, np.full(len(t), np.nan)]).ravel()
        y = np.column_stack([np.zeros(len(t)), np.full(len(t), top * 1.05), np.full(len(t), np.nan)]).ravel()
        fig.add_trace(
            go.Scatter(
                x=x, y=y, mode="lines", line={"color": color, "width": 1}, name=name, hoverinfo="skip", opacity=0.6
            )
        )


def step_memory_chart(analysis: Analysis) -> go.Figure | None:
    """Per step: allocated at its end (bars) and the peak inside it (markers); None without per-step memory."""
    steps = analysis.steps
    if "memory_allocated_end_bytes" not in steps or not steps["memory_allocated_end_bytes"].notna().any():
        return None
    end = steps["memory_allocated_end_bytes"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    peak = steps["memory_peak_bytes"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    size, unit = byte_unit(float(np.nanmax(np.append(peak, 0))))
    colors = {"prefill": palette.PREFILL, "decode": palette.DECODE_EVEN}
    x = steps.index.to_numpy()
    fig = go.Figure(
        [
            go.Bar(
                x=x,
                y=end / size,
                marker={"color": [colors.get(k, palette.OTHER_STEP) for k in steps["kind"]]},
                name="allocated at the step's end",
                hovertemplate=f"step %{{x}}<br>%{{y:,.2f}} {unit} at its end<extra></extra>",
            ),
            go.Scatter(
                x=x,
                y=peak / size,
                mode="markers",
                marker={"color": palette.GAP, "symbol": "line-ew-open", "size": 12},
                name="peak inside the step",
                hovertemplate=f"step %{{x}}<br>peak %{{y:,.2f}} {unit}<extra></extra>",
            ),
        ]
    )
    device = analysis.summary.memory.device if analysis.summary.memory else ""
    fig.update_layout(height=300, hoverlabel=HOVERLABEL)
    fig = step_charts.finish_layout(fig, f"Memory per step ({device}): allocated at its end and its peak", unit)
    fig.update_layout(barmode="overlay")  # the peak markers sit on their step's bar
    fig.update_yaxes(rangemode="tozero")
    return fig
