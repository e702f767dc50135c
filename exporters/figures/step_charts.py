"""Per-step bar charts and the gap histogram, drawn straight from the steps and gaps frames."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from . import palette
from .hover import HOVERLABEL

CHART_HEIGHT = 300
GAP_LENGTH_BINS_US = (0, 10, 100, 1_000, 10_000, 100_000, np.inf)
GAP_LENGTH_LABELS = ("<10 us", "10-100 us", "0.1-1 ms", "1-10 ms", "10-100 ms", ">100 ms")


LEGEND_BELOW = {"orientation": "h", "yanchor": "top", "y": -0.3, "xanchor": "left", "x": 0.0}
# Above this many steps a per-step chart draws each series as one step-shaped line (every step's value, exactly)
# instead of a bar per step: bars are below a pixel wide there, and the browser draws each as its own SVG shape
# (8,500 steps, 77k bars over the four charts: 45 s in headless Chromium before the rest of the page appeared).
LINES_ABOVE_STEPS = 1000


def _layout(fig: go.Figure, title: str, y_title: str) -> go.Figure:
    """Title, axes and a legend under the x axis' title (never over it); a run of few steps gets a tick per step
    (a single step's axis is that step, not -0.5 to 0.5). `y_title` names the main y axis only: a second one (the
    batch chart's prefill tokens) keeps its own."""
    fig.update_layout(
        title={"text": title, "font": {"size": 14}},
        height=CHART_HEIGHT,
        margin={"l": 10, "r": 10, "t": 40, "b": 90},
        legend=LEGEND_BELOW,
        barmode="group",
        hoverlabel=HOVERLABEL,
        yaxis_title_text=y_title,
        xaxis_title={"text": "step", "standoff": 6},
    )
    steps = sorted({int(v) for trace in fig.data for v in (trace.x if trace.x is not None else ()) if _is_int(v)})
    if 0 < len(steps) <= 12:
        fig.update_xaxes(tickmode="array", tickvals=steps, ticktext=[str(v) for v in steps])
        if len(steps) <= 3:
            fig.update_xaxes(range=[steps[0] - 1, steps[-1] + 1])
    return fig


def _bars_as_lines(fig: go.Figure, stacked: bool) -> go.Figure:
    """A figure of per-step bars over more than LINES_ABOVE_STEPS steps, its bars redrawn as lines (see there):
    a series over consecutive steps (or any stacked one, a missing step stacking 0) as one line stepped at each
    step, a series over scattered steps (one kind's steps) or coloured per step as small markers; names, colours
    and hover text kept."""
    bars = [t for t in fig.data if t.type == "bar"]
    if not bars or max(len(t.x) if t.x is not None else 0 for t in bars) <= LINES_ABOVE_STEPS:
        return fig
    every = np.unique(np.concatenate([np.asarray(t.x, dtype=float) for t in bars if t.x is not None]))
    drawn = []
    for trace in fig.data:
        if trace.type != "bar":
            drawn.append(trace)
            continue
        x = np.asarray(trace.x if trace.x is not None else (), dtype=float)
        y = np.asarray(trace.y if trace.y is not None else (), dtype=float)
        color = trace.marker.color
        common = {"name": trace.name, "hovertemplate": trace.hovertemplate, "hovertext": trace.hovertext}
        if stacked and len(x) and isinstance(color, str | type(None)):
            where = np.searchsorted(every, x)
            full = np.zeros(len(every))
            full[where] = y
            custom = None
            if trace.customdata is not None:
                custom = np.zeros(len(every))
                custom[where] = np.asarray(trace.customdata, dtype=float)
            line = {"shape": "hv", "width": 1, "color": color}
            stack = {"stackgroup": "one", "customdata": custom}
            drawn.append(go.Scatter(x=every, y=full, mode="lines", line=line, **stack, **common))
        elif len(x) > 1 and bool((np.diff(x) == 1).all()) and isinstance(color, str | type(None)):
            line = {"shape": "hv", "width": 1.5, "color": color}
            drawn.append(go.Scatter(x=x, y=y, mode="lines", line=line, customdata=trace.customdata, **common))
        else:
            marker = {"color": color, "size": 4, "line": trace.marker.line.to_plotly_json()}
            drawn.append(go.Scatter(x=x, y=y, mode="markers", marker=marker, customdata=trace.customdata, **common))
    fig.data = ()
    fig.add_traces(drawn)
    return fig


def finish_layout(fig: go.Figure, title: str, y_title: str) -> go.Figure:
    """The per-step charts' layout for a figure drawn elsewhere (the memory per step): title, legend below, a tick
    per step on a short run."""
    return _layout(fig, title, y_title)


def _is_int(value) -> bool:
    try:
        return float(value).is_integer()
    except (TypeError, ValueError):
        return False


def _step_numbers(steps: pd.DataFrame) -> np.ndarray:
    """x of each bar: the step's row in the analysis (its index), so a thinned frame keeps true positions."""
    return steps.index.to_numpy()


def _kind_colors(steps: pd.DataFrame) -> list[str]:
    return [palette.STEP_KIND.get(k, palette.OTHER_STEP) for k in steps["kind"]]


def has_composition(steps: pd.DataFrame) -> bool:
    """Whether the batch chart has something to show: a step of several sequences, or a mixed, verify or draft
    step (a run of one sequence, prefill then decodes, has one bar height throughout)."""
    if "batch" not in steps or not len(steps):
        return False
    several = bool((steps["batch"].astype("Float64").fillna(0) > 1).any())
    return several or bool(steps["kind"].isin(["mixed", "verify", "draft"]).any())


def batch_chart(steps: pd.DataFrame) -> go.Figure:
    """How the batch changes over the run: sequences per step (bars, by kind's colour) and the prefill tokens a step
    carries (a line on its own axis: a prompt chunk is tens to thousands of tokens, a batch a few sequences)."""
    x = _step_numbers(steps)
    sequences = steps["batch"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    prefill = (
        steps["prefill_tokens"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
        if "prefill_tokens" in steps
        else np.full(len(steps), np.nan)
    )
    decoding = (
        steps["decode_sequences"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
        if "decode_sequences" in steps
        else np.full(len(steps), np.nan)
    )
    hover = [
        f"step {i}: {k}<br>{_count(s)} sequences, {_count(d)} decoding<br>{_count(p)} prefill tokens"
        for i, k, s, d, p in zip(x, steps["kind"], sequences, decoding, prefill, strict=True)
    ]
    fig = go.Figure(
        [
            go.Bar(x=x, y=sequences, name="sequences", marker_color=_kind_colors(steps), hovertext=hover),
            go.Scatter(
                x=x,
                y=prefill,
                name="prefill tokens",
                mode="lines+markers",
                yaxis="y2",
                line={"color": palette.PREFILL_TOKENS, "width": 1.5},
                hoverinfo="skip",
            ),
        ]
    )
    fig.update_layout(yaxis2={"title": "prefill tokens", "overlaying": "y", "side": "right", "rangemode": "tozero"})
    fig = _bars_as_lines(fig, stacked=False)
    return _layout(fig, "Batch per step (bars: sequences, by kind; line: prefill tokens)", "sequences")


def _count(value: float) -> str:
    return "?" if np.isnan(value) else f"{value:.0f}"


def step_time_chart(steps: pd.DataFrame) -> go.Figure:
    """Each step's span in ms, one bar trace per kind (so every colour is in the legend); outliers (left out of the
    ITL statistics) outlined."""
    span_ms = (steps["end_ns"] - steps["start_ns"]) / 1e6
    outlier = steps["outlier"].astype(bool) if "outlier" in steps else pd.Series(False, index=steps.index)
    fig = go.Figure()
    for kind, part in steps.groupby(steps["kind"].astype(str), sort=False):
        fig.add_bar(
            x=_step_numbers(part),
            y=span_ms[part.index],
            name=kind,
            marker={
                "color": palette.STEP_KIND.get(kind, palette.OTHER_STEP),
                "line": {"width": np.where(outlier[part.index], 2.5, 0), "color": "#c92a2a"},
            },
            hovertemplate=f"step %{{x}} · {kind}<br>%{{y:.3r}} ms<extra></extra>",
        )
    if outlier.any():
        fig.add_bar(x=[None], y=[None], name="outlier (outlined)", marker={"color": "#ffffff", "line": {"width": 2.5}})
    fig.update_layout(barmode="overlay")
    return _layout(_bars_as_lines(fig, stacked=False), "Step time", "ms")


def kernels_launches_chart(steps: pd.DataFrame, on_gpu: bool = True) -> go.Figure:
    """Kernels and launch calls per step; on a CPU-only trace host ops alone (it launches nothing)."""
    x = _step_numbers(steps)
    traces = [go.Bar(x=x, y=steps["kernels"], name="kernels" if on_gpu else "host ops", marker_color=palette.KERNEL)]
    if on_gpu:
        traces.append(go.Bar(x=x, y=steps["launches"], name="launches", marker_color=palette.HOST))
    title = "Kernels and launches per step" if on_gpu else "Host ops per step"
    return _layout(_bars_as_lines(go.Figure(traces), stacked=False), title, "count")


def busy_idle_chart(steps: pd.DataFrame, on_gpu: bool = True) -> go.Figure:
    """Each step's span as busy + idle, the idle split into before its first device work (lead), between, and
    after its last (tail): the bars add up to the step time (analysis.steps). On a CPU-only trace: some op running
    against none."""
    x = _step_numbers(steps)
    zero = pd.Series(0, index=steps.index)
    lead = steps.get("gpu_lead_ns", zero)
    tail = steps.get("gpu_tail_ns", zero)
    between = steps["gpu_idle_ns"] - lead - tail
    busy, idle = ("GPU busy", "GPU idle") if on_gpu else ("some op running", "no op running")
    fig = go.Figure(
        [
            go.Bar(x=x, y=steps["gpu_busy_ns"] / 1e6, name=busy, marker_color=palette.BUSY),
            go.Bar(x=x, y=lead / 1e6, name=f"{idle}: before the first", marker_color=palette.IDLE_LEAD),
            go.Bar(x=x, y=between / 1e6, name=f"{idle}: between", marker_color=palette.IDLE),
            go.Bar(x=x, y=tail / 1e6, name=f"{idle}: after the last", marker_color=palette.IDLE_TAIL),
        ]
    )
    fig = _layout(_bars_as_lines(fig, stacked=True), "Busy vs idle per step (adds up to the step time)", "ms")
    fig.update_layout(barmode="stack", height=CHART_HEIGHT + 40, margin={"b": 130})  # its legend takes 2-3 rows
    return fig


def gap_histogram(gaps: pd.DataFrame) -> go.Figure:
    """Gap counts by length bucket, one bar colour per likely cause."""
    buckets = pd.cut(gaps["dur_ns"] / 1e3, GAP_LENGTH_BINS_US, labels=GAP_LENGTH_LABELS, right=False)
    counts = pd.crosstab(buckets, gaps["cause"]).reindex(GAP_LENGTH_LABELS, fill_value=0)
    fig = go.Figure(
        [
            go.Bar(x=list(counts.index), y=counts[cause], name=str(cause), marker_color=palette.GAP_CAUSE.get(cause))
            for cause in counts.columns
        ]
    )
    fig = _layout(fig, "Idle gaps by length and likely cause", "gaps")
    fig.update_layout(barmode="stack")
    fig.update_xaxes(title={"text": "gap length", "standoff": 6}, tickmode="auto")
    return fig


def category_chart(step_categories: pd.DataFrame, on_gpu: bool) -> go.Figure:
    """Each step's kernel (host op) time stacked by category (analysis.anatomy's step_categories)."""
    fig = go.Figure()
    for category, part in step_categories.groupby("category", observed=True, sort=True):
        fig.add_bar(
            x=part["step"],
            y=part["time_ns"] / 1e6,
            name=str(category),
            marker={"color": palette.CATEGORY.get(str(category), palette.OTHER_STEP)},
            customdata=part["kernels"],
            hovertemplate=f"{category}<br>step %{{x}}<br>%{{y:.3f}} ms<br>%{{customdata}} "
            + ("kernels" if on_gpu else "host ops")
            + "<extra></extra>",
        )
    what = "kernel time" if on_gpu else "host op self time"
    fig = _bars_as_lines(fig, stacked=True)
    _layout(fig, f"Per-step {what} by category", "ms")
    fig.update_layout(barmode="stack", height=CHART_HEIGHT + 60)
    return fig
