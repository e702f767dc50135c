"""Figures for two traces side by side: ITL and per-step counts overlaid, one decode step of each."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from stepscope.analysis.number_format import convert
from ..safe_text import for_plotly
from . import palette
from .timeline import detail_lanes

if TYPE_CHECKING:  # only .name, .timeline and .analysis are read: the HTML report passes its own records
    from stepscope.analysis.front_door import Opened as LoadedTrace

COLORS = (palette.TRACE_A, palette.TRACE_B)


def _decode(loaded: LoadedTrace) -> pd.DataFrame:
    steps = loaded.analysis.steps
    return steps[steps["kind"] == "decode"].reset_index(drop=True)


def itl_overlay(a: LoadedTrace, b: LoadedTrace) -> go.Figure:
    fig = go.Figure()
    for loaded, color in zip((a, b), COLORS, strict=True):
        decode = _decode(loaded)
        itl = decode["itl_ns"].where(decode["itl_ns"] >= 0) / 1e6
        fig.add_trace(
            go.Scatter(
                x=np.arange(1, len(decode) + 1),
                y=itl,
                mode="lines+markers",
                name=for_plotly(str(loaded.name)[:80]),
                line={"color": color},
            )
        )
    fig.update_layout(
        title={"text": "Inter-token latency per decode step", "font": {"size": 14}},
        height=320,
        margin={"l": 10, "r": 10, "t": 40, "b": 30},
        legend={"orientation": "h", "y": -0.2},
    )
    fig.update_yaxes(title="ms", rangemode="tozero")
    fig.update_xaxes(title="decode step")
    return fig


def per_step_overlay(a: LoadedTrace, b: LoadedTrace) -> go.Figure:
    """Kernels, launches and GPU idle per decode step, one small chart each (host ops and idle on CPU traces, and no
    launches chart: a CPU trace launches nothing, its chart would be a flat zero)."""
    on_gpu = a.analysis.summary.on_gpu or b.analysis.summary.on_gpu
    columns = (
        ("kernels", "kernels" if on_gpu else "host ops", 1),
        *((("launches", "launches", 1),) if on_gpu else ()),
        ("gpu_idle_ns", "GPU idle (ms)" if on_gpu else "idle, no op running (ms)", 1e6),
    )
    fig = make_subplots(rows=1, cols=len(columns), subplot_titles=[title for _, title, _ in columns])
    for loaded, color in zip((a, b), COLORS, strict=True):
        decode = _decode(loaded)
        x = np.arange(1, len(decode) + 1)
        for col, (column, _, scale) in enumerate(columns, start=1):
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=decode[column] / scale,
                    mode="lines+markers",
                    name=for_plotly(str(loaded.name)[:80]),
                    line={"color": color},
                    showlegend=col == 1,
                    legendgroup=loaded.name,
                ),
                1,
                col,
            )
    fig.update_layout(height=300, margin={"l": 10, "r": 10, "t": 40, "b": 30}, legend={"orientation": "h", "y": -0.25})
    fig.update_yaxes(rangemode="tozero")
    return fig


def representative_decode_step(loaded: LoadedTrace) -> pd.Series | None:
    """The decode step whose span is the median one: typical, not the fastest or the slowest."""
    decode = _decode(loaded)
    if decode.empty:
        return None
    span = decode["end_ns"] - decode["start_ns"]
    return decode.iloc[int((span - span.median()).abs().to_numpy().argmin())]


def one_step_each(a: LoadedTrace, b: LoadedTrace) -> go.Figure | None:
    """One typical decode step of each trace, both from their own step start, on one shared time axis (us)."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12, subplot_titles=[a.name, b.name])
    drawn = 0
    for row, loaded in enumerate((a, b), start=1):
        step = representative_decode_step(loaded)
        if step is None:
            continue
        lanes = detail_lanes(
            loaded.timeline, loaded.analysis, int(step["start_ns"]), int(step["end_ns"]), origin=int(step["start_ns"])
        )
        for trace in lanes.traces:
            if trace.x is not None:
                trace.x = np.asarray(trace.x, dtype=float) * 1e3  # ms -> us
            trace.showlegend = False
            fig.add_trace(trace, row, 1)
        n = len(lanes.lanes)
        fig.update_yaxes(
            tickvals=[-i for i in range(n)],
            ticktext=lanes.lanes,
            range=[-(n - 0.4), 0.8],
            fixedrange=True,
            row=row,
            col=1,
        )
        drawn += 1
    if not drawn:
        return None
    fig.update_layout(height=520, margin={"l": 10, "r": 10, "t": 40, "b": 30}, hovermode="closest")
    fig.update_xaxes(title="us from the step's start", row=2, col=1)
    return fig


def category_bars(categories: pd.DataFrame, label_a: str, label_b: str, unit: str = "us") -> go.Figure:
    """Time per category in the median decode step of A and of B, side by side (analysis.compare), in `unit` (a
    time unit: the one the table beside the chart is in)."""
    fig = go.Figure()
    scale = convert(1.0, "us", unit)
    for col, label, color in (("a_us", label_a, palette.TRACE_A), ("b_us", label_b, palette.TRACE_B)):
        fig.add_bar(
            x=categories["category"],
            y=categories[col] * scale,
            name=label,
            marker={"color": color},
            hovertemplate="%{x}<br>%{y:,.4~g} " + unit + "<extra>" + label + "</extra>",
        )
    fig.update_layout(
        title={"text": "Median decode step by category", "font": {"size": 14}},
        height=320,
        barmode="group",
        margin={"l": 10, "r": 10, "t": 40, "b": 30},
        legend={"orientation": "h", "y": -0.2},
    )
    fig.update_yaxes(title=unit)
    return fig
