"""Memory counters of a Perfetto trace -> the memory table (parsers.memory_table).

Stepscope's own export (exporters/perfetto_trace.py) writes one counter track per device and figure, named by
`memory_track_name` ("memory allocated · cuda:0", "memory reserved · cuda:0"), and reads them back exactly. A
foreign trace's counter track counts as memory when its name (or a parent's) speaks of memory and of allocated or
reserved bytes ("GPU memory allocated", "mem.reserved"); its device is read from the names ("cuda:1", "GPU 1",
"cpu"), else taken as CUDA 0, and a warning says the tracks were matched by name. Every sample becomes one row
holding that one total (the other -1, `bytes` 0): a counter says what was held, not what changed.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

import numpy as np

from .memory_table import CPU_DEVICE_TYPE, CUDA_DEVICE_TYPE, UNKNOWN, device_label, memory_frame

if TYPE_CHECKING:
    import pandas as pd

    from .timeline import Timeline

MEMORY_GROUP = "Memory"
FIGURES = ("allocated", "reserved")
_OWN = re.compile(r"^memory (?P<figure>allocated|reserved) · (?P<type>cpu|cuda)(?::(?P<device>\d{1,6}))?$")
_FOREIGN_MEMORY = re.compile(r"mem", re.I)
_FOREIGN_FIGURE = re.compile(r"(?P<allocated>alloc)|(?P<reserved>reserv)", re.I)
_FOREIGN_CUDA = re.compile(r"(?:cuda:|GPU\s*|device\s*)(\d{1,6})", re.I)


def memory_track_name(figure: str, device_type: int, device: int) -> str:
    """The counter track Stepscope writes for one device's allocated or reserved bytes."""
    return f"memory {figure} · {device_label(device_type, device)}"


def memory_track(names: list[str]) -> tuple[str, int, int, bool] | None:
    """(figure, device type, device, matched by heuristics) of a counter track from its name and its parents'
    names (nearest first); None when it is not a memory counter."""
    own = _OWN.match(names[0]) if names else None
    if own:
        device_type = CPU_DEVICE_TYPE if own["type"] == "cpu" else CUDA_DEVICE_TYPE
        return own["figure"], device_type, int(own["device"]) if own["device"] else -1, False
    joined = " / ".join(names)
    figure = _FOREIGN_FIGURE.search(names[0]) if names else None
    if figure is None or not _FOREIGN_MEMORY.search(joined):
        return None
    cuda = _FOREIGN_CUDA.search(joined)
    if cuda is None and re.search(r"\bcpu\b|host", joined, re.I):
        return figure.lastgroup or "allocated", CPU_DEVICE_TYPE, -1, True
    return figure.lastgroup or "allocated", CUDA_DEVICE_TYPE, int(cuda.group(1)) if cuda else 0, True


def memory_from_counters(samples: list[tuple[int, int, float]], tracks: dict[int, tuple]) -> pd.DataFrame | None:
    """The memory table from counter samples (ts, track uuid, value); `tracks`: uuid -> memory_track's answer for
    the memory tracks. Samples on other tracks are left out."""
    rows = [(ts, tracks[uuid], value) for ts, uuid, value in samples if uuid in tracks and np.isfinite(value)]
    if not rows:
        return None
    n = len(rows)
    ts = np.fromiter((r[0] for r in rows), np.int64, n)
    values = np.fromiter((r[2] for r in rows), np.float64, n)
    values = np.where(np.abs(values) < 2.0**62, values, UNKNOWN).astype(np.int64)
    is_reserved = np.fromiter((r[1][0] == "reserved" for r in rows), bool, n)
    return memory_frame(
        {
            "ts": ts,
            "device_type": np.fromiter((r[1][1] for r in rows), np.int64, n),
            "device": np.fromiter((r[1][2] for r in rows), np.int64, n),
            "bytes": np.zeros(n, dtype=np.int64),
            "allocated": np.where(is_reserved, UNKNOWN, values),
            "reserved": np.where(is_reserved, values, UNKNOWN),
        }
    )


def with_memory_counters(timeline: Timeline, samples: list[tuple[int, int, float]], chain_of, skipped: str) -> Timeline:
    """The timeline with the memory table of its memory counter tracks, if any. `chain_of(uuid)`: a track and its
    ancestors (each with .name and .is_counter); a track under one named `skipped` (Stepscope's phases) is not read."""
    found = {}
    for uuid in {s[1] for s in samples}:
        chain = chain_of(uuid)
        if chain and chain[0].is_counter and not any(t.name == skipped for t in chain):
            answer = memory_track([t.name for t in chain])
            if answer is not None:
                found[uuid] = answer
    memory = memory_from_counters(samples, found) if found else None
    if memory is None:
        return timeline
    warnings = timeline.meta.warnings
    guessed = sorted({" / ".join(t.name for t in chain_of(u)) for u, a in found.items() if a[3]})
    if guessed:
        warnings += (f"memory counters matched by name (allocated or reserved bytes): {', '.join(guessed)[:300]}",)
    return dataclasses.replace(timeline, meta=dataclasses.replace(timeline.meta, warnings=warnings), memory=memory)
