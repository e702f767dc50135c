"""The roofline side of a prefill sweep: expected time, bytes and FLOPs for each measured point,
the decode step, and the marks (where prefill turns compute bound, where it costs one decode step).

collectors.sweep only measures; whoever runs it (the app's Run page, `python -m app.cli sweep`)
hands it `complete_sweep`, called right after the timed forwards in the same process, so a CPU
is calibrated on the machine that ran the sweep. The record's schema: contracts.sweep_record.
"""

from __future__ import annotations

import copy
from typing import Any

from .accounting import decode_cost, prefill_cost
from .cpu_calibration import calibrate_cpu
from .gpus import match_gpu
from .hardware import Hardware, compute_bound_prompt_tokens, estimate
from .model_config import shape_from_config

EQUAL_COST_MARGIN = 1.10  # expected prefill above this times the decode step no longer "costs as much"


def sweep_hardware(
    device_type: str, device_name: str, memory_bytes: int | None, hbm_gbps: float | None, tflops: float | None
) -> Hardware | None:
    """The calibrated CPU or the GPU table's row, with figures given by the user over it; None
    when the GPU is not in the table and the user gave not both figures."""
    base = calibrate_cpu(device_name) if device_type == "cpu" else match_gpu(device_name, memory_bytes)
    if hbm_gbps is None and tflops is None:
        return base
    if base is None and (hbm_gbps is None or tflops is None):
        return None
    return Hardware(
        base.name if base else device_name,
        hbm_gbps * 1e9 if hbm_gbps is not None else base.memory_bytes_per_s,
        tflops * 1e12 if tflops is not None else base.flops_per_s,
        kind=device_type if device_type == "cpu" else "gpu",
        source="figures given by the user" + (f" over {base.source}" if base else ""),
    )


def complete_sweep(
    record: dict[str, Any], hbm_gbps: float | None = None, tflops: float | None = None
) -> dict[str, Any]:
    """A measured sweep record (collectors.sweep) with its roofline figures filled in (a new dict)."""
    out = copy.deepcopy(record)
    model = out["model"]
    shape = shape_from_config(model["config"], dtype=out["dtype"], name=model.get("source") or "model")
    model["parameters"] = shape.parameters
    batch = int(out["batch"])
    hardware = sweep_hardware(out["device_type"], out["device"], out.get("device_memory_bytes"), hbm_gbps, tflops)
    for point in out["points"]:
        _fill(point, prefill_cost(shape, int(point["prompt_tokens"]), batch), hardware)
    decode = out["decode_step"]
    _fill(decode, decode_cost(shape, int(decode["context"]), batch), hardware)
    out["hardware"] = (
        None
        if hardware is None
        else {
            "name": hardware.name,
            "memory_gbps": hardware.memory_bytes_per_s / 1e9,
            "tflops": hardware.flops_per_s / 1e12,
            "source": hardware.source,
        }
    )
    out["marks"] = {**out.get("marks", {}), **_expected_marks(shape, hardware, batch)}
    return out


def _fill(point: dict[str, Any], cost, hardware: Hardware | None) -> None:
    e = estimate(cost, hardware) if hardware is not None else None
    point["expected_ms"] = e.expected_ms if e else None
    point["memory_ms"] = e.memory_ms if e else None
    point["compute_ms"] = e.compute_ms if e else None
    point["bound"] = e.bound if e else None
    point["bytes"] = int(cost.bytes)
    point["flops"] = int(cost.flops)


def _expected_marks(shape, hardware: Hardware | None, batch: int) -> dict[str, Any]:
    marks: dict[str, Any] = {"compute_bound_prompt_tokens": None, "prefill_equals_decode_expected_tokens": None}
    if hardware is None:
        return marks
    marks["compute_bound_prompt_tokens"] = compute_bound_prompt_tokens(shape, hardware, batch)

    def costs_more(n: int) -> bool:
        prefill = estimate(prefill_cost(shape, n, batch), hardware).expected_ms
        decode = estimate(decode_cost(shape, n, batch), hardware).expected_ms
        return prefill > EQUAL_COST_MARGIN * decode

    lo, hi = 1, max(2, 2 * (marks["compute_bound_prompt_tokens"] or 1))
    while not costs_more(hi) and hi < 1 << 22:
        lo, hi = hi, hi * 2
    if costs_more(hi):
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if costs_more(mid) else (mid, hi)
        marks["prefill_equals_decode_expected_tokens"] = hi
    return marks
