"""Expected vs measured: each phase of an analysed trace against its roofline floor.

Prefill: every prefill step's span against the expected time of its prompt (tokens from the
step's marker, else the run's prompt length); efficiency = sum of expected / sum of measured.
Decode: the median span of the decode steps kept for ITL statistics against one decode step at
their mean context (prompt + tokens generated before the step; bytes grow linearly with the
context, so the mean context gives the mean expected time). Efficiency 100 % means the step ran
at the roofline; the findings say which resource binds and how much of the step the device idled.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from ..annotations import engine_batch
from ..model import Analysis, Finding
from ..number_format import format_value
from ..summary import RooflineSummary
from .accounting import decode_cost, kv_bytes_per_token, prefill_cost, step_cost
from .hardware import Estimate, Hardware, compute_bound_prompt_tokens, estimate
from .model_config import ModelShape

PHASE_COLUMNS = (
    "phase",  # prefill | decode
    "steps",  # steps measured
    "batch",
    "tokens",  # new positions per sequence (median)
    "context",  # cached tokens per sequence before the step (mean)
    "bytes",
    "flops",
    "memory_ms",
    "compute_ms",
    "expected_ms",
    "bound",  # memory | compute
    "measured_ms",
    "efficiency_pct",  # expected / measured
    "window_ms",  # the median step's GPU window: its first device work to its last (span - lead - tail)
    "window_efficiency_pct",  # expected / window: how near the roofline the device runs while it runs
    "source",  # where batch and context came from: "engine annotations" | "run.json / markers"
)
LOW_EFFICIENCY_PCT = 50.0  # below this a phase's finding is a warning


@dataclass(frozen=True)
class RooflineReport:
    shape: ModelShape
    hardware: Hardware
    phases: pd.DataFrame  # PHASE_COLUMNS, one row per phase found in the trace
    findings: tuple[Finding, ...]
    summary: RooflineSummary  # becomes Analysis.summary.roofline (with_roofline)
    notes: tuple[str, ...] = field(default_factory=tuple)  # what was assumed


def roofline_report(
    analysis: Analysis,
    shape: ModelShape,
    hardware: Hardware,
    prompt_tokens: int | None = None,
    batch: int | None = None,
) -> RooflineReport:
    """Expected vs measured per phase. `prompt_tokens` and `batch` (e.g. from run.json) fill in
    what the steps' markers do not say; a prefill with no known length is left out (noted)."""
    steps = analysis.steps
    notes: list[str] = []
    hardware = _across_ranks(hardware, analysis.facts.world_size, notes)
    rows = []
    prompt_by_request: dict[int, int] = {}
    if len(steps):
        prefill = steps[steps["kind"] == "prefill"]
        row, prompt_by_request = _prefill_row(prefill, shape, hardware, prompt_tokens, batch, notes)
        rows += row
        outlier = steps["outlier"].to_numpy(dtype=bool) if "outlier" in steps else np.zeros(len(steps), bool)
        decode = steps[(steps["kind"] == "decode").to_numpy() & ~outlier]
        labelled = _engine_row(decode, "decode", shape, hardware)
        rows += labelled or _decode_row(decode, shape, hardware, prompt_by_request, prompt_tokens, batch, notes)
        mixed = steps[(steps["kind"] == "mixed").to_numpy()]
        rows += _engine_row(mixed, "mixed", shape, hardware)
        if len(mixed) and not any(r["phase"] == "mixed" for r in rows):
            notes.append("mixed steps left out: their batch is unknown (no engine annotation states it)")
    phases = pd.DataFrame(rows, columns=list(PHASE_COLUMNS))
    idle_share = _decode_idle_share(steps)
    summary = _summary(phases, shape, hardware, batch or _median_batch(steps), idle_share)
    findings = tuple(_finding(r, hardware, idle_share, analysis.summary.on_gpu) for r in rows)
    return RooflineReport(shape, hardware, phases, findings, summary, tuple(notes))


def _across_ranks(hardware: Hardware, ranks: int, notes: list[str]) -> Hardware:
    """One rank of a tensor-parallel job holds 1/N of the model: its floor is the model's over N devices."""
    if ranks <= 1 or hardware.kind != "gpu":
        return hardware
    notes.append(
        f"tensor parallel over {ranks} ranks assumed (the trace's distributedInfo world_size): the floor is the "
        f"model's bytes and FLOPs over {ranks} x {hardware.name}"
    )
    return replace(
        hardware,
        name=f"{ranks} x {hardware.name}",
        memory_bytes_per_s=hardware.memory_bytes_per_s * ranks,
        flops_per_s=hardware.flops_per_s * ranks,
        source=f"{hardware.source}, x {ranks} ranks",
    )


def with_roofline(analysis: Analysis, report: RooflineReport) -> Analysis:
    """The analysis with the roofline's summary (as summary.roofline) and findings added (a new object)."""
    return replace(
        analysis,
        summary=replace(analysis.summary, roofline=report.summary),
        findings=tuple(analysis.findings) + report.findings,
        roofline=report,
    )


def _prefill_row(prefill, shape, hardware, prompt_tokens, batch, notes) -> tuple[list[dict], dict[int, int]]:
    if not len(prefill):
        return [], {}
    tokens = prefill["tokens"].astype("Float64").fillna(prompt_tokens if prompt_tokens else np.nan)
    batches = prefill["batch"].astype("Float64").fillna(batch or 1)
    known = tokens.notna().to_numpy(dtype=bool) & (tokens.fillna(0).to_numpy(dtype=float) >= 1)
    if not known.any():
        notes.append("prefill left out: its prompt length is unknown (no token count in the trace or run.json)")
        return [], {}
    used = prefill[known]
    n = tokens[known].to_numpy(dtype=float).astype(int)
    b = batches[known].to_numpy(dtype=float).astype(int)
    estimates = [estimate(prefill_cost(shape, int(t), int(bb)), hardware) for t, bb in zip(n, b, strict=True)]
    spans_ms = (used["end_ns"] - used["start_ns"]).to_numpy(dtype=float) / 1e6
    prompt_by_request = {int(r): int(t) for r, t in zip(used["request"].to_numpy(), n, strict=True)}
    typical = estimates[int(np.argsort(n)[len(n) // 2])]
    row = _row("prefill", typical, len(used), measured_ms=float(np.median(spans_ms)), steps=used)
    row["efficiency_pct"] = 100.0 * sum(e.expected_ms for e in estimates) / max(float(spans_ms.sum()), 1e-9)
    return [row], prompt_by_request


def _engine_row(rows: pd.DataFrame, phase: str, shape: ModelShape, hardware: Hardware) -> list[dict]:
    """A phase's row from the batch each step's engine annotation states (analysis.annotations.engine_batch:
    sequences, new tokens, KV tokens): exact per step, summed like prefill; [] unless every step states it."""
    if not len(rows) or "label" not in rows:
        return []
    batches = [engine_batch(str(label)) for label in rows["label"]]
    if any(b is None or b.sequences < 1 or b.tokens < 1 for b in batches):
        return []
    estimates = [
        estimate(step_cost(shape, phase, b.sequences, b.tokens, b.kv_tokens, pairs=b.pairs), hardware) for b in batches
    ]
    spans_ms = (rows["end_ns"] - rows["start_ns"]).to_numpy(dtype=float) / 1e6
    typical = int(np.argsort(spans_ms, kind="stable")[(len(spans_ms) - 1) // 2])
    row = _row(phase, estimates[typical], len(rows), measured_ms=float(spans_ms[typical]), steps=rows)
    row["efficiency_pct"] = 100.0 * sum(e.expected_ms for e in estimates) / max(float(spans_ms.sum()), 1e-9)
    row["source"] = "engine annotations"
    return [row]


def _decode_row(decode, shape, hardware, prompt_by_request, prompt_tokens, batch, notes) -> list[dict]:
    if not len(decode):
        return []
    fallback = prompt_tokens or (int(np.median(list(prompt_by_request.values()))) if prompt_by_request else None)
    prompts = decode["request"].map(lambda r: prompt_by_request.get(int(r), fallback))
    if prompts.isna().any():
        notes.append("decode context unknown for some steps: the KV cache read counted from an empty cache")
    context = prompts.fillna(0).to_numpy(dtype=float) + np.maximum(decode["index"].to_numpy(dtype=float) - 1, 0)
    if decode["batch"].notna().any():
        b = int(decode["batch"].astype("Float64").median())
    elif batch:
        b = int(batch)
    else:  # a floor for a guessed batch would be a guess too (DESIGN.md, 2026-12-04)
        notes.append(
            "decode left out: its batch (sequences per step) is unknown (no input shapes, no engine annotation, no "
            "run.json); type it (--batch, the app's Analysis settings) to have the decode roofline"
        )
        return []
    mean_context = round(float(context.mean()))
    e = estimate(decode_cost(shape, mean_context, b), hardware)
    spans_ms = (decode["end_ns"] - decode["start_ns"]).to_numpy(dtype=float) / 1e6
    measured = float(np.median(spans_ms))
    row = _row("decode", e, len(decode), measured_ms=measured, steps=decode)
    row["efficiency_pct"] = 100.0 * e.expected_ms / max(measured, 1e-9)
    return [row]


def _window_ms(steps: pd.DataFrame | None) -> float:
    """Median GPU window of the steps: span less the idle lead and tail (analysis.steps), NaN when unknown."""
    if steps is None or not len(steps) or "gpu_lead_ns" not in steps:
        return np.nan
    window = steps["end_ns"] - steps["start_ns"] - steps["gpu_lead_ns"] - steps["gpu_tail_ns"]
    return float(np.median(window.to_numpy(dtype=float)) / 1e6)


def _row(phase: str, e: Estimate, count: int, measured_ms: float, steps: pd.DataFrame | None = None) -> dict:
    window = _window_ms(steps)
    return {
        "phase": phase,
        "steps": count,
        "batch": e.cost.batch,
        "tokens": e.cost.tokens,
        "context": e.cost.context,
        "bytes": e.cost.bytes,
        "flops": e.cost.flops,
        "memory_ms": e.memory_ms,
        "compute_ms": e.compute_ms,
        "expected_ms": e.expected_ms,
        "bound": e.bound,
        "measured_ms": measured_ms,
        "efficiency_pct": np.nan,
        "window_ms": window,
        "window_efficiency_pct": 100.0 * e.expected_ms / window if window and window > 0 else np.nan,
        "source": "run.json / markers",
    }


def _decode_idle_share(steps: pd.DataFrame) -> float | None:
    """Median share of a decode step with nothing running on the device."""
    if not len(steps):
        return None
    outlier = steps["outlier"].to_numpy(dtype=bool) if "outlier" in steps else np.zeros(len(steps), bool)
    d = steps[(steps["kind"] == "decode").to_numpy() & ~outlier]
    if not len(d):
        return None
    span = (d["end_ns"] - d["start_ns"]).to_numpy(dtype=float)
    return float(np.median(d["gpu_idle_ns"].to_numpy(dtype=float) / np.maximum(span, 1)))


def _median_batch(steps: pd.DataFrame) -> int:
    if len(steps) and steps["batch"].notna().any():
        return int(steps["batch"].astype("Float64").median())
    return 1


def _resource(bound: str, hardware: Hardware) -> str:
    return f"{hardware.memory_name} bandwidth" if bound == "memory" else "compute"


def _finding(row: dict, hardware: Hardware, idle_share: float | None, on_gpu: bool) -> Finding:
    phase, eff = row["phase"], row["efficiency_pct"]
    resource = _resource(row["bound"], hardware)
    title = f"{phase.capitalize()} runs at {eff:.0f}% of the {resource} roofline"
    if row["bound"] == "memory":
        floor = f"{format_bytes(row['bytes'])} moved at {format_value(hardware.memory_bytes_per_s / 1e9, 'GB/s')}"
    else:
        floor = f"{format_value(row['flops'], 'FLOP')} at {format_value(hardware.flops_per_s, 'FLOP/s')}"
    what = {"decode": "median decode step", "prefill": "median prefill"}.get(phase, f"median {phase} step")
    detail = (
        f"The {what} takes {format_value(row['measured_ms'], 'ms')}; the roofline allows "
        f"{format_value(row['expected_ms'], 'ms')} "
        f"({floor}, {row['bound']} bound, {hardware.name}: {hardware.source})."
    )
    window, window_pct = row.get("window_ms"), row.get("window_efficiency_pct")
    if window is not None and np.isfinite(window) and window < 0.95 * row["measured_ms"]:
        detail += (
            f" Over its GPU window (first to last device work, {format_value(window, 'ms')}) it runs at "
            f"{window_pct:.0f}%: the "
            "rest of the step the device waits before or after its work."
        )
    if row.get("source") == "engine annotations":
        detail += (
            f" Batch and context from the engine's annotation: {row['batch']} sequence(s), "
            f"{row['context']:,} cached tokens each (mean)."
        )
    if eff > 100:
        detail += (
            " Above 100 %: the trace did less work than this model and token count imply (check both),"
            " part of the bytes stayed in caches faster than the bandwidth figure (common for small"
            " models on CPUs), or the figure is below what this device reaches."
        )
    evidence = {"efficiency_pct": eff, "expected_ms": row["expected_ms"], "measured_ms": row["measured_ms"]}
    if window_pct is not None and np.isfinite(window_pct):
        evidence["window_efficiency_pct"] = float(window_pct)
    if phase == "decode" and idle_share is not None:
        device = "the GPU is idle" if on_gpu else "no op runs"
        title += f"; {idle_share:.0%} of each step {device}"
        detail += f" {idle_share:.0%} of each decode step {device}: time the floor does not account for."
        evidence["idle_share"] = idle_share
    severity = "info" if eff >= LOW_EFFICIENCY_PCT else "warn"
    # priced by the time above the floor: (median measured - expected) over the steps measured
    cost_us = max(row["measured_ms"] - row["expected_ms"], 0.0) * row["steps"] * 1e3
    return Finding(
        f"roofline-{phase}", severity, title, detail, evidence, cost_us=float(cost_us), saving_us=float(cost_us)
    )


def format_bytes(n: float) -> str:
    """1.61e10 -> "16.1 GB" (decimal units, as bandwidths are quoted)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def _summary(phases: pd.DataFrame, shape, hardware, batch: int, idle_share) -> RooflineSummary:
    out: dict = {
        "roofline_hardware": hardware.name,
        "roofline_memory_gbps": hardware.memory_bytes_per_s / 1e9,
        "roofline_tflops": hardware.flops_per_s / 1e12,
        "kv_bytes_per_token": kv_bytes_per_token(shape),
        "compute_bound_prompt_tokens": compute_bound_prompt_tokens(shape, hardware, batch),
        "decode_idle_share": idle_share,
        "model": shape.name,
    }
    by_phase = {r["phase"]: r for r in phases.to_dict("records")}
    for p in ("prefill", "decode"):
        r = by_phase.get(p)
        out[f"{p}_expected_ms"] = float(r["expected_ms"]) if r else None
        out[f"{p}_measured_ms"] = float(r["measured_ms"]) if r else None
        out[f"{p}_roofline_pct"] = float(r["efficiency_pct"]) if r else None
        out[f"{p}_bound"] = r["bound"] if r else None
        out[f"{p}_bytes"] = int(r["bytes"]) if r else None
        out[f"{p}_flops"] = int(r["flops"]) if r else None
    for p in ("prefill", "decode", "mixed"):
        r = by_phase.get(p)
        out[f"{p}_window_pct"] = _finite(r["window_efficiency_pct"]) if r else None
    mixed = by_phase.get("mixed")
    if mixed:
        out.update(
            mixed_expected_ms=float(mixed["expected_ms"]),
            mixed_measured_ms=float(mixed["measured_ms"]),
            mixed_roofline_pct=float(mixed["efficiency_pct"]),
            mixed_bound=mixed["bound"],
        )
    return RooflineSummary(**out)


def _finite(value) -> float | None:
    return float(value) if value is not None and np.isfinite(value) else None
