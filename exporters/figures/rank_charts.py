"""Figures of a multi-rank run: a rank x step heatmap, per-rank ITL lines, every rank stacked in one window.

Everything drawn comes from analysis/ranks.py's RankRun (its rank_steps frame, each rank's Analysis and
Timeline); these functions only choose marks and colours.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from stepscope.analysis.number_format import format_value
from stepscope.parsers.timeline import Timeline
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
WAIT_COLOR = "#fab005"  # a rank waiting for a peer at a collective (idle gaps are palette.GAP's orange)


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


def ranks_window(
    ranks: tuple[int, ...],
    timelines: tuple[Timeline, ...],
    analyses: tuple,
    window: tuple[float, float],
    offsets: dict[int, float],
    waits: pd.DataFrame,
    title: str,
) -> tuple[go.Figure, str]:
    """Every rank stacked in one window at kernel (host-op) level (exporters/figures/timeline.py's lanes), each
    rank's waits at collectives on a lane under its own. `window`: [lo, hi) ns on the first rank's clock; `offsets`:
    each rank's clock minus the first's (analysis.rank_collectives), so the same moment lines up; `waits`: the
    matched collectives' rows (rank, kind, arrival_ns, wait_ns, last)."""
    lo, hi = int(window[0]), int(window[1])
    combined = tl.LaneSet([], [])
    budget = max(tl.DETAIL_EVENT_BUDGET // max(len(ranks), 1), 500)
    for rank, timeline, analysis in zip(ranks, timelines, analyses, strict=False):
        shift = int(offsets.get(rank, 0.0))
        lanes = tl.detail_lanes(timeline, analysis, lo + shift, hi + shift, origin=lo + shift, budget=budget)
        offset = len(combined.lanes)
        combined.lanes += [f"rank {rank}: {name}" for name in lanes.lanes]
        for trace in lanes.traces:
            trace.y = np.asarray(trace.y, dtype=float) - offset
            trace.name = f"r{rank} {trace.name}"
            trace.legendgroup = f"rank {rank}"
        combined.traces += lanes.traces
        _wait_lane(combined, rank, waits, lo, hi)
        if lanes.note:
            combined.note += f"rank {rank}: {lanes.note}"
    fig = tl.lanes_figure(combined, title, x_title="ms from the window's start")
    fig.update_xaxes(range=[0, (hi - lo) / 1e6])  # the window, not the steps that reach into it
    return fig, combined.note


def _wait_lane(lanes: tl.LaneSet, rank: int, waits: pd.DataFrame, lo: int, hi: int) -> None:
    """From the rank's arrival at each collective to the last rank's: the time it waited for a peer."""
    if waits.empty:
        return
    mine = waits[(waits["rank"] == rank) & (waits["wait_ns"] > 0)]
    mine = mine[(mine["arrival_ns"] < hi) & (mine["arrival_ns"] + mine["wait_ns"] > lo)]
    if mine.empty:
        return
    start = (mine["arrival_ns"].to_numpy(float) - lo) / 1e6
    end = start + mine["wait_ns"].to_numpy(float) / 1e6
    hover = [
        f"rank {rank} waits {format_value(w / 1e3, 'us')} at a {k} for the last rank"
        for w, k in zip(mine["wait_ns"], mine["kind"], strict=True)
    ]
    name = f"rank {rank}: waiting at collectives"
    lanes.add_segments(start, end, lanes.lane(name), hover, WAIT_COLOR, name)
