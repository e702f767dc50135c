"""Per-request distributions (issue 41): each request's TTFT and its median inter-token latency, as the share of
requests at or below a value (an empirical CDF), one line per run: a served run's own on Analyze, two runs side by
side on Compare and in the comparison report. The values are the request table's (analysis.serving.request_list)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from . import palette
from .hover import HOVERLABEL

PANELS = (("ttft_ms", "TTFT per request (ms)"), ("itl_p50_ms", "ITL per request, its median (ms)"))
COLORS = (palette.TRACE_A, palette.TRACE_B)


def has_distributions(rows: pd.DataFrame) -> bool:
    """Whether a run has a request with a TTFT or an ITL to draw."""
    return any(_values(rows, column).size for column, _ in PANELS)


def request_distributions(runs: list[tuple[str, pd.DataFrame]]) -> go.Figure:
    """`runs`: (name, request table) pairs, one line each per panel; a run without a value in a panel has none."""
    fig = make_subplots(rows=1, cols=len(PANELS), subplot_titles=[title for _, title in PANELS], horizontal_spacing=0.1)
    for i, (name, rows) in enumerate(runs):
        color = COLORS[i % len(COLORS)]
        for col, (column, title) in enumerate(PANELS, start=1):
            values = np.sort(_values(rows, column))
            if not values.size:
                continue
            share = np.arange(1, values.size + 1) / values.size * 100
            fig.add_trace(
                go.Scatter(
                    x=values,
                    y=share,
                    mode="lines+markers" if values.size <= 50 else "lines",
                    line={"color": color, "shape": "hv"},
                    marker={"size": 5},
                    name=name,
                    legendgroup=name,
                    showlegend=col == 1,
                    hovertemplate=f"{title.split(' (')[0]} %{{x:.3g}} ms: %{{y:.0f}}% of {name}'s requests"
                    "<extra></extra>",
                ),
                row=1,
                col=col,
            )
    fig.update_yaxes(title_text="requests at or below (%)", range=[0, 102], row=1, col=1)
    fig.update_yaxes(range=[0, 102], row=1, col=2)
    fig.update_xaxes(title_text="ms")
    fig.update_layout(
        height=320,
        margin={"l": 60, "r": 10, "t": 40, "b": 40},
        hoverlabel=HOVERLABEL,
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.12, "x": 0.0},
    )
    return fig


def _values(rows: pd.DataFrame, column: str) -> np.ndarray:
    if column not in rows or not len(rows):
        return np.zeros(0)
    values = pd.to_numeric(rows[column], errors="coerce").to_numpy(dtype=float)
    return values[np.isfinite(values)]
