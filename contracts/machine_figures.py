"""A CPU's roofline figures (memory bandwidth, matmul throughput): how they are measured, the record that keeps them.

A CPU has no datasheet row, so its figures are measured, and a measurement on a shared machine drifts: the same
2-core VM gave 45 GB/s once and 17.4 GB/s while two apps were starting. So every measurement here is several rounds
(the best kept: a busy core only ever makes a copy slower), notes the machine's load before and after, and says
whether it was taken under load. The collectors measure at capture with torch (collectors/machine_figures.py, stored
in run.json `machine`); analysis measures a machine that opens a trace without them with numpy
(analysis/roofline/machine.py, stored in the cache folder, measured again only while the stored figures were taken
under load and the machine is quiet now). One policy, two back ends: this module takes the timing functions as
arguments, so it imports neither. Standard library only.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import Any

ROUNDS = 3  # rounds of (copies, matmuls); the best of all is kept
# a 1-minute load average above one runnable task per core (the measuring process is one of them): under load
LOADED_PER_CORE = 1.0


def load_now() -> float | None:
    """The 1-minute load average (None where the platform has none)."""
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return None


def under_load(load: float | None, cores: int | None = None) -> bool:
    """Whether a load average means other work competed for the cores (unknown load: not known to be loaded)."""
    cores = cores or os.cpu_count() or 1
    return load is not None and load > LOADED_PER_CORE * cores


def measure(
    copy_bytes_per_s: Callable[[], float], matmul_flops_per_s: Callable[[], float], how: str, rounds: int = ROUNDS
) -> dict[str, Any]:
    """The `machine` record: the best bandwidth and throughput of `rounds` rounds (each function times one best-of
    run and returns its rate), with the load average before and after and whether that was under load."""
    before = load_now()
    bandwidth = flops = 0.0
    for _ in range(max(rounds, 1)):
        bandwidth = max(bandwidth, float(copy_bytes_per_s()))
        flops = max(flops, float(matmul_flops_per_s()))
    after = load_now()
    loads = [x for x in (before, after) if x is not None]
    cores = os.cpu_count() or 1
    load = max(loads) if loads else None
    note = f"load average {load:.2f} on {cores} cores" if load is not None else "load unknown"
    return {
        "memory_bytes_per_s": bandwidth,
        "flops_per_s": flops,
        "host": socket.gethostname()[:100],
        "how": f"{how}, best of {rounds} rounds; {note}",
        "load_avg": load,
        "cores": cores,
        "under_load": under_load(load, cores),
    }


def read_figures(raw: object) -> dict[str, Any] | None:
    """A stored `machine` record, checked: both figures positive finite numbers below 1e18; None otherwise."""
    if not isinstance(raw, dict):
        return None
    for key in ("memory_bytes_per_s", "flops_per_s"):
        value = raw.get(key)
        if not (isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < 1e18):
            return None
    return raw


def best_of(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Two measurements of one machine merged: each figure's better value (load only ever lowers a figure), under
    load only while neither was quiet."""
    merged = dict(new)
    merged["memory_bytes_per_s"] = max(old["memory_bytes_per_s"], new["memory_bytes_per_s"])
    merged["flops_per_s"] = max(old["flops_per_s"], new["flops_per_s"])
    merged["under_load"] = bool(old.get("under_load", True)) and bool(new.get("under_load", True))
    if merged["under_load"] or not new.get("under_load", True):
        return merged
    merged["how"] = old.get("how", new.get("how"))  # the quiet measurement's words describe the figures kept
    return merged
