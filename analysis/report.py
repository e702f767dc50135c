"""The CLI's JSON contract (DESIGN.md), built from a Timeline and its Analysis."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd

from stepscope.parsers.timeline import Timeline
from .activity import busy_union
from .composition import requests_of
from .model import Analysis
from .number_format import format_value
from .summary import contract_fields

SUMMARY_KEYS = contract_fields()  # the Summary fields marked for the contract, in order


def contract(timeline: Timeline, analysis: Analysis) -> dict:
    """One JSON-ready object exactly as DESIGN.md's analyze --json promises; with the analysis's
    anatomy, each step adds `categories` and the summary `anatomy` (added keys, DESIGN.md)."""
    steps = [_step(row) for row in analysis.steps.itertuples(index=False)]
    summary = {k: _clean(getattr(analysis.summary, k)) for k in SUMMARY_KEYS}
    anat = analysis.anatomy
    if anat is not None:
        for step, categories in zip(steps, anat.steps_json(len(steps)), strict=True):
            step["categories"] = categories
        summary["anatomy"] = _clean(anat.summary())
    _add_memory(steps, summary, analysis)
    summary["model_proposal"] = _clean(analysis.model_proposal)  # null: the trace shows no repeating layer
    summary["gaps"] = gaps_summary(analysis.gaps)
    return {
        **_on_gpu(analysis),
        "format": timeline.meta.source_format,
        "device": timeline.device_name,
        "device_source": timeline.device_source[1],  # deviceProperties | run.json | how its properties named it
        "engine": analysis.facts.engine,
        "engine_source": analysis.facts.engine_source,
        "events": len(timeline.events),
        "segmentation": {
            "method": analysis.segmentation.method,
            "confidence": round(float(analysis.segmentation.confidence), 3),
            "warnings": list(analysis.segmentation.warnings),
            "evidence": list(analysis.segmentation.evidence),
        },
        "requests": _request_count(analysis),
        "request_list": request_list(analysis),
        "front_end": None,  # the API server's trace read beside a worker's (the front door fills it for a folder)
        "steps": steps,
        "summary": summary,
        "findings": [{**_finding(f), **_finding_cost(f, analysis)} for f in analysis.findings],
    }


def _request_count(analysis: Analysis) -> int | None:
    """Requests in the trace (issue 38): null where it cannot be known (the reason is in segmentation.warnings)."""
    count = requests_of(analysis)
    return None if count is None else int(count)


def request_list(analysis: Analysis) -> list[dict]:
    """One object per request (DESIGN.md, issue 38), null where the trace does not say."""
    table = analysis.requests
    if table is None:
        return []
    return [_request(row) for row in table.rows.itertuples(index=False)]


def _request(row) -> dict:
    def count(value) -> int | None:
        return None if value is None or pd.isna(value) or value < 0 else int(value)

    def ms(value) -> float | None:
        return None if value is None or not math.isfinite(float(value)) else round(float(value), 4)

    itl = None
    if ms(row.itl_p50_ms) is not None:
        itl = {"p50": ms(row.itl_p50_ms), "p90": ms(row.itl_p90_ms)}
    return {
        "request": int(row.request),
        "arrival_us": row.arrival_ns / 1000.0 if row.arrival_ns >= 0 else None,
        "first_step": count(row.first_step),
        "first_token_step": count(row.first_token_step),
        "last_step": count(row.last_step),
        "steps": [int(s) for s in row.steps],
        "prompt_tokens": count(row.prompt_tokens),
        "output_tokens": count(row.output_tokens),
        "queue_ms": ms(row.queue_ms),
        "ttft_ms": ms(row.ttft_ms),
        "ttft_from": row.ttft_from or None,
        "itl_ms": itl,
        "e2e_ms": ms(row.e2e_ms),
    }


def _on_gpu(analysis: Analysis) -> dict:
    """`on_gpu` (added 2026-12-01, issue 30): false on a CPU-only trace, where host ops stand in for kernels and
    "idle" means no op running, so a reader of the JSON words its figures as the app does."""
    return {"on_gpu": bool(analysis.summary.on_gpu)}


def _finding(f) -> dict:
    return {"id": f.id, "severity": f.severity, "title": f.title, "detail": f.detail}


def _finding_cost(f, analysis: Analysis) -> dict:
    """What a finding costs: its time in the trace (us) and that as a share of the time the steps cover (DESIGN.md
    2026-12-01), null where the finding has no time of its own; and what fixing it could save at most (`saving_us`,
    DESIGN.md 2026-12-04), null for a finding that describes the run."""
    covered = steps_covered_us(analysis.steps)

    def share(us: float) -> float | None:
        return round(100.0 * us / covered, 2) if covered else None

    out: dict = {"cost_us": None, "cost_pct": None, "saving_us": None, "saving_pct": None}
    if _finite(f.cost_us):
        out.update(cost_us=round(float(f.cost_us), 3), cost_pct=share(f.cost_us))
    if _finite(f.saving_us):
        out.update(saving_us=round(float(f.saving_us), 3), saving_pct=share(f.saving_us))
    return out


def saving_text(item: dict) -> str:
    """ "could save up to 8.37 ms (44% of the steps' time)" from a finding's JSON object (saving_us, saving_pct);
    "" for a finding with nothing to win (a description of the run: its time is no saving). Every output words a
    finding's saving with this."""
    saving, pct = item.get("saving_us"), item.get("saving_pct")
    if not saving:
        return ""
    share = f" ({format_value(pct, '%')} of the steps' time)" if pct is not None else ""
    return f"could save up to {format_value(saving, 'us')}{share}"


def _finite(value) -> bool:
    return value is not None and math.isfinite(value)


def steps_covered_us(steps: pd.DataFrame) -> float:
    """The time the steps cover (their union), in us."""
    if not len(steps):
        return 0.0
    lo, hi = busy_union(steps["start_ns"].to_numpy(), steps["end_ns"].to_numpy())
    return float((hi - lo).sum() / 1e3)


def gaps_summary(gaps: pd.DataFrame) -> dict:
    """The idle gaps (those at least the gap threshold long): how many, and their time by likely cause. What
    --gap-threshold-us changes shows here."""
    from .gaps import CAUSES

    by_cause = gaps.groupby("cause", observed=True)["dur_ns"].sum() if len(gaps) else pd.Series(dtype="int64")
    return {
        "count": len(gaps),
        "idle_us": float(gaps["dur_ns"].sum()) / 1000.0 if len(gaps) else 0.0,
        "idle_us_by_cause": {cause: float(by_cause.get(cause, 0)) / 1000.0 for cause in CAUSES},
    }


def _step(row) -> dict:
    return {**_step_basics(row), **_step_time_split(row)}


def _step_time_split(row) -> dict:
    """The idle parts before the step's first device work and after its last (DESIGN.md, 2026-12-01)."""
    return {"gpu_lead_us": row.gpu_lead_ns / 1000.0, "gpu_tail_us": row.gpu_tail_ns / 1000.0}


def _step_basics(row) -> dict:
    return {
        "kind": row.kind,
        "request": int(row.request) if row.request >= 0 else None,
        "index": int(row.index),
        "start_us": row.start_ns / 1000.0,
        "end_us": row.end_ns / 1000.0,
        "tokens": None if pd.isna(row.tokens) else int(row.tokens),
        "kernels": int(row.kernels),
        "launches": int(row.launches),
        "gpu_busy_us": row.gpu_busy_ns / 1000.0,
        "gpu_idle_us": row.gpu_idle_ns / 1000.0,
        **_composition(row),
    }


def _add_memory(steps: list[dict], summary: dict, analysis: Analysis) -> None:
    """summary.memory (null without memory events) and each step's memory_allocated_end_bytes and
    memory_peak_bytes (null without them): added keys, DESIGN.md."""
    summary["memory"] = _clean(analysis.summary.memory)
    frame = analysis.steps
    for key in ("memory_allocated_end_bytes", "memory_peak_bytes"):
        values = frame[key].tolist() if key in frame else [None] * len(steps)
        for step, value in zip(steps, values, strict=True):
            step[key] = None if value is None or pd.isna(value) else int(value)


def _composition(row) -> dict:
    """What the step's batch held (DESIGN.md): sequences, of the tokens those prefilling, sequences decoding; null
    where the trace does not tell."""
    return {
        "sequences": _count(row.batch),
        "prefill_tokens": _count(row.prefill_tokens),
        "decode_sequences": _count(row.decode_sequences),
    }


def _count(value) -> int | None:
    return None if pd.isna(value) else int(value)


def _clean(value):
    """JSON has no NaN: unknown figures are null."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _clean(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item"):
        return _clean(value.item())
    return value
