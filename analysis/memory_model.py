"""The memory a model needs, against what the trace measured (analysis.memory): KV cache per decode step, weights,
and how many tokens of KV fit beside them on the device.

    analysis = with_memory_model(analysis, timeline, model, run_record)   # model: a roofline ModelShape

Expected KV growth per decode step of the whole batch: 2 (K and V) x layers x kv_heads x head_dim x dtype bytes x
batch, the seed's 128 KiB per token for Llama-3-8B in bf16 at batch 1. The batch comes from run.json, else from the
trace (its steps' batch, from markers or embedding and logits shapes), else 1. The dtype is what the model ran in:
run.json's, else the model's own (a ModelShape carries the dtype it was built with: the config's, or bf16). Expected
weights: parameters x dtype bytes. The KV tokens that fit: (device memory - weights) / KV per token per sequence at
the measured growth (else the expected one), the scheduler's admission check turned around.
"""

from __future__ import annotations

import dataclasses

from stepscope.contracts.run_record import RunRecord
from stepscope.parsers.timeline import Timeline
from .memory import kv_tokens_capacity
from .memory_findings import kv_growth_findings
from .metrics import format_bytes
from .model import Analysis
from .roofline.accounting import kv_bytes_per_token
from .roofline.model_config import ModelShape, dtype_bytes


def with_memory_model(
    analysis: Analysis, timeline: Timeline, model: ModelShape | None, run_record: RunRecord | None = None
) -> Analysis:
    """The analysis with summary.memory's expected figures and the KV growth finding; unchanged without a model or
    without memory events. `timeline`: the trace the analysis was made from (its devices' sizes)."""
    memory = analysis.summary.memory
    if memory is None or model is None:
        return analysis
    batch, batch_from = _batch(analysis, run_record)
    element = dtype_bytes(run_record.dtype, default=model.dtype_bytes) if run_record and run_record.dtype else None
    element = element or model.dtype_bytes
    shaped = dataclasses.replace(model, dtype_bytes=element)
    expected_kv = kv_bytes_per_token(shaped) * batch
    weights = model.parameters * element
    growth = memory.kv_growth_bytes_per_token
    per_step = growth if growth and growth > 0 else expected_kv
    capacity = kv_tokens_capacity(memory.device_memory_bytes, weights, per_step, batch)
    formula = (
        f"2 x {model.layers} layers x {model.kv_heads} KV heads x {model.head_dim} x {element} bytes x batch {batch}"
    )
    notes = [f"expected KV: {formula}; batch from {batch_from}; {element}-byte elements from {_dtype_from(run_record)}"]
    if memory.device == "cpu":
        notes.append("weights are not compared with resident memory: a CPU profile starts after they were allocated")
    elif memory.resident_bytes is not None:  # a GPU's totals include what was allocated before the profile
        notes.append(
            f"allocated when the first step started: {format_bytes(memory.resident_bytes)}, of which the weights "
            f"should be {format_bytes(weights)}"
        )
    updated = dataclasses.replace(
        memory,
        expected_kv_bytes_per_token=expected_kv,
        expected_weights_bytes=weights,
        kv_tokens_capacity=capacity,
        batch=batch,
        kv_dtype_bytes=element,
        notes=(*memory.notes, *notes),
    )
    summary = dataclasses.replace(analysis.summary, memory=updated)
    findings = (*analysis.findings, *kv_growth_findings(updated, formula))
    return dataclasses.replace(analysis, summary=summary, findings=findings)


def _batch(analysis: Analysis, run_record: RunRecord | None) -> tuple[int, str]:
    if run_record is not None and run_record.batch:
        return run_record.batch, "run.json"
    if analysis.summary.batch:
        return analysis.summary.batch, "the trace"
    return 1, "neither run.json nor the trace (taken as 1)"


def _dtype_from(run_record: RunRecord | None) -> str:
    return "run.json" if run_record is not None and run_record.dtype else "the model"
