"""sweep.json: a prefill sweep's record (collectors.sweep writes it, analysis.roofline and the app read it).

sweep.json (schema "stepscope.sweep/1"; keys are only ever added):

    {
      "schema": "stepscope.sweep/1",
      "model": {"source": "preset:NAME"|"local:PATH"|"hub:ID", "parameters": int, "config": {...}},
      "device": str, "device_type": "cpu"|"cuda", "dtype": "float32"|"bfloat16"|"float16",
      "batch": int, "repeats": int,
      "hardware": {"name": str, "memory_gbps": float, "tflops": float, "source": str} | null,
      "points": [{"prompt_tokens": int, "measured_ms": float, "runs_ms": [float],
                  "expected_ms": float|null, "memory_ms": float|null, "compute_ms": float|null,
                  "bound": "memory"|"compute"|null, "bytes": int, "flops": int}],   ordered by length
      "decode_step": {"context": int, "measured_ms": float, "runs_ms": [float],
                      "expected_ms": float|null, "bound": str|null, "bytes": int, "flops": int},
      "marks": {
        "compute_bound_prompt_tokens": int|null,   expected: shortest prompt whose prefill is compute
                                                   bound (may lie outside the swept range)
        "prefill_equals_decode_tokens": float|null,  measured: where the prefill time curve crosses
                                                   one decode step (linear between points); null if
                                                   no point is below or none above the decode step
        "prefill_equals_decode_expected_tokens": int|null   the same on the expected curve. In the
                                                   roofline a short prefill costs what a decode step
                                                   does (one read of the weights), so this is the
                                                   first length whose expected prefill exceeds the
                                                   expected decode step by over 10 %: near the
                                                   compute-bound mark, a little before it when the
                                                   prompt's activation and KV bytes add up first
      },
      "created": ISO 8601 UTC
    }
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .run_record import write_json_atomically
from .safe_read import FileTooLargeError, read_regular_text

SCHEMA = "stepscope.sweep/1"
SCHEMA_FAMILY = "stepscope.sweep/"
FILE_NAME = "sweep.json"
MAX_BYTES = 16 << 20


def parse_sweep_record(value: Any, where: str = "sweep.json") -> dict[str, Any]:
    """A decoded sweep.json, checked; ValueError with one line when it is not a Stepscope sweep."""
    if not isinstance(value, dict) or not str(value.get("schema", "")).startswith(SCHEMA_FAMILY):
        raise ValueError(f"{where} is not a Stepscope sweep")
    points = value.get("points", [])
    if not isinstance(points, list) or not all(isinstance(p, dict) and "prompt_tokens" in p for p in points):
        raise ValueError(f"{where}: 'points' must be a list of objects with prompt_tokens")
    for name in ("decode_step", "marks", "model"):
        if not isinstance(value.get(name) or {}, dict):
            raise ValueError(f"{where}: {name!r} must be an object")
    return value


def read_sweep_record(path: str | Path) -> dict[str, Any]:
    """A sweep.json (or the folder holding one); ValueError with one line when it is not one."""
    path = Path(path)
    if path.is_dir():
        path = path / FILE_NAME
    try:  # a regular file only (a FIFO would block), at most MAX_BYTES
        record = json.loads(read_regular_text(path, MAX_BYTES))
    except FileTooLargeError:
        raise ValueError(f"{path} is too large for a sweep record") from None
    except OSError as exc:
        raise ValueError(f"cannot read the sweep {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"cannot read the sweep {path}: {exc}") from None
    return parse_sweep_record(record, str(path))


def write_sweep_record(folder: Path, record: dict[str, Any]) -> Path:
    """`folder`/sweep.json, atomically, after the reader's own checks."""
    parse_sweep_record(record)
    path = Path(folder) / FILE_NAME
    write_json_atomically(path, record)
    return path
