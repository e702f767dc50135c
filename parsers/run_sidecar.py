"""The run.json that Stepscope's collectors write beside a trace: device and model facts the trace lacks.

CPU-only traces carry no device properties, so without this their device would show as unknown.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import msgspec

from parsers.timeline import Timeline

MAX_RUN_JSON_BYTES = 4 << 20


def read_run_json(trace_path: Path) -> dict | None:
    """The run.json beside a trace, or None when absent, too large or unreadable (it is optional)."""
    sidecar = trace_path.parent / "run.json"
    try:
        if not sidecar.is_file() or sidecar.stat().st_size > MAX_RUN_JSON_BYTES:
            return None
        value = msgspec.json.decode(sidecar.read_bytes())
    except (OSError, msgspec.DecodeError, UnicodeDecodeError, RecursionError):  # bad bytes: as if absent
        return None
    return value if isinstance(value, dict) else None


def attach_run_json(timeline: Timeline, trace_path: Path) -> Timeline:
    run = read_run_json(trace_path)
    if run is None:
        return timeline
    meta = dataclasses.replace(timeline.meta, extra={**timeline.meta.extra, "run": run})
    return dataclasses.replace(timeline, meta=meta)
