"""Roofline: the floor bytes moved and FLOPs done set under every phase, and a trace read against it.

    shape = shape_from_config(config_dict, dtype="bfloat16")     # model_config
    cost = prefill_cost(shape, prompt_tokens=7)                   # accounting
    e = estimate(cost, gpu_by_name("H100"))                       # hardware, gpus
    report = roofline_for_trace(path, analysis, *timeline_device(timeline))   # sources, compare
    analysis = with_roofline(analysis, report)                    # summary.roofline + findings added

No torch, Streamlit or Plotly here.
"""

from .accounting import LayerCost, PhaseCost, decode_cost, kv_bytes_per_token, prefill_cost
from .compare import PHASE_COLUMNS, RooflineReport, roofline_report, with_roofline
from .cpu_calibration import calibrate_cpu
from .gpus import GPUS, TYPICAL_FRACTIONS, gpu_by_name, match_gpu
from .hardware import (
    Estimate,
    Hardware,
    compute_bound_prompt_tokens,
    estimate,
    phase_estimates,
)
from .model_config import ModelShape, read_config_file, shape_from_config
from .sources import (
    find_run_record,
    hardware_for,
    roofline_for_trace,
    run_record_note,
    shape_from_run_record,
    timeline_device,
)
from .sweep_expected import complete_sweep, sweep_hardware
from .sweep_record import SWEEP_COLUMNS, load_sweep, sweep_frame

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
    "find_run_record",
    "gpu_by_name",
    "hardware_for",
    "kv_bytes_per_token",
    "load_sweep",
    "match_gpu",
    "phase_estimates",
    "prefill_cost",
    "read_config_file",
    "roofline_for_trace",
    "roofline_report",
    "run_record_note",
    "shape_from_config",
    "shape_from_run_record",
    "sweep_frame",
    "sweep_hardware",
    "timeline_device",
    "with_roofline",
]
