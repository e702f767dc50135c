"""The run.json that Stepscope's collectors write beside a trace: device and model facts the trace lacks.

CPU-only traces carry no device properties, so without this their device would show as unknown.
Read through contracts.run_record (the one reader); the typed record lands in meta.extra["run"].
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ..contracts.run_record import RunRecord, read_run_record
from .timeline import Timeline


def read_run_json(trace_path: Path) -> RunRecord | None:
    """The run.json beside a trace, or None when absent, too large, unreadable or invalid (it is optional)."""
    return read_run_record(Path(trace_path).with_name("run.json"))


def attach_run_json(timeline: Timeline, trace_path: Path) -> Timeline:
    run = read_run_json(trace_path)
    if run is None:
        return timeline
    meta = dataclasses.replace(timeline.meta, extra={**timeline.meta.extra, "run": run})
    return dataclasses.replace(timeline, meta=meta)
