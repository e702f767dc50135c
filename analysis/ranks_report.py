"""DESIGN.md's multi-rank JSON: ``{"ranks": [per-rank object + "rank"], "run": {...}}``.

Each per-rank object is exactly analysis/report.py's single-trace contract, so a consumer reading one trace
reads each rank the same way; ``run`` adds the cross-rank figures of analysis/ranks.py.
"""

from __future__ import annotations

import numpy as np

from stepscope.parsers.ranks import RankedRun
from .rank_collectives import summary as collective_summary
from .ranks import RankRun
from .report import _clean, contract


def _percentiles(values: np.ndarray, scale: float) -> dict | None:
    values = values[np.isfinite(values)]
    if not len(values):
        return None
    return {"p50": float(np.percentile(values, 50)) / scale, "p90": float(np.percentile(values, 90)) / scale}


def run_summary(result: RankRun) -> dict:
    """The ``run`` object. Communication shares are over aligned steps, or over each rank's whole trace when
    the run has no steps (a training job)."""
    steps, rs = result.steps, result.rank_steps
    if len(steps):
        comm_pct = 100.0 * rs["comm_ns"].sum() / max(rs["dur_ns"].sum(), 1)
        exposed_pct = 100.0 * rs["exposed_comm_ns"].sum() / max(rs["dur_ns"].sum(), 1)
        slowest = int(steps["slowest_rank"].value_counts().index[0])
    else:
        t = result.totals
        span = max(int(t["span_ns"].sum()), 1) if len(t) else 1
        comm_pct = 100.0 * t["comm_ns"].sum() / span if len(t) else None
        exposed_pct = 100.0 * t["exposed_comm_ns"].sum() / span if len(t) else None
        slowest = None
    return _clean(
        {
            "ranks": len(result.ranks),
            "aligned_steps": len(steps),
            "step_time_ms": _percentiles(steps["step_ns"].to_numpy(float), 1e6) if len(steps) else None,
            "skew_us": _percentiles(steps["skew_ns"].to_numpy(float), 1e3) if len(steps) else None,
            "comm_pct": comm_pct,
            "exposed_comm_pct": exposed_pct,
            "slowest_rank": slowest,
            # additions (keys only ever added)
            "wait_us": _percentiles(rs["wait_ns"].to_numpy(float), 1e3) if len(rs) else None,
            "alignment": result.alignment,
            "same_clock": result.same_clock,
            "clock_note": result.clock_note,
            "skew_basis": "step ends" if result.same_clock else "step durations",
            "warnings": list(result.warnings),
            "collectives": collective_summary(result.collectives) if result.collectives is not None else None,
            "findings": [
                {
                    "id": f.id,
                    "severity": f.severity,
                    "title": f.title,
                    "detail": f.detail,
                    "cost_us": f.cost_us,
                    "saving_us": f.saving_us,
                }
                for f in result.findings
            ],
        }
    )


def multi_rank_contract(ranked: RankedRun, result: RankRun, reports: list[dict] | None = None) -> dict:
    """`reports`: each rank's single-trace contract in the run's order, as the front door built them."""
    if reports is None:
        reports = [contract(t, a) for t, a in zip(ranked.timelines, result.analyses, strict=True)]
    per_rank = [
        {**report, "rank": f.rank, "rank_source": f.rank_source, "file": f.path.name}
        for f, report in zip(ranked.files, reports, strict=True)
    ]
    return {"ranks": per_rank, "run": run_summary(result)}
