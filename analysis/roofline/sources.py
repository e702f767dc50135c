"""Where the roofline's inputs come from for a trace: the run.json the collectors write beside
it (model config, dtype, prompt length, device) and the device name in the trace itself."""

from __future__ import annotations

import json
from pathlib import Path

from ...contracts.run_record import MAX_BYTES as RUN_RECORD_MAX_BYTES
from ...contracts.run_record import RunRecord, parse_run_record, read_run_record, run_record_path
from ...contracts.run_schema import run_record_problems
from ...parsers.timeline import Timeline
from ..model import Analysis
from .compare import RooflineReport, roofline_report
from .cpu_calibration import calibrate_cpu
from .gpus import match_gpu
from .hardware import Hardware
from .model_config import ModelShape, shape_from_config


def find_run_record(trace_path: str | Path) -> RunRecord | None:
    """The run.json in the trace's folder (or in the folder given) when it names a model the roofline
    can use; None if absent, unreadable, without a model or invalid (run_record_note says why)."""
    record = read_run_record(trace_path)
    if record is None or not record.model or run_record_problems(record.to_dict()):
        return None
    return record


def run_record_note(trace_path: str | Path) -> str | None:
    """Why the run.json beside a trace is not used for the roofline, None when it is fine or absent."""
    path = run_record_path(trace_path)
    try:
        if not path.is_file() or path.stat().st_size > RUN_RECORD_MAX_BYTES:
            return None
        record = parse_run_record(json.loads(path.read_bytes()))
    except (OSError, RecursionError):
        return None
    except ValueError as exc:  # bad JSON, bad UTF-8 or a record of the wrong shape
        return f"run.json beside the trace is invalid: {' '.join(str(exc).split())[:200]}"
    if not record.model:
        return None
    problems = run_record_problems(record.to_dict())
    return f"run.json beside the trace is invalid: {'; '.join(problems[:3])}" if problems else None


def shape_from_run_record(record: RunRecord) -> ModelShape:
    """The model a run profiled, in the dtype it ran in."""
    config = record.model_config
    if config is None:
        raise ValueError("run.json has no model config")
    name = (record.model_source or "model").removeprefix("preset:")
    return shape_from_config(config, dtype=record.dtype, name=name)


def hardware_for(
    device_name: str | None,
    memory_bytes: int | None = None,
    device_type: str | None = None,
    memory_fraction: float = 1.0,
    flops_fraction: float = 1.0,
) -> Hardware | None:
    """The table's row for a GPU name, or this machine's calibrated CPU for a CPU run (assuming
    the trace was made here, as the app's own runs are); None when the GPU is not in the table."""
    if device_type == "cpu":
        hardware = calibrate_cpu(device_name or "CPU")
    else:
        hardware = match_gpu(device_name, memory_bytes)
    return hardware.scaled(memory_fraction, flops_fraction) if hardware else None


def timeline_device(timeline: Timeline) -> tuple[str | None, int | None]:
    """The trace's main device name and its memory size (which settles A100 40/80 GB and the like);
    the first named device of the metadata when the events name none."""
    devices = timeline.meta.devices.values()
    name = timeline.device_name or next((d.name for d in devices if d.name and d.name.strip()), None)
    memory = next((d.memory_bytes for d in devices if d.name == name and d.memory_bytes), None)
    return name, memory


def roofline_for_trace(
    trace_path: str | Path,
    analysis: Analysis,
    device_name: str | None = None,
    memory_bytes: int | None = None,
    memory_fraction: float = 1.0,
    flops_fraction: float = 1.0,
    hardware: Hardware | None = None,
) -> RooflineReport | None:
    """Expected vs measured for a trace with a run.json beside it; None without one, or when the
    device is unknown and no `hardware` is given. `device_name`/`memory_bytes`: the trace's
    (Timeline.device_name and its DeviceInfo.memory_bytes), preferred to run.json's."""
    note = run_record_note(trace_path)
    if note:
        raise ValueError(note)  # callers say it as a note and show no roofline
    record = find_run_record(trace_path)
    if record is None:
        return None
    shape = shape_from_run_record(record)
    if hardware is None:
        device_type = record.device_type
        name = record.device if device_type == "cpu" else (device_name or record.device)
        hardware = hardware_for(name, memory_bytes, device_type, memory_fraction, flops_fraction)
    if hardware is None:
        return None
    return roofline_report(
        analysis,
        shape,
        hardware,
        prompt_tokens=record.prompt_len or None,
        batch=record.batch,
    )
