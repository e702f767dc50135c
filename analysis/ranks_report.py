"""DESIGN.md's multi-rank JSON: ``{"ranks": [per-rank object + "rank"], "run": {...}}``.

Each per-rank object is exactly analysis/report.py's single-trace contract, so a consumer reading one trace
reads each rank the same way; ``run`` adds the cross-rank figures of analysis/ranks.py.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

from ..parsers.limits import ReadLimits
from ..parsers.ranks import RankedRun, load_ranks
from .options import AnalysisOptions
from .ranks import RankRun, analyze_ranks
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
            "findings": [
                {"id": f.id, "severity": f.severity, "title": f.title, "detail": f.detail, "cost_us": f.cost_us}
                for f in result.findings
            ],
        }
    )


def multi_rank_contract(ranked: RankedRun, result: RankRun) -> dict:
    per_rank = []
    for f, timeline, analysis in zip(ranked.files, ranked.timelines, result.analyses, strict=False):
        per_rank.append(
            {**contract(timeline, analysis), "rank": f.rank, "rank_source": f.rank_source, "file": f.path.name}
        )
    return {"ranks": per_rank, "run": run_summary(result)}


def analyze_run_folder(
    source: str | os.PathLike | list,
    options: AnalysisOptions | None = None,
    limits: ReadLimits | None = None,
    reader: Callable | None = None,
) -> dict:
    """``analyze DIR --json`` for a folder, glob or list of rank traces. Raises TraceError (one line) on a bad file.

    `reader`: how one file is read (parsers.load_trace by default; the command line passes the cached reader)."""
    ranked = load_ranks(source, limits, reader) if reader is not None else load_ranks(source, limits)
    return multi_rank_contract(ranked, analyze_ranks(ranked, options))
