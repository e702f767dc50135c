"""Per-step figures of whatever kind of step a trace is made of, not only decode.

A vLLM V1 trace at load is mostly mixed steps (chunked prefill alongside decodes); a one-forward capture is a
single prefill or decode; a speculative run has verify steps. The decode figures (`kernels_per_decode_step`,
ITL, ...) say n/a on those, although every step has a time, tokens, kernels and idle time. These figures describe
the *main* kind: decode when the trace has decode steps, else the first present of mixed, verify, prefill, draft
(then any other kind but empty), so that no card reads n/a where a figure exists under another kind.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

MAIN_KIND_ORDER = ("decode", "mixed", "verify", "prefill", "draft")


def main_kind(steps: pd.DataFrame) -> str | None:
    """The kind the per-step figures describe (see the module docstring); None without steps."""
    if not len(steps):
        return None
    present = set(steps["kind"].astype(str))
    for kind in MAIN_KIND_ORDER:
        if kind in present:
            return kind
    others = sorted(present - {"empty", "unknown"})  # a kind the trace does not decide describes nothing
    return others[0] if others else None


def main_steps(steps: pd.DataFrame, outliers: np.ndarray) -> tuple[str | None, pd.DataFrame]:
    """(main kind, its steps with ITL outliers left out, unless that leaves none)."""
    kind = main_kind(steps)
    if kind is None:
        return None, steps.iloc[:0]
    of_kind = (steps["kind"] == kind).to_numpy(dtype=bool)
    kept = of_kind & ~np.asarray(outliers, dtype=bool)
    return kind, steps[kept if kept.any() else of_kind]


def step_tokens(steps: pd.DataFrame) -> np.ndarray:
    """New positions per step as floats, NaN when unknown. A decode step with no count advances each of its
    sequences by one (the `sequences` column where step composition gives it, else `batch`; 1 when neither)."""
    tokens = pd.to_numeric(steps["tokens"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    column = "sequences" if "sequences" in steps else "batch"
    sequences = pd.to_numeric(steps[column], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    decode = (steps["kind"] == "decode").to_numpy(dtype=bool)
    fill = np.where(np.isnan(sequences), 1.0, sequences)
    return np.where(np.isnan(tokens) & decode, fill, tokens)


def step_figures(steps: pd.DataFrame, outliers: np.ndarray) -> dict:
    """The Summary's per-step fields (analysis.summary): medians over the main kind's steps, tokens/s as all
    their tokens over all their time."""
    kind, rows = main_steps(steps, outliers)
    if kind is None or not len(rows):
        return {"step_kind": None}
    span = (rows["end_ns"] - rows["start_ns"]).to_numpy(dtype=float)
    tokens = step_tokens(rows)
    known = ~np.isnan(tokens)
    seconds = span[known].sum() / 1e9

    def median_us(column: str) -> float | None:
        return float(rows[column].median() / 1e3) if column in rows else None

    return {
        "step_kind": kind,
        "steps_of_kind": int((steps["kind"] == kind).sum()),
        "step_ms": float(np.median(span) / 1e6),
        "tokens_per_step": float(np.median(tokens[known])) if known.any() else None,
        "tokens_per_s": float(tokens[known].sum() / seconds) if known.any() and seconds > 0 else None,
        "kernels_per_step": float(rows["kernels"].median()),
        "launches_per_step": float(rows["launches"].median()),
        "gpu_idle_per_step_us": median_us("gpu_idle_ns"),
        "gpu_lead_per_step_us": median_us("gpu_lead_ns"),
        "gpu_tail_per_step_us": median_us("gpu_tail_ns"),
    }
