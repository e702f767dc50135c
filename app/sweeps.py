"""The Run page's prefill sweep, without widgets so tests can call it: run one, find past ones.

A sweep is collectors.sweep's measurements with analysis.roofline's expected figures (sweep.json
in its own runs/<id>/ folder); this only calls them and lists what is there.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from stepscope.analysis.roofline import load_sweep

SWEEP_FILE = "sweep.json"
ProgressCallback = Callable[[str, int, int], None]


def run_sweep(spec, out_dir: str | Path, progress: ProgressCallback | None = None) -> tuple[Path, dict]:
    """Run collectors.sweep with `spec` (a SweepSpec) into out_dir; (path of sweep.json, its record).

    Raises CollectorError with a one-line message when the sweep fails."""
    from stepscope.analysis.roofline import complete_sweep
    from stepscope.collectors.sweep import run_prefill_sweep

    result = run_prefill_sweep(spec, out_dir=out_dir, progress=progress, complete=complete_sweep)
    path = Path(result["path"])
    return path, load_sweep(path)


def past_sweeps(runs_folder: str | Path) -> list[Path]:
    """runs/*/sweep.json, newest first (run folder names start with a timestamp)."""
    folder = Path(runs_folder)
    if not folder.is_dir():
        return []
    return sorted(
        (p for p in folder.glob(f"*/{SWEEP_FILE}") if not p.parent.name.startswith(".")),
        key=lambda p: p.parent.name,
        reverse=True,
    )
