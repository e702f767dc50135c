"""run.json's content from a run: versions, JSON-safe config, the harness's own timings.

The record type, its reader and writer are contracts.run_record (schema documented in
collectors/README.md; add keys, never rename them).
"""

from __future__ import annotations

import datetime as dt
import math
import platform
import statistics
from typing import Any

import torch

from stepscope.contracts.run_record import SCHEMA, RunRecord


def versions() -> dict[str, str | None]:
    import transformers

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cuda": torch.version.cuda,
    }


def json_safe(value: Any) -> Any:
    """Config dicts hold dtypes, tuples and other oddities; make them plain JSON."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [json_safe(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, torch.dtype):
        return str(value).removeprefix("torch.")
    return str(value)


def timings(
    token_times_ms: list[list[float]],
    profiled_decode_steps: int,
    capped: bool,
    unprofiled_token_times_ms: list[float] | None = None,
) -> dict[str, Any]:
    """Flat lists over all requests in order, plus the same split per request.

    ``unprofiled_token_times_ms``: the last warm-up's token times (request 0, no profiler running), kept
    beside the profiled ones because profiling inflates an eager decode step (every op is recorded).
    """
    per_request = [
        {"request": r, "ttft_ms": times[0] if times else None, "token_times_ms": times, "itl_ms": times[1:]}
        for r, times in enumerate(token_times_ms)
    ]
    ttfts = [p["ttft_ms"] for p in per_request if p["ttft_ms"] is not None]
    return {
        "ttft_ms": statistics.median(ttfts) if ttfts else None,
        "token_times_ms": [t for times in token_times_ms for t in times],
        "itl_ms": [t for times in token_times_ms for t in times[1:]],
        "profiled_decode_steps": profiled_decode_steps,
        "profile_capped": capped,
        "per_request": per_request,
        "unprofiled_ttft_ms": unprofiled_token_times_ms[0] if unprofiled_token_times_ms else None,
        "unprofiled_itl_ms": list(unprofiled_token_times_ms[1:]) if unprofiled_token_times_ms else None,
    }


def build_record(
    spec: dict[str, Any],
    device_type: str,
    device_name: str,
    model_info: dict[str, Any],
    dtype: torch.dtype,
    prompt_len: int,
    timing: dict[str, Any],
    expected_markers: dict[str, int],
) -> RunRecord:
    return RunRecord(
        schema=SCHEMA,
        spec=json_safe(spec),
        versions=versions(),
        device=device_name,
        device_type=device_type,
        model=json_safe(model_info),
        dtype=str(dtype).removeprefix("torch."),
        prompt_len=prompt_len,
        timings=timing,
        markers=expected_markers,
        trace="trace.json.gz",
        created=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        extra=_machine(device_type),
    )


def _machine(device_type: str) -> dict[str, Any]:
    """A CPU run's own roofline figures (collectors/machine_figures.py), measured once here and stored: the
    roofline of this run then gives the same answer on every machine and in every process."""
    if device_type != "cpu":
        return {}
    from .machine_figures import measure_cpu

    return {"machine": measure_cpu()}
