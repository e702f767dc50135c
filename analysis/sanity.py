"""The last stage of analysis: invariants every answer keeps, whatever the trace held.

Readers and analysis bound what they can, but a trace is hostile input and heuristics meet shapes
nobody foresaw. Rather than let nonsense reach the UI or the JSON contract silently (infinite
tokens/s, busy 1443 %, a step ending before it starts, negative idle), each violation becomes a
warning naming it, and a non-finite or impossible summary number is shown as unknown (None).
Vectorised over steps and gaps; a few checks over the summary's keys.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from .model import Analysis
from .summary import Summary

# Summary figures that are shares of a whole, in percent.
PERCENT_KEYS = ("gpu_busy_pct",)
# Summary figures that are durations, counts or rates: never negative.
NON_NEGATIVE_SUFFIXES = ("_ms", "_us", "_ns", "_per_s", "_steps", "_per_decode_step", "_total", "_pct")


def check_analysis(analysis: Analysis) -> Analysis:
    """The analysis with impossible summary numbers made None and every violation said as a warning."""
    summary, problems = _checked_summary(analysis.summary)
    problems += _step_problems(analysis.steps)
    problems += _gap_problems(analysis.gaps)
    if not problems:
        return analysis
    warnings = (*analysis.segmentation.warnings, *(f"sanity check: {p}" for p in problems))
    return dataclasses.replace(
        analysis, summary=summary, segmentation=dataclasses.replace(analysis.segmentation, warnings=warnings)
    )


def _checked_summary(summary: Summary) -> tuple[Summary, list[str]]:
    changes, problems = {}, []
    for f in dataclasses.fields(summary):
        key, value = f.name, getattr(summary, f.name)
        if isinstance(value, dict):
            bad = [k for k, v in value.items() if _bad_number(v, key)]
            if bad:
                problems.append(f"summary.{key} had {len(bad)} non-finite or negative values (dropped)")
                changes[key] = {k: v for k, v in value.items() if k not in bad} or None
            continue
        if _bad_number(value, key):
            problems.append(f"summary.{key} was {value!r}: shown as unknown")
            changes[key] = None
        elif key in PERCENT_KEYS and isinstance(value, int | float) and value > 100.0 + 1e-6:
            problems.append(f"summary.{key} was {value:.4g}%, above 100%: shown as unknown")
            changes[key] = None
    return (dataclasses.replace(summary, **changes) if changes else summary), problems


def _bad_number(value, key: str) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        return False
    if not math.isfinite(float(value)):
        return True
    return float(value) < 0 and key.endswith(NON_NEGATIVE_SUFFIXES)


def _step_problems(steps: pd.DataFrame) -> list[str]:
    if steps.empty:
        return []
    problems = []
    start, end = steps["start_ns"].to_numpy(), steps["end_ns"].to_numpy()
    _count(problems, end < start, "steps end before they start", steps)
    if "gpu_busy_ns" in steps and "gpu_idle_ns" in steps:
        busy, idle = steps["gpu_busy_ns"].to_numpy(), steps["gpu_idle_ns"].to_numpy()
        _count(problems, idle < 0, "steps have negative GPU idle time", steps)
        _count(problems, busy > np.maximum(end - start, 0), "steps have GPU busy time longer than the step", steps)
        _count(problems, busy < 0, "steps have negative GPU busy time", steps)
    tokens = pd.to_numeric(steps["tokens"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    _count(problems, tokens < 0, "steps have a negative token count", steps)
    return problems


def _gap_problems(gaps: pd.DataFrame) -> list[str]:
    if gaps.empty or "dur_ns" not in gaps:
        return []
    problems: list[str] = []
    _count(problems, gaps["dur_ns"].to_numpy() < 0, "idle gaps have a negative duration", None)
    return problems


def _count(problems: list[str], mask: np.ndarray, what: str, steps: pd.DataFrame | None) -> None:
    n = int(np.count_nonzero(mask))
    if n:
        where = f" (first: step {int(np.flatnonzero(mask)[0])})" if steps is not None else ""
        problems.append(f"{n} {what}{where}")
