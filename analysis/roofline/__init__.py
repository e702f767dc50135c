"""Roofline: the floor bytes moved and FLOPs done set under every phase, and a trace read against it.

    shape = shape_from_config(config_dict, dtype="bfloat16")     # model_config
    cost = prefill_cost(shape, prompt_tokens=7)                   # accounting
    e = estimate(cost, gpu_by_name("H100"))                       # hardware, gpus
    report = roofline_for_run(record, analysis, *timeline_device(timeline))   # sources, compare
    analysis = with_roofline(analysis, report)                    # summary.roofline + findings added

No torch, Streamlit or Plotly here. Names load on first use (PEP 562): the command line's warm path reads a
model's shape (model_config, model_source) to key a cached answer without importing numpy or pandas.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .accounting import LayerCost, PhaseCost, decode_cost, kv_bytes_per_token, prefill_cost
    from .compare import PHASE_COLUMNS, RooflineReport, roofline_report, with_roofline
    from .cpu_calibration import calibrate_cpu
    from .gpus import GPUS, TYPICAL_FRACTIONS, gpu_by_name, match_gpu
    from .hardware import Estimate, Hardware, compute_bound_prompt_tokens, estimate, phase_estimates
    from .model_config import ModelShape, read_config_file, shape_from_config
    from .sources import hardware_for, roofline_for_run, shape_from_run_record, timeline_device, usable_run_record
    from .sweep_expected import complete_sweep, sweep_hardware
    from .sweep_record import SWEEP_COLUMNS, load_sweep, sweep_frame

_HOMES = {
    **dict.fromkeys(("LayerCost", "PhaseCost", "decode_cost", "kv_bytes_per_token", "prefill_cost"), "accounting"),
    **dict.fromkeys(("PHASE_COLUMNS", "RooflineReport", "roofline_report", "with_roofline"), "compare"),
    "calibrate_cpu": "cpu_calibration",
    **dict.fromkeys(("GPUS", "TYPICAL_FRACTIONS", "gpu_by_name", "match_gpu"), "gpus"),
    **dict.fromkeys(("Estimate", "Hardware", "compute_bound_prompt_tokens", "estimate", "phase_estimates"), "hardware"),
    **dict.fromkeys(("ModelShape", "read_config_file", "shape_from_config"), "model_config"),
    **dict.fromkeys(
        ("hardware_for", "roofline_for_run", "shape_from_run_record", "timeline_device", "usable_run_record"), "sources"
    ),
    **dict.fromkeys(("complete_sweep", "sweep_hardware"), "sweep_expected"),
    **dict.fromkeys(("SWEEP_COLUMNS", "load_sweep", "sweep_frame"), "sweep_record"),
}
__all__ = [
    "GPUS",
    "PHASE_COLUMNS",
    "SWEEP_COLUMNS",
    "TYPICAL_FRACTIONS",
    "Estimate",
    "Hardware",
    "LayerCost",
    "ModelShape",
    "PhaseCost",
    "RooflineReport",
    "calibrate_cpu",
    "complete_sweep",
    "compute_bound_prompt_tokens",
    "decode_cost",
    "estimate",
    "gpu_by_name",
    "hardware_for",
    "kv_bytes_per_token",
    "load_sweep",
    "match_gpu",
    "phase_estimates",
    "prefill_cost",
    "read_config_file",
    "roofline_for_run",
    "roofline_report",
    "shape_from_config",
    "shape_from_run_record",
    "sweep_frame",
    "sweep_hardware",
    "timeline_device",
    "usable_run_record",
    "with_roofline",
]


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
