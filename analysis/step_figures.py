"""Per-step figures of whatever kind of step a trace is made of, not only decode.

A vLLM V1 trace at load is mostly mixed steps (chunked prefill alongside decodes); a one-forward capture is a
single prefill or decode; a speculative run has verify steps. The decode figures (`kernels_per_decode_step`,
ITL, ...) say n/a on those, although every step has a time, tokens, kernels and idle time. These figures describe
the *main* kind: decode when the trace has decode steps, else the first present of mixed, verify, prefill, draft
(then any other kind but empty), so that no card reads n/a where a figure exists under another kind.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:  # analysis.summary imports this module
    from .model import Segmentation
    from .summary import Summary

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
    sequences by one (the `sequences` column where step composition gives it, else `batch`); with neither known its
    tokens are unknown too: never a guessed batch of 1 (DESIGN.md, 2026-12-04)."""
    tokens = pd.to_numeric(steps["tokens"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    column = "sequences" if "sequences" in steps else "batch"
    sequences = pd.to_numeric(steps[column], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    decode = (steps["kind"] == "decode").to_numpy(dtype=bool)
    return np.where(np.isnan(tokens) & decode, sequences, tokens)


# --- where the batch comes from, and what a trace that does not say it gets ------------------------------------

BATCH_SOURCES = {  # segmentation method -> where its steps' batch was read
    "stepscope-markers": "Stepscope's step markers",
    "vllm-annotations": "the engine's step annotations",
    "sglang-annotations": "the engine's step annotations",
    "user-regex": "your step annotations",
}
TYPED = "typed (--batch, or the app's Analysis settings)"


def typed_batch(bounds: pd.DataFrame, batch: int | None) -> tuple[pd.DataFrame, bool]:
    """The step boundaries with a typed batch where the trace says none: each step's sequences, and a decode step's
    tokens (one per sequence). (bounds, whether the typed batch was used)."""
    if batch is None or not len(bounds):
        return bounds, False
    unknown = bounds["batch"].isna().to_numpy(dtype=bool)
    if not unknown.any():
        return bounds, False
    out = bounds.copy()
    out.loc[unknown, "batch"] = batch
    decode = unknown & (out["kind"] == "decode").to_numpy(dtype=bool) & out["tokens"].isna().to_numpy(dtype=bool)
    out.loc[decode, "tokens"] = batch
    return out, True


def batch_source(steps: pd.DataFrame, method: str, typed: bool) -> str | None:
    """Where the main kind's sequences per step come from, in words; None when the trace does not say."""
    kind = main_kind(steps)
    if kind is None:
        return None
    rows = steps[(steps["kind"] == kind).to_numpy(dtype=bool)]
    if not rows["batch"].notna().any():
        return None
    if typed:
        return TYPED
    return BATCH_SOURCES.get(method, "the input shapes the trace recorded (record_shapes)")


def with_batch_source(
    summary: Summary, segmentation: Segmentation, steps: pd.DataFrame, typed: bool
) -> tuple[Summary, Segmentation]:
    """The summary with where its batch came from, and the segmentation with a warning when the main kind's tokens
    per step are unknown (so the per-token figures are null, never a guess)."""
    summary = replace(summary, batch_source=batch_source(steps, segmentation.method, typed))
    reason = unknown_tokens_reason(summary.step_kind, summary.tokens_per_step)
    if reason:
        segmentation = replace(segmentation, warnings=(*segmentation.warnings, reason))
    return summary, segmentation


def unknown_tokens_reason(summary_kind: str | None, tokens_per_step: float | None) -> str | None:
    """The warning when the main kind's tokens per step are unknown, naming what is unknown and what would make it
    known; None when they are known (or there are no steps)."""
    if summary_kind is None or tokens_per_step is not None:
        return None
    if summary_kind in ("decode", "draft"):
        what = f"the batch (sequences per {summary_kind} step) is unknown"
        fix = (
            "record with record_shapes=True, use the engine's step annotations, or type the batch (--batch, the "
            "app's Analysis settings)"
        )
    else:
        what = f"how many tokens each {summary_kind} step processes is unknown"
        fix = "record with record_shapes=True or use the engine's step annotations"
    return (
        f"{what}: no input shapes and no engine annotation say it, so tokens per step, tokens/s and decode "
        f"tokens/s are null; to know it, {fix}"
    )


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
