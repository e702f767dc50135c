"""Requests as objects: one row per request with its steps, queueing, TTFT, ITL and end-to-end time, null wherever
the trace does not say them; and the figures over them (TTFT's distribution, ITL pooled over every interval).

Two sources. A continuously batched run followed by the ledger (analysis.serving.identities), with the front end's
arrivals where the API server's trace is there. Any other trace: its steps' own request numbers (one generate() call
or one marked request each), as step finding read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..annotations import engine_batch
from .front_end import FrontEnd
from .identities import Followed
from .ledger import UNKNOWN

REQUEST_COLUMNS = (
    "request",
    "arrival_ns",  # on the trace's clock, -1 unknown
    "first_step",
    "first_token_step",  # the step that ended its prompt and gave its first token, -1 unknown
    "last_step",  # -1 unknown
    "steps",  # list of step rows it certainly ran in
    "prompt_tokens",  # -1 unknown
    "output_tokens",  # -1 unknown
    "queue_ms",  # NaN unknown
    "ttft_ms",
    "ttft_from",  # "arrival" | "first_step" | ""
    "itl_p50_ms",
    "itl_p90_ms",
    "e2e_ms",
)


@dataclass(frozen=True)
class RequestTable:
    """The requests of a trace: how many (None when the trace cannot say, `reason` then says why) and one row per
    request it can tell apart (REQUEST_COLUMNS)."""

    count: int | None
    rows: pd.DataFrame
    reason: str = ""
    evidence: tuple[str, ...] = field(default_factory=tuple)


def empty_rows() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object if c in ("steps", "ttft_from") else float) for c in REQUEST_COLUMNS})


def served_rows(steps: pd.DataFrame, followed: Followed, front_end: FrontEnd | None) -> pd.DataFrame:
    """One row per request followed through a served run, then one per request the front end saw arrive that no step
    served (still queued when the profile stopped)."""
    token = steps["token_ns"].to_numpy()
    start = steps["start_ns"].to_numpy()
    arrivals = _arrivals_for(followed, front_end)
    prompts = _prompt_tokens(steps, followed)
    rows = [_served_row(rid, followed, arrivals[rid], prompts[rid], start, token) for rid in range(len(arrivals))]
    matched = sum(a != UNKNOWN for a in arrivals)
    if front_end is not None:  # arrivals no followed step took: still queued, or after following stopped
        rows += [_waiting_row(len(rows) + k, int(a)) for k, a in enumerate(front_end.arrival_ns[matched:])]
    return pd.DataFrame(rows, columns=list(REQUEST_COLUMNS)) if rows else empty_rows()


def _arrivals_for(followed: Followed, front_end: FrontEnd | None) -> list[int]:
    """The front end's k-th arrival is the k-th request that joined inside the trace (first come, first served);
    requests already running when it began arrived before the front end's profile did."""
    out = [UNKNOWN] * len(followed.first_step)
    if front_end is None:
        return out
    joined = [rid for rid, before in enumerate(followed.before_trace) if not before]
    for k, rid in enumerate(joined[: len(front_end.arrival_ns)]):
        out[rid] = int(front_end.arrival_ns[k])
    return out


def _prompt_tokens(steps: pd.DataFrame, followed: Followed) -> list[int]:
    """A request's prompt length where vLLM's detailed annotation states it: the step that completed its prompt, as
    the only prefilling sequence there, states its sequence length after the step (sk: cached and new positions)."""
    labels = steps["label"].to_numpy(dtype=object)
    out = [UNKNOWN] * len(followed.first_step)
    for rid, t in enumerate(followed.first_token_step):
        if t == UNKNOWN or followed.before_trace[rid]:
            continue
        batch = engine_batch(str(labels[t]))
        if batch is not None and batch.prefill_sequences == 1:
            out[rid] = batch.prefill_kv_tokens
    return out


def _served_row(rid: int, f: Followed, arrival: int, prompt: int, start: np.ndarray, token: np.ndarray) -> dict:
    first, first_token, last = f.first_step[rid], f.first_token_step[rid], f.last_step[rid]
    joined_here = not f.before_trace[rid]
    origin = arrival if arrival != UNKNOWN else (int(start[first]) if joined_here else UNKNOWN)
    emitting = [t for t in f.steps[rid] if first_token != UNKNOWN and t >= first_token]
    intervals = np.diff(token[emitting]) / 1e6 if len(emitting) >= 2 else np.zeros(0)
    return {
        "request": rid,
        "arrival_ns": arrival,
        "first_step": first,
        "first_token_step": first_token,
        "last_step": last,
        "steps": list(f.steps[rid]),
        "prompt_tokens": prompt,
        "output_tokens": last - first_token + 1 if joined_here and UNKNOWN not in (first_token, last) else UNKNOWN,
        "queue_ms": (start[first] - arrival) / 1e6 if arrival != UNKNOWN and joined_here else np.nan,
        "ttft_ms": (token[first_token] - origin) / 1e6 if first_token != UNKNOWN and origin != UNKNOWN else np.nan,
        "ttft_from": _ttft_from(arrival, first_token, origin),
        "itl_p50_ms": float(np.percentile(intervals, 50)) if len(intervals) else np.nan,
        "itl_p90_ms": float(np.percentile(intervals, 90)) if len(intervals) else np.nan,
        "e2e_ms": (token[last] - origin) / 1e6 if last != UNKNOWN and origin != UNKNOWN else np.nan,
    }


def _ttft_from(arrival: int, first_token: int, origin: int) -> str:
    if first_token == UNKNOWN or origin == UNKNOWN:
        return ""
    return "arrival" if arrival != UNKNOWN else "first_step"


def _waiting_row(rid: int, arrival: int) -> dict:
    return {
        "request": rid,
        "arrival_ns": arrival,
        "first_step": UNKNOWN,
        "first_token_step": UNKNOWN,
        "last_step": UNKNOWN,
        "steps": [],
        "prompt_tokens": UNKNOWN,
        "output_tokens": UNKNOWN,
        "queue_ms": np.nan,
        "ttft_ms": np.nan,
        "ttft_from": "",
        "itl_p50_ms": np.nan,
        "itl_p90_ms": np.nan,
        "e2e_ms": np.nan,
    }


def generate_rows(steps: pd.DataFrame, ttft_by_request: dict[int, float]) -> pd.DataFrame:
    """One row per request number of a trace whose steps carry their request (one generate() call, a marked
    request): its steps, TTFT from its first step, ITL between its token-emitting steps; no arrival is known."""
    if not len(steps):
        return empty_rows()
    request = steps["request"].to_numpy()
    kind = steps["kind"].to_numpy(dtype=object)
    token = steps["token_ns"].to_numpy()
    start = steps["start_ns"].to_numpy()
    batch = steps["batch"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    tokens = steps["tokens"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    rows = []
    for rid in pd.unique(request):  # requests are few beside events
        mine = np.flatnonzero(request == rid)
        emitting = mine[kind[mine] != "draft"]
        single = bool(len(mine)) and np.all(batch[mine] == 1) and not np.isin(kind[mine], ("verify", "draft")).any()
        intervals = np.diff(token[emitting]) / 1e6 if len(emitting) >= 2 else np.zeros(0)
        first_is_prefill = kind[mine[0]] == "prefill"
        prompt = int(tokens[mine[0]]) if single and first_is_prefill and tokens[mine[0]] > 0 else UNKNOWN
        rows.append(
            {
                "request": int(rid),
                "arrival_ns": UNKNOWN,
                "first_step": int(mine[0]),
                "first_token_step": int(emitting[0]) if first_is_prefill and len(emitting) else UNKNOWN,
                "last_step": int(mine[-1]),
                "steps": mine.tolist(),
                "prompt_tokens": prompt,
                "output_tokens": len(emitting) if single and first_is_prefill else UNKNOWN,
                "queue_ms": np.nan,
                "ttft_ms": ttft_by_request.get(int(rid), np.nan),
                "ttft_from": "first_step" if int(rid) in ttft_by_request else "",
                "itl_p50_ms": float(np.percentile(intervals, 50)) if len(intervals) else np.nan,
                "itl_p90_ms": float(np.percentile(intervals, 90)) if len(intervals) else np.nan,
                "e2e_ms": (token[mine[-1]] - start[mine[0]]) / 1e6 if first_is_prefill else np.nan,
            }
        )
    return pd.DataFrame(rows, columns=list(REQUEST_COLUMNS))


def ttft_distribution(rows: pd.DataFrame) -> dict[str, float] | None:
    values = rows["ttft_ms"].to_numpy(dtype=float) if len(rows) else np.zeros(0)
    values = values[np.isfinite(values)]
    if not len(values):
        return None
    return {
        "p50": float(np.percentile(values, 50)),
        "p90": float(np.percentile(values, 90)),
        "p99": float(np.percentile(values, 99)),
        "max": float(values.max()),
    }
