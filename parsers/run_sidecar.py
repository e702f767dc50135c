"""The run.json that Stepscope's collectors write beside a trace: device and model facts the trace lacks.

CPU-only traces carry no device properties, so without this their device would show as unknown. The front door
(analysis/front_door.py) reads it once per open (`read_sidecar`): the typed record for the timeline's metadata,
whether the roofline can use it (and, when not, why, as one note), and the digest of its bytes for the result
cache key. Read through contracts.run_record (the one parser); the record lands in meta.extra["run"].
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

from stepscope.contracts.run_record import MAX_BYTES, RunRecord, parse_run_record, run_record_path
from stepscope.contracts.run_schema import run_record_problems
from stepscope.contracts.safe_read import read_regular
from .timeline import Timeline

NO_SIDECAR = "none"  # the digest part of a result key when no run.json lies beside the trace


@dataclasses.dataclass(frozen=True)
class Sidecar:
    record: RunRecord | None = None  # the parsed run.json (None: absent or unreadable)
    usable: bool = False  # names a model whose shapes pass the schema check: the roofline can use it
    note: str | None = None  # why a run.json that names a model is not used, one line; None when fine or absent
    digest: str = NO_SIDECAR  # content hash of its bytes (the result cache key's part)


def read_sidecar(trace_path: str | Path | None) -> Sidecar:
    """The run.json beside a trace, read once (bounded in size, a regular file only); never raises: it is
    optional, and anything wrong with it becomes the note."""
    if trace_path is None:
        return Sidecar()
    path = run_record_path(trace_path)
    try:
        raw = read_regular(path, MAX_BYTES)  # a FIFO or /dev/zero named run.json: refused, never blocks
    except OSError:  # absent, not a regular file, or too large
        return Sidecar()
    digest = "sha256-" + hashlib.sha256(raw).hexdigest()[:32]  # a few kB: the standard library's hash will do
    try:
        record = parse_run_record(json.loads(raw))
    except (ValueError, RecursionError) as exc:  # bad JSON, bad UTF-8 or a record of the wrong shape
        return Sidecar(None, False, f"run.json beside the trace is invalid: {' '.join(str(exc).split())[:200]}", digest)
    if not record.model:
        return Sidecar(record, False, None, digest)
    problems = run_record_problems(record.to_dict())
    if problems:
        return Sidecar(record, False, f"run.json beside the trace is invalid: {'; '.join(problems[:3])}", digest)
    return Sidecar(record, True, None, digest)


def with_sidecar(timeline: Timeline, sidecar: Sidecar) -> Timeline:
    """The timeline with the run record in its metadata (meta.extra["run"]); unchanged without one."""
    if sidecar.record is None:
        return timeline
    meta = dataclasses.replace(timeline.meta, extra={**timeline.meta.extra, "run": sidecar.record})
    return dataclasses.replace(timeline, meta=meta)
