"""The overview figure stays bounded whatever the trace size: steps, gaps and busy spans each within a budget.

SYNTHETIC trace (tests/synthetic_traces.py) with more steps than a lowered budget.
"""

from __future__ import annotations

import math

import numpy as np

from stepscope.analysis import analyze
from stepscope.exporters.figures import timeline as timeline_figures
from stepscope.parsers import load_trace
from tests.synthetic_traces import synthetic_generation, write


def _drawn(trace) -> bool:
    """A trace that draws segments: WebGL lines, or the overview's filled rectangles (None between segments)."""
    return trace.mode == "lines" or trace.fill == "toself"


def _segments(fig) -> int:
    return sum(int(np.isnan(np.asarray(t.x, dtype=float)).sum()) for t in fig.data if _drawn(t))


def test_overview_is_bounded_when_steps_exceed_the_budget(tmp_path, monkeypatch):
    trace = write(tmp_path / "trace.json", synthetic_generation(decode_steps=120))
    result = analyze(load_trace(trace))
    steps = len(result.steps)
    assert steps > 100
    full, _ = timeline_figures.overview_figure(result)
    monkeypatch.setattr(timeline_figures, "OVERVIEW_SEGMENT_BUDGET", 25)
    bounded, note = timeline_figures.overview_figure(result)
    phase_segments = sum(
        int(np.isnan(np.asarray(t.x, dtype=float)).sum())
        for t in bounded.data
        if _drawn(t) and t.name in ("prefill", "decode", "empty / several kinds")
    )
    assert phase_segments <= 25
    assert f"{steps:,} steps drawn as" in note
    assert _segments(bounded) < _segments(full)
    # the blocks still cover the whole run: first start and last end unchanged
    xs = np.concatenate([np.asarray(t.x, dtype=float) for t in bounded.data if _drawn(t)])
    xs_full = np.concatenate([np.asarray(t.x, dtype=float) for t in full.data if _drawn(t)])
    assert math.isclose(np.nanmin(xs), np.nanmin(xs_full)) and math.isclose(np.nanmax(xs), np.nanmax(xs_full))


def test_overview_draws_svg_lanes_within_the_budget_and_says_what_it_left_out(tmp_path):
    """The overview (the first chart a trace shows) is SVG: per lane and colour one filled path of rectangles (at
    most `budget`, the longest gaps kept and counted in the note) and a trace of their middles carrying the hover
    text; the kernel detail stays WebGL. Room for the lane names is reserved up front (Plotly would otherwise grow
    the margin after a first draw and draw again)."""
    trace = write(tmp_path / "trace.json", synthetic_generation(decode_steps=150, host_gap_us=30.0))
    result = analyze(load_trace(trace))
    gaps = result.gaps
    budget = 40
    assert len(gaps) > budget
    fig, note = timeline_figures.overview_figure(result, budget)
    assert {t.type for t in fig.data} == {"scatter"}
    fill, hover = [t for t in fig.data if t.name and t.name.endswith("gap")]
    assert fill.fill == "toself" and fill.mode == "none" and hover.mode == "none" and hover.hoverinfo == "text"
    x = np.asarray(fill.x, dtype=float)
    starts, ends = x[0::5], x[1::5]
    assert len(starts) == budget and np.isnan(x[4::5]).all()
    longest_ms = np.sort(gaps["dur_ns"].to_numpy())[-budget:] / 1e6  # the longest, from the analysis' own table
    assert np.allclose(np.sort(ends - starts), longest_ms, atol=1e-6)
    assert np.allclose(np.asarray(hover.x, dtype=float), (starts + ends) / 2)
    assert len(hover.hovertext) == budget and all("us" in text for text in hover.hovertext)
    assert f"Longest {budget:,} of {len(gaps):,} gaps drawn" in note
    for t in fig.data:
        if _drawn(t):
            assert int(np.isnan(np.asarray(t.x, dtype=float)).sum()) <= budget
    lane_names = list(fig.layout.yaxis.ticktext)
    assert fig.layout.margin.l >= 7 * max(len(name) for name in lane_names)
    lo, hi = int(result.steps["start_ns"].iloc[0]), int(result.steps["end_ns"].iloc[3])
    detail, _ = timeline_figures.detail_figure(load_trace(trace), result, lo, hi)
    assert {t.type for t in detail.data if t.mode == "lines"} == {"scattergl"}
