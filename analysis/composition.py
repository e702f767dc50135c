"""Figures of a batch's composition, read once the steps are measured: each request's TTFT in a packed batch, what
co-scheduled prefill chunks cost the decoding sequences, and the speculative-decoding warning.

Step finding (analysis.step_finding.batch_contents) says what each forward holds; this module turns that into
figures. The app, the reports and Compare read them from here.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from .model import Segmentation
from .speculative import speculative_warning
from .summary import Summary

COSTLY_RATIO = 1.5  # mixed steps this many times a decode-only step (median) are worth a finding


def with_batch_figures(
    summary: Summary, segmentation: Segmentation, steps: pd.DataFrame, request_steps: pd.DataFrame | None
) -> tuple[Summary, Segmentation]:
    """The summary with packed-batch TTFTs where step finding followed each request, and the segmentation with the
    warning that ITL per emitted token is a range when a speculative trace does not show what was accepted."""
    if request_steps is not None and len(request_steps) and len(steps):
        ttft = request_ttft_ms(steps, request_steps)
        if ttft:
            summary = replace(summary, ttft_ms=float(np.median(list(ttft.values()))), ttft_ms_by_request=ttft)
    warning = speculative_warning(summary.speculative)
    if warning:
        segmentation = replace(segmentation, warnings=(*segmentation.warnings, warning))
    return summary, segmentation


def request_ttft_ms(steps: pd.DataFrame, request_steps: pd.DataFrame) -> dict[int, float]:
    """Per request of a packed batch: from the start of the step it joined in to the token of the step that ended
    its prompt (a chunked prompt ends in a later step than it joined)."""
    first = request_steps["first_step"].to_numpy()
    token = request_steps["token_step"].to_numpy()
    ok = (first >= 0) & (token < len(steps)) & (token >= first)
    start = steps["start_ns"].to_numpy()[first[ok]]
    end = steps["token_ns"].to_numpy()[token[ok]]
    return dict(zip(request_steps["request"].to_numpy()[ok].tolist(), ((end - start) / 1e6).tolist(), strict=True))


def batching_cost(steps: pd.DataFrame) -> dict | None:
    """Decode-only steps against the steps that also carry a prefill chunk: their median times, the ratio, and how
    long the decoding sequences of a mixed step wait beyond a decode-only step. None without both kinds."""
    if not len(steps):
        return None
    kind = steps["kind"].to_numpy()
    mixed, decode = kind == "mixed", kind == "decode"
    if not mixed.any() or not decode.any():
        return None
    span_ms = (steps["end_ns"] - steps["start_ns"]).to_numpy() / 1e6
    decode_ms, mixed_ms = float(np.median(span_ms[decode])), float(np.median(span_ms[mixed]))
    waiting = steps["decode_sequences"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)[mixed]
    return {
        "mixed_steps": int(mixed.sum()),
        "steps": len(steps),
        "decode_step_ms": decode_ms,
        "mixed_step_ms": mixed_ms,
        "ratio": mixed_ms / decode_ms if decode_ms > 0 else None,
        "decoding_sequences": float(np.median(waiting[np.isfinite(waiting)])) if np.isfinite(waiting).any() else None,
        "wait_ms": mixed_ms - decode_ms,
    }


_COUNTED = object()  # composition_table's default: count the requests from the steps


def composition_table(steps: pd.DataFrame, requests: int | None | object = _COUNTED) -> dict:
    """What the run's batches held, for Compare and the reports: steps by kind, sequences per decode step and
    prefill tokens per prefill-carrying step (medians), requests (`requests`: the analysis's count, None when the
    trace cannot tell; by default counted from the steps)."""
    kind = steps["kind"].to_numpy() if len(steps) else np.array([], dtype=object)
    batch = steps["batch"].astype("Float64").to_numpy(dtype=float, na_value=np.nan) if len(steps) else np.array([])
    prefill = steps["prefill_tokens"].astype("Float64").to_numpy(dtype=float, na_value=np.nan) if len(steps) else batch
    decode_batch = batch[kind == "decode"]
    carrying = prefill[np.isin(kind, ("prefill", "mixed"))]
    return {
        "steps": {
            k: int((kind == k).sum()) for k in ("prefill", "decode", "mixed", "verify", "draft", "empty", "unknown")
        },
        "sequences_per_decode_step": _median(decode_batch),
        "prefill_tokens_per_step": _median(carrying),
        "requests": request_count(steps) if requests is _COUNTED else requests,
    }


def requests_of(analysis) -> int | None:
    """The analysis's request count (issue 38: None where the trace cannot tell), the steps' count for an analysis
    made before requests were counted."""
    table = getattr(analysis, "requests", None)
    return table.count if table is not None else request_count(analysis.steps)


def request_count(steps: pd.DataFrame) -> int:
    """Requests in the trace: those the steps open (a packed batch's joins) or, at least, the distinct request
    numbers (a step serving several requests carries the oldest)."""
    if not len(steps):
        return 0
    opened = int(steps["opens"].sum()) if "opens" in steps else 0
    return max(opened, int(steps["request"].nunique()))


def _median(values: np.ndarray) -> float | None:
    values = values[np.isfinite(values)]
    return float(np.median(values)) if len(values) else None
