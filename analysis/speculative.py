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

from .number_format import format_value


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
    sequences = steps["batch"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)[verify]
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
        # added 2026-12-04: the p90 range like itl_ms_range; emitted tokens per second over the verify cycles
        # (acceptance known), else its range (every draft token accepted to none)
        "itl_p90_ms_range": None,
        "tokens_per_s": None,
        "tokens_per_s_range": None,
    }
    if known.any() and draft_tokens:
        out["acceptance_rate"] = float(np.sum(accepted[known]) / (draft_tokens * known.sum()))
    if (known & timed).any():
        out["itl_ms_per_token"] = _quantiles(cycle_ms[known & timed] / (accepted[known & timed] + 1))
    elif timed.any() and draft_tokens is not None:
        p50, p90 = (float(np.percentile(cycle_ms[timed], q)) for q in (50, 90))
        out["itl_ms_range"] = {"min": p50 / (draft_tokens + 1), "max": p50}
        out["itl_p90_ms_range"] = {"min": p90 / (draft_tokens + 1), "max": p90}
    out.update(_emitted_rate(cycle_ms, timed, sequences, accepted, draft_tokens))
    return out


def _emitted_rate(cycle_ms, timed, sequences, accepted, draft_tokens) -> dict:
    """Emitted tokens per second over the verify cycles whose sequences are known: exact where every timed cycle
    says what it accepted, else from none accepted (one token per sequence) to all (draft tokens + 1)."""
    counted = timed & np.isfinite(sequences)
    seconds = float(cycle_ms[counted].sum()) / 1e3
    if not counted.any() or seconds <= 0:
        return {}
    if np.isfinite(accepted[counted]).all():
        return {"tokens_per_s": float((sequences[counted] * (accepted[counted] + 1)).sum() / seconds)}
    if draft_tokens is None:
        return {}
    least = float(sequences[counted].sum()) / seconds
    return {"tokens_per_s_range": {"min": least, "max": least * (draft_tokens + 1)}}


def speculative_warning(spec: dict | None) -> str | None:
    """The warning when ITL per emitted token cannot be one figure; None when it can (or nothing is speculative)."""
    if not spec or spec["acceptance_known"] or not spec["verify_steps"] or spec["itl_ms_range"] is None:
        return None
    lo, hi = spec["itl_ms_range"]["min"], spec["itl_ms_range"]["max"]
    k = spec["draft_tokens_per_verify"]
    return (
        f"{spec['verify_steps']} verify steps score {k:g} draft token(s) each, and how many were accepted is not in "
        f"the trace: a verify cycle takes {format_value(hi, 'ms')} (median), so ITL per emitted token is between "
        f"{format_value(lo, 'ms')} (all accepted) and {format_value(hi, 'ms')} (none), and tokens/s a range too; the "
        "ITL figures count plain decode steps only"
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
