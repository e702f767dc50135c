"""sweep.json (contracts.sweep_record: schema, reader, writer) as a frame to plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from stepscope.contracts.sweep_record import read_sweep_record

SWEEP_COLUMNS = ("prompt_tokens", "measured_ms", "expected_ms", "memory_ms", "compute_ms", "bound", "bytes", "flops")


def load_sweep(path: str | Path) -> dict[str, Any]:
    """A sweep.json (or the folder holding one); ValueError with one line when it is not one."""
    return read_sweep_record(path)


def sweep_frame(record: dict[str, Any]) -> pd.DataFrame:
    """One row per prompt length: measured and expected prefill ms (expected NaN without hardware
    figures). The marks to draw are record["marks"]; the decode step line is record["decode_step"]."""
    frame = pd.DataFrame(record.get("points") or [], columns=list(SWEEP_COLUMNS))
    for col in ("measured_ms", "expected_ms", "memory_ms", "compute_ms"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce")
    return frame.sort_values("prompt_tokens", ignore_index=True)
