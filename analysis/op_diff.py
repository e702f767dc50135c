"""Op by op: which kernels (host ops on a CPU trace) appeared, disappeared or changed count or time between two
traces, by short name, per step of each trace's main kind (analysis.step_figures), as TraceLens's comparison
of two reports does.

Per step, not per trace: two captures of different lengths compare their steps, not their totals. A name's count per
step is the median over the steps (a count, not a fraction: 41 slices in most steps read 41, not a mean of 40.9),
its time per step the mean. A row is a change when its count per step differs or its time per step moved by more
than CHANGE_SHARE and MIN_DELTA_US; rows are ordered by the size of the time change, largest first.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .model import Analysis
from .step_figures import main_steps

CHANGE_SHARE = 0.10
MIN_DELTA_US = 1.0
TOP = 30
OP_COLUMNS = ("name", "category", "status", "a_count", "b_count", "a_us", "b_us", "delta_us")


def per_step_ops(analysis: Analysis) -> tuple[pd.DataFrame, str | None, int]:
    """(one row per short name: category, count and time per step; the main kind; the steps averaged over)."""
    anat, steps = analysis.anatomy, analysis.steps
    empty = pd.DataFrame(columns=["name", "category", "count", "us"])
    if anat is None or not len(steps):
        return empty, None, 0
    outliers = steps["outlier"].to_numpy(dtype=bool) if "outlier" in steps else np.zeros(len(steps), dtype=bool)
    kind, rows = main_steps(steps, outliers)
    if kind is None or not len(rows):
        return empty, None, 0
    work = anat.work
    mine = work[np.isin(work["step"].to_numpy(), rows.index.to_numpy())]
    n = len(rows)
    # grouped on the categorical short names (a million kernels, a few hundred names): strings only for the groups
    frame = pd.DataFrame(
        {
            "name": mine["short"].to_numpy(),
            "category": mine["category"].to_numpy(),
            "count": np.ones(len(mine), dtype=np.int64),  # each row is one kernel, copy or host op
            "us": mine["time_ns"].to_numpy(dtype=float) / 1e3,
        }
    )
    grouped = frame.groupby("name", sort=True, observed=True).agg(
        category=("category", "first"), count=("count", "sum"), us=("us", "sum")
    )
    grouped["count"] = _median_counts(frame["name"], mine["step"].to_numpy(), n).reindex(grouped.index)
    grouped["us"] = grouped["us"] / n
    out = grouped.reset_index()
    return out.assign(name=out["name"].astype(str), category=out["category"].astype(str)), kind, n


def _median_counts(names: pd.Series, step: np.ndarray, n: int) -> pd.Series:
    """Per name, the median of its count over the n steps (a step without it counts 0): one pass over the (name,
    step) pairs, then a loop over the names (a few hundred), never over events."""
    sizes = pd.DataFrame({"name": names.to_numpy(), "step": step}).groupby(["name", "step"], observed=True).size()
    out = {}
    for name, counts in sizes.groupby(level=0, observed=True):
        values = np.sort(counts.to_numpy())
        zeros = n - len(values)  # the steps the name is absent from, first in the sorted order

        def at(rank: int, values=values, zeros=zeros) -> float:
            return 0.0 if rank < zeros else float(values[rank - zeros])

        out[name] = (at((n - 1) // 2) + at(n // 2)) / 2
    return pd.Series(out, dtype=float)


def op_diff(a: Analysis, b: Analysis, top: int = TOP) -> dict:
    """The compare JSON's `op_diff`: {"unit", "a_kind", "b_kind", "a_steps", "b_steps", "rows": [OP_COLUMNS],
    "changed": int (rows that changed, before the cut to `top`)}."""
    ops_a, kind_a, n_a = per_step_ops(a)
    ops_b, kind_b, n_b = per_step_ops(b)
    unit = "kernels" if a.summary.on_gpu or b.summary.on_gpu else "host ops"
    out = {"unit": unit, "a_kind": kind_a, "b_kind": kind_b, "a_steps": n_a, "b_steps": n_b, "rows": [], "changed": 0}
    if not n_a or not n_b:
        return out
    both = compare_rows(ops_a, ops_b)
    changed = both[both["status"] != "same"]
    out["changed"] = len(changed)
    out["rows"] = [_row(r) for r in changed.head(top).itertuples(index=False)]
    return out


def compare_rows(ops_a: pd.DataFrame, ops_b: pd.DataFrame, key: str = "name") -> pd.DataFrame:
    """Every row of two tables (`key`, category, count, us) side by side: key, category, status ("appeared",
    "disappeared", "changed" or "same": a count that differs, or a time moved by more than CHANGE_SHARE and
    MIN_DELTA_US), count_a, count_b, us_a, us_b, delta_us (B - A); largest time change first."""
    both = ops_a.merge(ops_b, on=key, how="outer", suffixes=("_a", "_b"))
    if key != "category":
        both["category"] = both["category_a"].fillna(both["category_b"])
    for col in ("count_a", "count_b", "us_a", "us_b"):
        both[col] = both[col].fillna(0.0)
    delta = both["us_b"] - both["us_a"]
    base = np.maximum(both["us_a"].abs(), both["us_b"].abs())
    moved = (delta.abs() > CHANGE_SHARE * base) & (delta.abs() >= MIN_DELTA_US)
    count_changed = (both["count_a"] - both["count_b"]).abs() > 1e-9
    absent_a = (both["count_a"] == 0) & (both["us_a"] == 0)
    absent_b = (both["count_b"] == 0) & (both["us_b"] == 0)
    status = np.select(
        [absent_a, absent_b, count_changed | moved],
        ["appeared", "disappeared", "changed"],
        default="same",
    )
    both = both.assign(status=status, delta_us=delta)
    both = both.reindex(both["delta_us"].abs().sort_values(ascending=False, kind="stable").index)
    columns = [key, "category", "status", "count_a", "count_b", "us_a", "us_b", "delta_us"]
    return both[list(dict.fromkeys(columns))].reset_index(drop=True)


def _row(r) -> dict:
    return {
        "name": r.name,
        "category": r.category,
        "status": r.status,
        "a_count": _round(r.count_a),
        "b_count": _round(r.count_b),
        "a_us": _round(r.us_a),
        "b_us": _round(r.us_b),
        "delta_us": _round(r.delta_us),
    }


def _round(value: float) -> float:
    value = float(value)
    return round(value, 3) if math.isfinite(value) else 0.0
