"""The request table as people read it (the Analyze page's requests view, its CSV, the HTML report's requests section):
one row per request, times in ms (its arrival from the trace's start, on the timeline's clock), counts as integers,
and <NA> wherever the trace does not say. Only arranges analysis.serving.request_list's rows."""

from __future__ import annotations

import numpy as np
import pandas as pd

from stepscope.analysis.model import Analysis

TTFT_FROM = {"arrival": "arrival (API server)", "first_step": "its first step", "": ""}
COLUMNS = {  # column: (header, help)
    "request": ("request", "numbered first come, first served"),
    "arrival_ms": ("arrival (ms)", "when the API server received it, ms from the trace's start"),
    "queue_ms": ("queued (ms)", "from its arrival to the start of its first step"),
    "ttft_ms": ("TTFT (ms)", "to its first token, from where the next column says"),
    "ttft_from": ("TTFT from", "its arrival where the API server's trace says it, else its first step"),
    "itl_p50_ms": ("ITL p50 (ms)", "between its tokens, median"),
    "itl_p90_ms": ("ITL p90 (ms)", "between its tokens, 90th percentile"),
    "prompt_tokens": ("prompt tokens", "where the engine's annotation states it"),
    "output_tokens": ("output tokens", "where its last step is known"),
    "e2e_ms": ("end to end (ms)", "from its arrival (else its first step) to its last token"),
    "first_step": ("first step", ""),
    "first_token_step": ("first-token step", "the step that ended its prompt"),
    "last_step": ("last step", ""),
    "steps": ("steps", "steps it certainly ran in"),
}


def requests_table(analysis: Analysis) -> pd.DataFrame:
    """One row per request of the analysis (columns: COLUMNS' keys)."""
    table = analysis.requests
    rows = table.rows if table is not None else pd.DataFrame(columns=["request"])
    origin = analysis.time_origin_ns
    out = pd.DataFrame(index=range(len(rows)))
    if not len(rows):
        return pd.DataFrame(columns=list(COLUMNS))
    arrival = rows["arrival_ns"].to_numpy(dtype=np.int64)
    out["request"] = rows["request"].to_numpy(dtype=np.int64)
    out["arrival_ms"] = np.where(arrival >= 0, (arrival - origin) / 1e6, np.nan)
    for column in ("queue_ms", "ttft_ms"):
        out[column] = rows[column].to_numpy(dtype=float)
    out["ttft_from"] = [TTFT_FROM.get(v or "", str(v)) for v in rows["ttft_from"]]
    for column in ("itl_p50_ms", "itl_p90_ms"):
        out[column] = rows[column].to_numpy(dtype=float)
    for column in ("prompt_tokens", "output_tokens"):
        out[column] = _counts(rows[column])
    out["e2e_ms"] = rows["e2e_ms"].to_numpy(dtype=float)
    for column in ("first_step", "first_token_step", "last_step"):
        out[column] = _counts(rows[column]) if column in rows else pd.array([pd.NA] * len(rows), dtype="Int64")
    out["steps"] = [len(s) for s in rows["steps"]]
    return out


def step_composition(analysis: Analysis, step: int) -> dict:
    """What one step held: its kind, sequences, prompt positions and decoding sequences (None where unknown)."""
    row = analysis.steps.iloc[step]

    def count(column: str) -> int | None:
        value = row.get(column)
        return None if value is None or pd.isna(value) else int(value)

    return {
        "kind": str(row["kind"]),
        "sequences": count("batch"),
        "prefill tokens": count("prefill_tokens"),
        "decode tokens": count("decode_sequences"),
        "positions": count("tokens"),
    }


def _counts(values: pd.Series) -> pd.arrays.IntegerArray:
    numbers = pd.to_numeric(values, errors="coerce")
    return pd.array(numbers.where(numbers >= 0), dtype="Int64")
