"""Fleet figures: a metric's distribution across a batch's traces, one box per group (device / model / mode)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from ...analysis.metrics import metric
from ..safe_text import for_plotly

HEIGHT = 320


def distribution(traces: pd.DataFrame, key: str, group_by: str) -> go.Figure:
    """Box + points of one metric over the analysed traces, grouped by a trace column."""
    m = metric(key)
    ok = traces[(traces["status"] == "ok") & traces[key].notna()]
    fig = go.Figure()
    for group, part in ok.groupby(ok[group_by].fillna("?").astype(str), sort=True):
        fig.add_trace(
            go.Box(
                y=part[key],
                name=for_plotly(group)[:60],
                boxpoints="all",
                jitter=0.3,
                pointpos=0,
                hovertext=[for_plotly(p)[-120:] for p in part["path"].astype(str)],
                hoverinfo="y+text",
            )
        )
    unit = f" ({m.unit})" if m.unit else ""
    fig.update_layout(
        title={"text": f"{m.card}{unit} by {group_by}", "font": {"size": 14}},
        height=HEIGHT,
        margin={"l": 10, "r": 10, "t": 40, "b": 30},
        showlegend=False,
    )
    return fig
