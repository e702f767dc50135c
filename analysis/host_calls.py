"""The longest single runtime call (a launch, copy or synchronize) that holds the host while the GPU idles.

A median over steps hides one call that blocks for half a second (SGLang's MI300X decode step: one
hipMemcpyWithStream of 463 ms inside a 474 ms step). The call is priced by the device idle time it overlaps:
the host waiting on a busy GPU costs nothing; the host stuck in a call while the GPU has nothing to do is the
step's time.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from stepscope.parsers.timeline import HOST_LAUNCH_KINDS
from .activity import Activity, covered_time
from .event_rows import kind_mask
from .model import Finding
from .number_format import format_value

CANDIDATES = 64  # the longest calls examined (a trace has millions of calls; only the longest can matter)
MIN_IDLE_US = 1_000.0  # a call is a finding when the GPU idles at least this long during it
MIN_STEP_SHARE = 0.10  # and that is at least this share of the step it lies in


def long_host_call(act: Activity, busy: tuple[np.ndarray, np.ndarray], steps: pd.DataFrame) -> list[Finding]:
    """A finding for the runtime call inside a step that overlaps the most device idle time, when it matters."""
    if not act.on_gpu or not len(steps):
        return []
    ev = act.events
    rows = np.flatnonzero(kind_mask(ev, HOST_LAUNCH_KINDS))
    if not len(rows):
        return []
    dur = ev["dur"].to_numpy()[rows]
    top = rows[np.argsort(-dur, kind="stable")[:CANDIDATES]]
    start = ev["ts"].to_numpy()[top]
    end = start + ev["dur"].to_numpy()[top]
    idle = (end - start) - covered_time(busy[0], busy[1], start, end)
    step = np.searchsorted(steps["start_ns"].to_numpy(), start, side="right") - 1
    inside = (step >= 0) & (start < steps["end_ns"].to_numpy()[np.maximum(step, 0)])
    if not inside.any():
        return []
    best = int(np.flatnonzero(inside)[np.argmax(idle[inside])])
    row = int(step[best])
    span_us = float((steps["end_ns"].iloc[row] - steps["start_ns"].iloc[row]) / 1e3)
    idle_us, call_us = float(idle[best] / 1e3), float((end[best] - start[best]) / 1e3)
    if idle_us < MIN_IDLE_US or idle_us < MIN_STEP_SHARE * span_us:
        return []
    name = str(ev["name"].iloc[top[best]])[:80]
    kind = str(steps["kind"].iloc[row])
    return [
        Finding(
            "long-host-call",
            "critical" if idle_us >= 0.5 * span_us else "warn",
            f"One {name} call holds the host {_ms(call_us)} while the GPU idles ({idle_us / span_us:.0%} of "
            f"step {row})",
            f"The longest runtime call in a step: {name} in {kind} step {row} lasts {_ms(call_us)}, and the GPU has "
            f"nothing to run for {_ms(idle_us)} of it (the step is {_ms(span_us)}). {_why(name)}",
            {"call_us": call_us, "idle_us": idle_us, "step": row, "step_us": span_us},
            cost_us=idle_us,
            saving_us=idle_us,
            at_ns=(int(start[best]), int(end[best])),
        )
    ]


def _why(name: str) -> str:
    low = name.lower()
    if "memcpy" in low and "async" not in low:
        return (
            "A synchronous copy waits for the stream's earlier work and copies through pageable host memory: use "
            "pinned buffers and non_blocking copies, or find what the stream was waiting on."
        )
    if "synchronize" in low:
        return "The host waits for the device, yet the device is idle: it waits on another stream, event or rank."
    if "graphlaunch" in low:
        return "A graph's first replay uploads it to the device: replay each captured graph once before profiling."
    if "malloc" in low or "free" in low:
        return "Device allocation synchronises: let the caching allocator keep memory, or allocate before the loop."
    return "A launch call blocks when the launch queue is full or a module loads lazily on first use."


def _ms(us: float) -> str:
    return format_value(us, "us")  # analysis.number_format: as every output writes a time
