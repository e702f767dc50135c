"""Figure helpers of the anatomy views: gap labels that never overlap, the layer lane, the tables in ms."""

from __future__ import annotations

import numpy as np
import pandas as pd

from stepscope.analysis import analyze
from stepscope.app import tables
from stepscope.exporters.figures import timeline
from stepscope.parsers import load_trace
from tests.conftest import ROOT

EAGER = ROOT / "sample_traces" / "cpu_tiny-llama_eager" / "trace.json.gz"


def _gaps(starts_ns, durs_ns) -> pd.DataFrame:
    starts = np.asarray(starts_ns, dtype=np.int64)
    durs = np.asarray(durs_ns, dtype=np.int64)
    return pd.DataFrame({"start_ns": starts, "end_ns": starts + durs, "dur_ns": durs})


def test_gap_labels_fit_inside_their_gap_and_never_overlap():
    # a 1,100 us wide view at 1,100 px: 1 us per pixel, a label needs LABEL_PX (44) us
    span = 1_100_000
    gaps = _gaps([0, 50_000, 60_000, 300_000, 600_000, 900_000], [45_000, 60_000, 50_000, 10_000, 100_000, 44_000])
    chosen = timeline.labelled_gaps(gaps, span, width_px=1100)
    label_ns = span * timeline.LABEL_PX / 1100
    assert (chosen["dur_ns"] >= label_ns).all()  # the 10 us gap gets no label: it would not fit
    mids = ((chosen["start_ns"] + chosen["end_ns"]) / 2).sort_values().to_numpy()
    assert (np.diff(mids) >= label_ns).all()  # label boxes of equal width, centred: no two overlap
    # the 60 us gap at 50 us and the 50 us one at 60 us overlap as labels: only the longer is written
    assert 50_000 in set(chosen["start_ns"]) and 60_000 not in set(chosen["start_ns"])
    assert set(chosen["start_ns"]) == {0, 50_000, 600_000, 900_000}


def test_at_most_gap_labels_are_written():
    gaps = _gaps(np.arange(100) * 1_000_000, np.full(100, 500_000))
    assert len(timeline.labelled_gaps(gaps, 100_000_000, width_px=100_000)) == timeline.GAP_LABELS


def test_detail_of_the_median_step_has_a_lane_of_alternating_layer_bands():
    result = analyze(load_trace(EAGER))
    anat = result.anatomy
    row = anat.median_step
    lo, hi = int(result.steps["start_ns"].iloc[row]), int(result.steps["end_ns"].iloc[row])
    lanes = timeline.detail_lanes(load_trace(EAGER), result, lo, hi)
    lane = f"layers (step {row})"
    assert lane in lanes.lanes
    bands = [t for t in lanes.traces if t.name in ("layers", "layers (odd)")]
    drawn = sum(int(np.isfinite(np.asarray(t.x, dtype=float)).sum()) // 3 for t in bands)
    assert drawn == anat.layers.layers == 4  # tiny-llama: 4 decoder layers (collectors/presets.py)
    # a window away from the median step draws no layer lane
    first = timeline.detail_lanes(
        load_trace(EAGER), result, int(result.steps["start_ns"].iloc[0]), int(result.steps["end_ns"].iloc[0])
    )
    assert not any(name.startswith("layers") for name in first.lanes)


def test_tables_have_no_nanosecond_columns_and_step_categories_add_up():
    result = analyze(load_trace(EAGER))
    steps = tables.steps_table(result)
    gaps = tables.gaps_table(result)
    for frame in (steps, gaps):
        assert not any(c.endswith("_ns") for c in frame.columns)
    origin = result.time_origin_ns
    assert np.allclose(steps["start_ms"], (result.steps["start_ns"].to_numpy() - origin) / 1e6)
    # each step's category columns add up to the self time of the host ops placed in it
    cat_cols = [
        c
        for c in steps.columns
        if c.endswith("_us")
        and c.removesuffix("_us")
        in {"gemm", "attention", "norm", "elementwise", "rotary", "embedding", "sampling", "framework", "other"}
    ]
    work = result.anatomy.work
    own = work[work["step"] >= 0].groupby("step")["time_ns"].sum() / 1e3
    assert np.allclose(steps.loc[own.index, cat_cols].sum(axis=1), own)
    placed = gaps["step"].notna()
    kinds = result.steps["kind"].to_numpy()[gaps.loc[placed, "step"].astype(int)]
    assert (gaps.loc[placed, "step_kind"] == kinds).all()
