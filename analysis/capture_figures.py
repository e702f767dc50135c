"""Figures over the capture's time, whatever steps it has: how busy the device was, how much it ran, its longest
wait and its heaviest kernel; the cards of a trace without steps, and `gpu-mostly-idle`.

A trace without generation steps (an Nsight export of a whole program, a training step, a window that missed the
work) still says something at once: the share of the capture the device worked, kernels per second, the longest
stretch with nothing running and the kernel that took most of the time. The capture is the trace's own window, its
first event's start to its last event's end, all kinds (host and device).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .activity import Activity, covered_time
from .model import Finding
from .number_format import format_value

IDLE_SHOWN = 0.20  # a device idle at least this share of a capture without steps gets the finding
IDLE_WARN = 0.50  # ... a warning from this share
UTILISATION_BINS = 400  # points of the utilisation line (about one per three pixels of the page's timeline)


def capture_figures(act: Activity, busy: tuple[np.ndarray, np.ndarray]) -> dict | None:
    """summary.capture (DESIGN.md, 2026-12-04): {"window_ms", "busy_pct", "kernels", "kernels_per_s",
    "longest_idle_ms", "longest_idle_start_ms" (from the capture's start), "top_kernel", "top_kernel_pct"} (device
    work on a GPU trace, host ops on a CPU-only one); None for an empty trace."""
    lo, hi = int(act.first_ts), int(act.last_ts)
    window = hi - lo
    if window <= 0:
        return None
    starts, ends = busy
    busy_ns = int(covered_time(starts, ends, np.array([lo]), np.array([hi]))[0])
    kernels = int(np.count_nonzero(act.work_is_kernel)) if act.on_gpu else len(act.work_start)
    gap_start, gap_ns = longest_idle(starts, ends, lo, hi)
    name, share = _top_kernel(act)
    return {
        "window_ms": window / 1e6,
        "busy_pct": 100.0 * busy_ns / window,
        "kernels": kernels,
        "kernels_per_s": kernels / (window / 1e9),
        "longest_idle_ms": gap_ns / 1e6,
        "longest_idle_start_ms": (gap_start - lo) / 1e6,
        "top_kernel": name,
        "top_kernel_pct": share,
    }


def longest_idle(starts: np.ndarray, ends: np.ndarray, lo: int, hi: int) -> tuple[int, int]:
    """(start, length) in ns of the longest stretch of [lo, hi) with nothing busy, given disjoint sorted busy
    blocks: before the first, between two, or after the last."""
    if not len(starts):
        return lo, hi - lo
    edges_start = np.concatenate([[lo], np.minimum(ends, hi)])
    edges_end = np.concatenate([np.maximum(starts, lo), [hi]])
    gaps = np.clip(edges_end - edges_start, 0, None)
    i = int(np.argmax(gaps))
    return int(edges_start[i]), int(gaps[i])


def _top_kernel(act: Activity) -> tuple[str | None, float | None]:
    """The kernel (host op on a CPU trace) with the most time, by name, and its share of all of it (%)."""
    chosen = act.work_is_kernel if act.on_gpu else np.ones(len(act.work_start), dtype=bool)
    names = act.work_name if isinstance(act.work_name, pd.Categorical) else pd.Categorical(act.work_name)
    codes = np.asarray(names.codes)[chosen]
    dur = (act.work_end - act.work_start)[chosen]
    named = codes >= 0
    if not named.any():
        return None, None
    total = np.bincount(codes[named], weights=dur[named], minlength=len(names.categories))
    top = int(np.argmax(total))
    whole = float(total.sum())
    return str(names.categories[top])[:200], (100.0 * float(total[top]) / whole if whole > 0 else None)


def utilisation(starts: np.ndarray, ends: np.ndarray, lo: int, hi: int, bins: int = UTILISATION_BINS):
    """(bin centres in ns, busy share of each bin 0..1) over [lo, hi): the busy lane as a line, where kernels a
    few microseconds long over a long capture would draw as hairlines."""
    edges = np.linspace(lo, hi, bins + 1).astype(np.int64)
    busy = covered_time(starts, ends, edges[:-1], edges[1:])
    width = np.maximum(edges[1:] - edges[:-1], 1)
    return (edges[:-1] + edges[1:]) / 2, busy / width


def gpu_mostly_idle(capture: dict | None, has_steps: bool, on_gpu: bool, origin_ns: int) -> list[Finding]:
    """A capture without steps whose device is idle most of the time: the host launched too little, or the window
    is mostly idle. Information from IDLE_SHOWN of the capture idle, a warning from IDLE_WARN; no saving (what the
    idle time could hold is not in the trace)."""
    if capture is None or has_steps or not on_gpu:
        return []
    idle = 1.0 - capture["busy_pct"] / 100.0
    if idle < IDLE_SHOWN:
        return []
    window_us = capture["window_ms"] * 1e3
    gap_ms, at_ms = capture["longest_idle_ms"], capture["longest_idle_start_ms"]
    detail = (
        f"Over the {format_value(window_us, 'us')} the trace covers, the GPU runs work "
        f"{format_value(capture['busy_pct'], '%')} of the time ({format_value(capture['kernels'])} kernels, "
        f"{format_value(capture['kernels_per_s'])} a second); the longest stretch with nothing running is "
        f"{format_value(gap_ms, 'ms')}, from {format_value(at_ms, 'ms')} into the capture. Either the host launched "
        "too little (host-bound code, a data loader, waiting on I/O or another process: the host lanes show what it "
        "did meanwhile), or the profile window is mostly idle: start and stop it around the work (torch.profiler's "
        "schedule, nsys --capture-range=cudaProfilerApi). No generation steps were found, so there are no per-step "
        "findings."
    )
    start = origin_ns + int(at_ms * 1e6)
    return [
        Finding(
            "gpu-mostly-idle",
            "warn" if idle >= IDLE_WARN else "info",
            f"The GPU is idle {idle:.0%} of the capture",
            detail,
            {"idle_share": idle, "longest_idle_ms": gap_ms, "kernels_per_s": capture["kernels_per_s"]},
            cost_us=idle * window_us,
            at_ns=(start, start + max(int(gap_ms * 1e6), 1)),
        )
    ]
