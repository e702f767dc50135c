"""run.json: what a collector ran, where, with which versions, and the harness's own timings.

One typed record (`RunRecord`), one reader (`read_run_record`) and one writer (`write_run_record`):
collectors write through this module; parsers, analysis and the app read through it. The schema
("stepscope.run/1", fields below and in collectors/README.md) only ever gains keys: a reader keeps
keys it does not know in `RunRecord.extra` and the writer writes them back.

Reading is forgiving because run.json is optional: anything absent, too large, not JSON or not a
run record reads as None (`parse_run_record` raises ValueError with the reason, for tools that
want it). Standard library only: no torch, nothing else of Stepscope's.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .safe_read import read_regular

SCHEMA = "stepscope.run/1"
SCHEMA_FAMILY = "stepscope.run/"
FILE_NAME = "run.json"
MAX_BYTES = 4 << 20  # a run.json is a few kB; anything far larger is not one


@dataclass(frozen=True)
class RunRecord:
    schema: str = SCHEMA
    spec: dict[str, Any] = field(default_factory=dict)  # every RunSpec field (mode, preset, batch, ...)
    versions: dict[str, Any] = field(default_factory=dict)  # python, torch, transformers, cuda
    device: str | None = None  # GPU name, or the CPU model (+ core count)
    device_type: str | None = None  # cpu | cuda
    model: dict[str, Any] = field(default_factory=dict)  # source, architecture, parameters, config
    dtype: str | None = None  # float32 | bfloat16 | float16
    prompt_len: int | None = None
    timings: dict[str, Any] = field(default_factory=dict)  # the harness's own TTFT / ITL (README)
    markers: dict[str, int] = field(default_factory=dict)  # marker counts the trace holds
    trace: str | None = None  # the trace's file name in the run folder
    created: str | None = None  # ISO 8601 UTC
    extra: dict[str, Any] = field(default_factory=dict)  # keys a later schema added

    @property
    def mode(self) -> str | None:
        """eager | cuda-graph | compile, as the run's spec says."""
        mode = self.spec.get("mode")
        return mode if isinstance(mode, str) else None

    @property
    def model_config(self) -> dict[str, Any] | None:
        config = self.model.get("config")
        return config if isinstance(config, dict) else None

    @property
    def model_source(self) -> str | None:
        """ "preset:NAME" | "local:PATH" | "hub:ID" (or the architecture when the source is missing)."""
        source = self.model.get("source") or self.model.get("architecture")
        return str(source) if source else None

    @property
    def unprofiled_itl_ms(self) -> list[float] | None:
        """The warm-up's inter-token latencies, measured with no profiler running (``timings.unprofiled_itl_ms``,
        added to stepscope.run/1 with issue 28; None in older records or runs without a warm-up). Profiling
        inflates an eager decode step, so this is the ITL a user of the same loop would see."""
        values = self.timings.get("unprofiled_itl_ms")
        if not isinstance(values, list):
            return None
        numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        return numbers if len(numbers) == len(values) else None

    @property
    def batch(self) -> int | None:
        batch = self.spec.get("batch")
        return batch if isinstance(batch, int) and not isinstance(batch, bool) and batch > 0 else None

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        return {**out, **self.extra}


_DICT_FIELDS = ("spec", "versions", "model", "timings", "markers")
_STR_FIELDS = ("schema", "device", "device_type", "dtype", "trace", "created")
_KNOWN = {f.name for f in dataclasses.fields(RunRecord)} - {"extra"}


def parse_run_record(value: Any) -> RunRecord:
    """A decoded run.json as a RunRecord; ValueError naming what is wrong otherwise."""
    if not isinstance(value, dict):
        raise ValueError("run.json is not a JSON object")
    schema = value.get("schema", SCHEMA)
    if not isinstance(schema, str) or not schema.startswith(SCHEMA_FAMILY):
        raise ValueError(f"run.json has schema {schema!r}, not {SCHEMA_FAMILY}N")
    for name in _DICT_FIELDS:
        if not isinstance(value.get(name, {}), dict):
            raise ValueError(f"run.json: {name!r} must be an object")
    for name in _STR_FIELDS:
        if not isinstance(value.get(name), str | None):
            raise ValueError(f"run.json: {name!r} must be a string")
    prompt_len = value.get("prompt_len")
    if prompt_len is not None and (isinstance(prompt_len, bool) or not isinstance(prompt_len, int)):
        raise ValueError("run.json: 'prompt_len' must be an integer")
    known = {k: v for k, v in value.items() if k in _KNOWN}
    known["schema"] = schema
    for name in _DICT_FIELDS:
        known[name] = known.get(name) or {}
    return RunRecord(**known, extra={k: v for k, v in value.items() if k not in _KNOWN})


def run_record_path(path: str | Path) -> Path:
    """The run.json for a trace file (beside it) or a run folder (inside it)."""
    path = Path(path)
    return path / FILE_NAME if path.is_dir() else path.with_name(FILE_NAME)


def read_run_record(path: str | Path) -> RunRecord | None:
    """The run.json beside a trace (or in a run folder); None when absent, too large, unreadable or invalid."""
    try:  # a FIFO, a device or a link to one is refused without blocking; the read stops past MAX_BYTES
        return parse_run_record(json.loads(read_regular(run_record_path(path), MAX_BYTES)))
    except (OSError, ValueError, RecursionError):  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
        return None


def write_json_atomically(path: Path, record: dict[str, Any]) -> None:
    """Write to a partial file, then rename: readers never see half a record."""
    partial = path.with_name(path.name + ".partial")
    with open(partial, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    os.replace(partial, path)


def write_run_record(folder: Path, record: RunRecord) -> Path:
    """`folder`/run.json, atomically; the record is checked by the reader's own rules first."""
    data = record.to_dict()
    parse_run_record(data)
    path = Path(folder) / FILE_NAME
    write_json_atomically(path, data)
    return path
