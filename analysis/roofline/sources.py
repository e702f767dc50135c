"""Where the roofline's inputs come from for a trace: the run.json the collectors write beside
it (model config, dtype, prompt length, device) and the device name in the trace itself."""

from __future__ import annotations

from stepscope.contracts.run_record import RunRecord
from stepscope.contracts.run_schema import run_record_problems
from stepscope.parsers.timeline import Timeline
from ..model import Analysis
from .compare import RooflineReport, roofline_report
from .gpus import match_gpu
from .hardware import Hardware
from .machine import cpu_hardware
from .model_config import ModelShape, shape_from_config


def usable_run_record(timeline: Timeline) -> RunRecord | None:
    """The run record the front door attached (meta.extra["run"]) when it names a model the roofline can use."""
    record = timeline.meta.extra.get("run")
    if not isinstance(record, RunRecord) or not record.model or run_record_problems(record.to_dict()):
        return None
    return record


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
    record: RunRecord | None = None,
) -> Hardware | None:
    """The table's row for a GPU name, or for a CPU run its measured figures (the capture machine's from its
    run.json, else this machine's, measured once and stored: machine.py); None when the GPU is not in the table."""
    if device_type == "cpu":
        hardware = cpu_hardware(record, device_name or "CPU")
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


def roofline_for_run(
    record: RunRecord,
    analysis: Analysis,
    device_name: str | None = None,
    memory_bytes: int | None = None,
    hardware: Hardware | None = None,
) -> RooflineReport | None:
    """Expected vs measured for a trace whose run.json names its model (usable_run_record); None when the device
    is unknown and no `hardware` is given. `device_name`/`memory_bytes`: the trace's (Timeline.device_name and its
    DeviceInfo.memory_bytes), preferred to run.json's."""
    shape = shape_from_run_record(record)
    if hardware is None:
        device_type = record.device_type
        name = record.device if device_type == "cpu" else (device_name or record.device)
        hardware = hardware_for(name, memory_bytes, device_type, record=record)
    if hardware is None:
        return None
    return roofline_report(analysis, shape, hardware, prompt_tokens=record.prompt_len or None, batch=record.batch)
