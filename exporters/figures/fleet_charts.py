"""Fleet figures: a metric's distribution across a batch's traces, one box per group (device / model / mode)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from stepscope.analysis.metrics import metric
from ..safe_text import for_plotly

HEIGHT = 320
TICK_CHARS = 28  # a group's name on the axis; the whole name is in the hover


def _tick(name: str) -> str:
    return name if len(name) <= TICK_CHARS else name[: TICK_CHARS // 2 - 1] + "…" + name[-(TICK_CHARS // 2) :]


def distribution(traces: pd.DataFrame, key: str, group_by: str) -> go.Figure:
    """Box + points of one metric over the analysed traces, grouped by a trace column."""
    m = metric(key)
    ok = traces[(traces["status"] == "ok") & traces[key].notna()]
    fig = go.Figure()
    groups = list(ok.groupby(ok[group_by].fillna("?").astype(str), sort=True))
    for group, part in groups:
        fig.add_trace(
            go.Box(
                y=part[key],
                name=for_plotly(_tick(group)),
                boxpoints="all",
                jitter=0.3,
                pointpos=0,
                hovertext=[f"{for_plotly(group[:200])}<br>{for_plotly(p[-120:])}" for p in part["path"].astype(str)],
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
    fig.update_xaxes(automargin=True, tickangle=-30 if len(groups) > 3 else 0)  # long names: slanted, never cut
    return fig
