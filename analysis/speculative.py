"""Speculative decoding in figures: verify and draft steps, draft tokens per verify, what was accepted, and ITL
per emitted token stated honestly.

A verify step scores k draft tokens (plus the last accepted one) and emits between 1 and k + 1 tokens per sequence.
Where the trace shows how many were accepted (the target's cache growth, an engine's counters), ITL per emitted
token is the verify cycle's time over the tokens it emitted; where it does not, no single figure is right: the
cycle's time and the range it implies (cycle / (k + 1) if every draft token was kept, the cycle itself if none was)
are given instead, and `acceptance_known` is False.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def speculative_summary(steps: pd.DataFrame, itl: np.ndarray) -> dict | None:
    """summary.speculative (DESIGN.md), None when the trace has no verify and no draft step."""
    if not len(steps):
        return None
    kind = steps["kind"].to_numpy()
    verify, draft = kind == "verify", kind == "draft"
    if not verify.any() and not draft.any():
        return None
    scored = _per_sequence(steps["tokens"], steps["batch"])[verify]
    draft_tokens = float(np.nanmedian(scored) - 1) if np.isfinite(scored).any() else None
    accepted = steps["accepted"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)[verify]
    known = np.isfinite(accepted)
    cycle_ms = itl[verify] / 1e6
    timed = cycle_ms > 0
    out: dict = {
        "verify_steps": int(verify.sum()),
        "draft_steps": int(draft.sum()),
        "draft_tokens_per_verify": draft_tokens,
        "acceptance_known": bool(known.any()),
        "accepted_tokens_per_step": float(np.median(accepted[known])) if known.any() else None,
        "acceptance_rate": None,
        "verify_step_ms": _quantiles(cycle_ms[timed]),
        "itl_ms_per_token": None,
        "itl_ms_range": None,
    }
    if known.any() and draft_tokens:
        out["acceptance_rate"] = float(np.sum(accepted[known]) / (draft_tokens * known.sum()))
    if (known & timed).any():
        out["itl_ms_per_token"] = _quantiles(cycle_ms[known & timed] / (accepted[known & timed] + 1))
    elif timed.any() and draft_tokens is not None:
        p50 = float(np.median(cycle_ms[timed]))
        out["itl_ms_range"] = {"min": p50 / (draft_tokens + 1), "max": p50}
    return out


def speculative_warning(spec: dict | None) -> str | None:
    """The warning when ITL per emitted token cannot be one figure; None when it can (or nothing is speculative)."""
    if not spec or spec["acceptance_known"] or not spec["verify_steps"] or spec["itl_ms_range"] is None:
        return None
    lo, hi = spec["itl_ms_range"]["min"], spec["itl_ms_range"]["max"]
    k = spec["draft_tokens_per_verify"]
    return (
        f"{spec['verify_steps']} verify steps score {k:g} draft token(s) each, and how many were accepted is not in "
        f"the trace: a verify step takes {hi:.2f} ms (median), so ITL per emitted token is between {lo:.2f} ms (all "
        f"accepted) and {hi:.2f} ms (none); the ITL figures count plain decode steps only"
    )


def _per_sequence(tokens: pd.Series, batch: pd.Series) -> np.ndarray:
    t = tokens.astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    b = batch.astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(b > 0, t / b, np.nan)


def _quantiles(values_ms: np.ndarray) -> dict | None:
    if not len(values_ms):
        return None
    return {"p50": float(np.percentile(values_ms, 50)), "p90": float(np.percentile(values_ms, 90))}
