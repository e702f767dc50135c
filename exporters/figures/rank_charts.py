"""Figures of a multi-rank run: a rank x step heatmap, per-rank ITL lines, one step's timeline per rank.

Everything drawn comes from analysis/ranks.py's RankRun (its rank_steps frame, each rank's Analysis and
Timeline); these functions only choose marks and colours.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ...parsers.timeline import Timeline
from . import timeline as tl

# heatmap choices: label -> column of RankRun.rank_steps (ns)
HEATMAP_COLUMNS = {
    "step time": "dur_ns",
    "idle (no device work)": "idle_ns",
    "communication": "comm_ns",
    "exposed communication": "exposed_comm_ns",
    "waiting at collectives": "wait_ns",
}
RANK_COLORS = ("#1c7ed6", "#e8590c", "#2b8a3e", "#7b4fbf", "#c2255c", "#f59f00", "#0c8599", "#5c940d")
HEIGHT = 320


def rank_step_heatmap(rank_steps: pd.DataFrame, label: str) -> go.Figure:
    """Rank (rows) x aligned step (columns), coloured by the chosen per-step figure in ms."""
    column = HEATMAP_COLUMNS[label]
    grid = rank_steps.pivot(index="rank", columns="step", values=column) / 1e6
    fig = go.Figure(
        go.Heatmap(
            z=grid.to_numpy(),
            x=grid.columns.to_numpy(),
            y=[f"rank {r}" for r in grid.index],
            colorscale="Viridis",
            colorbar={"title": "ms"},
            hovertemplate="%{y}, step %{x}<br>" + label + ": %{z:.3f} ms<extra></extra>",
        )
    )
    fig.update_layout(
        title={"text": f"{label[:1].upper()}{label[1:]} per rank and step (ms)", "font": {"size": 14}},
        height=max(HEIGHT - 100, 120 + 40 * len(grid)),
        margin={"l": 10, "r": 10, "t": 40, "b": 30},
    )
    fig.update_xaxes(title="aligned step")
    fig.update_yaxes(autorange="reversed")
    return fig


def rank_itl_lines(rank_steps: pd.DataFrame) -> go.Figure:
    """Each rank's decode step durations (its inter-token latency), one line per rank."""
    decode = rank_steps[rank_steps["kind"] == "decode"]
    fig = go.Figure()
    for i, (rank, part) in enumerate(decode.groupby("rank", sort=True)):
        fig.add_trace(
            go.Scatter(
                x=part["step"],
                y=part["dur_ns"] / 1e6,
                mode="lines+markers",
                name=f"rank {rank}",
                line={"color": RANK_COLORS[i % len(RANK_COLORS)]},
            )
        )
    fig.update_layout(
        title={"text": "Inter-token latency per rank (decode steps)", "font": {"size": 14}},
        height=HEIGHT,
        margin={"l": 10, "r": 10, "t": 40, "b": 30},
        legend={"orientation": "h", "y": -0.2},
    )
    fig.update_xaxes(title="aligned step")
    fig.update_yaxes(title="ms")
    return fig


def rank_step_timeline(
    ranks: tuple[int, ...],
    timelines: tuple[Timeline, ...],
    analyses: tuple,
    rank_steps: pd.DataFrame,
    step: int,
    same_clock: bool,
) -> tuple[go.Figure, str]:
    """One aligned step drawn at kernel (host-op) level, one lane group per rank (exporters/figures/timeline.py lanes).

    On one clock every rank shares the time axis (ms from the earliest rank's step start), so skew shows as
    shifted ends; across clocks each rank starts at its own step start.
    """
    rows = rank_steps[rank_steps["step"] == step].set_index("rank")
    combined = tl.LaneSet([], [])
    origin = int(rows["start_ns"].min()) if same_clock and len(rows) else None
    budget = max(tl.DETAIL_EVENT_BUDGET // max(len(ranks), 1), 500)
    for rank, timeline, analysis in zip(ranks, timelines, analyses, strict=False):
        if rank not in rows.index:
            continue
        row = rows.loc[rank]
        if isinstance(row, pd.DataFrame):  # a repeated rank (not one run): the first file's row
            row = row.iloc[0]
        lo, hi = int(row["start_ns"]), int(row["end_ns"])
        lanes = tl.detail_lanes(timeline, analysis, lo, hi, origin=lo if origin is None else origin, budget=budget)
        offset = len(combined.lanes)
        combined.lanes += [f"rank {rank}: {name}" for name in lanes.lanes]
        for trace in lanes.traces:
            trace.y = np.asarray(trace.y, dtype=float) - offset
            trace.name = f"r{rank} {trace.name}"
            trace.legendgroup = f"rank {rank}"
        combined.traces += lanes.traces
        if lanes.note:
            combined.note += f"rank {rank}: {lanes.note}"
    x_title = "ms from the earliest rank's step start" if origin is not None else "ms from each rank's step start"
    return tl.lanes_figure(combined, f"Step {step} on every rank", x_title=x_title), combined.note
