"""Requests as objects and the figures over them (issue 38): the request table of any trace, TTFT's distribution
over requests, ITL pooled over every inter-token interval of every request, and the steps of unknown kind.

A served run (analysis.serving) gets its table from the requests the ledger followed, and its ITL from each step
that gave decoding sequences a token: every one of them waited the time from the step before's token to this one's
(a mixed step's decoders included: what a prompt chunk beside them costs them). Any other trace keeps its steps'
request numbers and today's figures; the single-request case's numbers do not change.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from .composition import request_count
from .serving import Served
from .serving.ledger import UNKNOWN
from .serving.request_list import RequestTable, generate_rows, served_rows, ttft_distribution
from .summary import Summary


def request_table(steps: pd.DataFrame, summary: Summary, served: Served | None) -> RequestTable:
    if served is None:
        rows = generate_rows(steps, summary.ttft_ms_by_request)
        return RequestTable(request_count(steps), rows)
    rows = served_rows(steps, served.followed, served.front_end)
    return RequestTable(served.requests, rows, served.reason, served.evidence)


def served_itl_ns(steps: pd.DataFrame, served: Served) -> np.ndarray:
    """Per step, the wait of its decoding sequences: from the token of the step before (in the same run of steps) to
    this one's; -1 for a step that gives no decoding sequence a token, or whose kind is unknown (a verify's wait is
    its cycle: analysis.speculative reads it)."""
    itl = np.full(len(steps), -1, dtype=np.int64)
    if len(steps) < 2:
        return itl
    token = steps["token_ns"].to_numpy()
    chain = steps["chain"].to_numpy()
    decoding = np.isin(steps["kind"].to_numpy(dtype=object), ("decode", "mixed", "verify"))
    same = np.append(False, chain[1:] == chain[:-1])
    gap = np.append(0, np.diff(token))
    return np.where(same & decoding & (gap > 0), gap, itl)


def with_request_figures(
    summary: Summary,
    requests: RequestTable,
    steps: pd.DataFrame,
    itl: np.ndarray,
    outliers: np.ndarray,
    served: Served | None,
) -> Summary:
    """The summary with TTFT's distribution and the unknown steps; for a served run, TTFT over its requests and ITL
    pooled over its decoding sequences."""
    kind = steps["kind"].to_numpy(dtype=object) if len(steps) else np.zeros(0, dtype=object)
    unknown = int((kind == "unknown").sum())
    summary = replace(
        summary, ttft_ms_dist=ttft_distribution(requests.rows), unknown_steps=unknown, requests=requests.count
    )
    if served is None:
        return summary
    ttft = requests.rows["ttft_ms"].to_numpy(dtype=float) if len(requests.rows) else np.zeros(0)
    known = np.isfinite(ttft)
    by_request = dict(zip(requests.rows["request"].to_numpy()[known].tolist(), ttft[known].tolist(), strict=True))
    summary = replace(
        summary,
        ttft_ms=float(np.median(ttft[known])) if known.any() else None,
        ttft_ms_by_request=by_request,
        itl_ms=pooled_itl_ms(itl, outliers, served.counts["D"].to_numpy(), kind),
        served=True,
    )
    return with_run_figures(summary, requests, steps, served)


def with_run_figures(summary: Summary, requests: RequestTable, steps: pd.DataFrame, served: Served) -> Summary:
    """A served run's tokens over the run: every step's decoding sequences (one token each) and the prompts it
    completed (their first token), over the time from the first step's start to the last one's end; and why each
    headline figure that is null is null, with what would tell it next time."""
    counts = served.counts
    given = counts["D"].to_numpy() + counts["C"].to_numpy()
    known = (counts["D"].to_numpy() != UNKNOWN) & (counts["C"].to_numpy() != UNKNOWN)
    span_s = float(steps["end_ns"].max() - steps["start_ns"].min()) / 1e9 if len(steps) else 0.0
    tokens = int(given.sum()) if len(given) and known.all() else None
    reasons: dict[str, str] = {}
    if requests.count is None:
        reasons["requests"] = requests.reason or "requests unknown"
    if tokens is None:
        reasons["run_tokens_per_s"] = (
            f"tokens unknown: {int((~known).sum())} step(s) whose decoding sequences or completed prompts the trace "
            "does not say; record_shapes=True, the engine's annotations or the API server's trace beside the "
            "worker's would"
        )
    if summary.ttft_ms is None:
        reasons["ttft_ms"] = TTFT_UNKNOWN
    if (summary.ttft_ms_dist or {}).get("p90") is None:  # its card says "unknown" with why, as p50's does
        reasons["ttft_p90_ms"] = TTFT_UNKNOWN
    if summary.itl_ms is None:
        reasons["itl_p50_ms"] = reasons["itl_p90_ms"] = (
            "ITL unknown: no step's decoding sequences are known; record_shapes=True or the engine's annotations would"
        )
    return replace(
        summary,
        output_tokens=tokens,
        run_tokens_per_s=tokens / span_s if tokens is not None and span_s > 0 else None,
        unknown_reasons=reasons,
    )


def pooled_itl_ms(
    itl: np.ndarray, outliers: np.ndarray, decoders: np.ndarray, kind: np.ndarray
) -> dict[str, float] | None:
    """ITL over every decoding sequence's intervals: each decode or mixed step's wait counted once per sequence it gave
    a token (ITL outliers left out, as for one request; a verify's tokens per wait are analysis.speculative's);
    None without such a step."""
    use = (itl > 0) & ~outliers & (decoders != UNKNOWN) & (decoders > 0) & np.isin(kind, ("decode", "mixed"))
    if not use.any():
        return None
    values = np.repeat(itl[use] / 1e6, decoders[use])
    return {
        "p50": float(np.percentile(values, 50)),
        "p90": float(np.percentile(values, 90)),
        "p99": float(np.percentile(values, 99)),
        "mean": float(values.mean()),
        "max": float(values.max()),
    }


def served_warnings(summary: Summary, steps: pd.DataFrame, served: Served | None) -> list[str]:
    """Why a served run's TTFT is null while it holds prompt chunks: no request's first token is known."""
    if served is None or summary.ttft_ms is not None or not len(steps):
        return []
    if not np.isin(steps["kind"].to_numpy(dtype=object), ("prefill", "mixed", "unknown")).any():
        return []
    return [TTFT_UNKNOWN]


TTFT_UNKNOWN = (
    "TTFT unknown: the trace does not say in which step any request's prompt ended (a prompt longer than the token "
    "budget runs over several steps); the API server's trace beside the worker's, or the worker's python frames with "
    "record_shapes, would"
)


def step_requests(rows: pd.DataFrame, step: int) -> list[int]:
    """The requests certainly served in `step` (those whose steps hold it), oldest first."""
    if not len(rows):
        return []
    return [int(r) for r, steps in zip(rows["request"], rows["steps"], strict=True) if step in steps]
