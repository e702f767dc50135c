"""Per-step charts over many steps (SYNTHETIC steps frames built here): lines, not a bar per step, with every step's
value kept; a short run keeps its bars."""

from __future__ import annotations

import numpy as np
import pandas as pd

from stepscope.exporters.figures import step_charts


def _steps(n: int) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    start = np.arange(n, dtype=np.int64) * 100_000
    busy = rng.integers(10_000, 60_000, n)
    lead, tail = rng.integers(0, 5_000, n), rng.integers(0, 5_000, n)
    span = busy + lead + tail + rng.integers(0, 30_000, n)
    kind = np.where(np.arange(n) == 0, "prefill", "decode")
    return pd.DataFrame(
        {
            "kind": kind,
            "start_ns": start,
            "end_ns": start + span,
            "kernels": rng.integers(1, 9, n),
            "launches": rng.integers(1, 9, n),
            "gpu_busy_ns": busy,
            "gpu_idle_ns": span - busy,
            "gpu_lead_ns": lead,
            "gpu_tail_ns": tail,
        }
    )


def _total_drawn(fig) -> np.ndarray:
    return np.sum([np.asarray(t.y, dtype=float) for t in fig.data], axis=0)


def test_many_steps_are_lines_that_keep_every_value():
    steps = _steps(step_charts.LINES_ABOVE_STEPS + 500)
    busy = step_charts.busy_idle_chart(steps)
    assert {t.type for t in busy.data} == {"scatter"} and all(t.stackgroup == "one" for t in busy.data)
    np.testing.assert_allclose(_total_drawn(busy), (steps["end_ns"] - steps["start_ns"]) / 1e6)  # adds up
    counts = step_charts.kernels_launches_chart(steps)
    assert [t.mode for t in counts.data] == ["lines", "lines"]
    np.testing.assert_array_equal(counts.data[0].y, steps["kernels"])
    time_fig = step_charts.step_time_chart(steps)
    by_name = {t.name: t for t in time_fig.data}
    assert by_name["decode"].mode == "lines" and by_name["prefill"].mode == "markers"  # one step: a marker
    assert len(by_name["decode"].x) == len(steps) - 1


def test_a_category_missing_from_some_steps_stacks_zero_there():
    n = step_charts.LINES_ABOVE_STEPS + 10
    rows = [{"step": s, "category": "gemm", "time_ns": 2e6, "kernels": 3} for s in range(n)]
    rows += [{"step": s, "category": "attention", "time_ns": 1e6, "kernels": 1} for s in range(0, n, 2)]
    fig = step_charts.category_chart(pd.DataFrame(rows).astype({"category": "category"}), on_gpu=True)
    totals = _total_drawn(fig)
    np.testing.assert_allclose(totals, np.where(np.arange(n) % 2 == 0, 3.0, 2.0))


def test_a_short_run_keeps_its_bars():
    fig = step_charts.busy_idle_chart(_steps(40))
    assert {t.type for t in fig.data} == {"bar"}


def test_the_batch_chart_names_each_of_its_two_axes():
    """The shared layout titles the main y axis; the prefill-token line's own axis keeps its name."""
    steps = _steps(6).assign(batch=[1, 2, 3, 3, 2, 1], prefill_tokens=[16, 8, 0, 0, 0, 0], decode_sequences=1)
    fig = step_charts.batch_chart(steps)
    assert fig.layout.yaxis.title.text == "sequences"
    assert fig.layout.yaxis2.title.text == "prefill tokens"
    assert fig.layout.xaxis.title.text == "step"
