"""The overview figure stays bounded whatever the trace size: steps, gaps and busy spans each within a budget.

SYNTHETIC trace (tests/synthetic_traces.py) with more steps than a lowered budget.
"""

from __future__ import annotations

import math

import numpy as np
from stepscope.analysis import analyze
from stepscope.app.figures import timeline as timeline_figures
from stepscope.parsers import load_trace

from tests.synthetic_traces import synthetic_generation, write


def _segments(fig) -> int:
    return sum(int(np.isnan(np.asarray(t.x, dtype=float)).sum()) for t in fig.data if t.mode == "lines")


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
        for t in bounded.data if t.mode == "lines" and t.name in ("prefill", "decode (even)", "decode (odd)",
                                                                  "mixed / empty")
    )
    assert phase_segments <= 25
    assert f"{steps:,} steps drawn as" in note
    assert _segments(bounded) < _segments(full)
    # the blocks still cover the whole run: first start and last end unchanged
    xs = np.concatenate([np.asarray(t.x, dtype=float) for t in bounded.data if t.mode == "lines"])
    xs_full = np.concatenate([np.asarray(t.x, dtype=float) for t in full.data if t.mode == "lines"])
    assert math.isclose(np.nanmin(xs), np.nanmin(xs_full)) and math.isclose(np.nanmax(xs), np.nanmax(xs_full))
