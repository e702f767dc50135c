"""A CPU trace's work before it is placed in steps: its host ops, each timed by its self time and categorised.

It reads only the events and the category rules, never the steps, so analyze() computes it in a worker thread
while it finds the steps; the anatomy (analysis/anatomy.py) places it in steps and counts layers on it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .categories import Rule, host_op_columns
from .event_rows import kind_mask

HostWork = tuple[pd.DataFrame, tuple[str, ...]]  # host_work(): the work frame (not placed in steps) and its notes


def host_work(events: pd.DataFrame, rules: tuple[Rule, ...] = ()) -> HostWork:
    """A CPU trace's work (its host ops, each timed by its self time and categorised) before it is placed in
    steps, and the notes it gives. It reads only the events and the rules, not the steps: analyze() runs it in a
    thread while it finds the steps.

    The frame is built from arrays without copying them into pandas' blocks (start_ns and anchor_ns share one
    array: anatomy() drops anchor_ns once it has placed the work in steps)."""
    rows = np.flatnonzero(kind_mask(events, ["cpu_op"]))  # sorted by ts, as the events are
    if len(rows) == 0:
        return _empty_work(), ()
    tid, ts, dur = (events[c].array.take(rows).to_numpy(dtype=np.int64) for c in ("tid", "ts", "dur"))
    names = events["name"].array.take(rows)
    cats = host_op_columns(tid, ts, dur, names, rules)
    work = pd.DataFrame(
        {
            "start_ns": ts,
            "end_ns": ts + dur,
            "time_ns": cats["self_ns"],
            "anchor_ns": ts,
            "name": names,
            "short": cats["short"],
            "category": cats["category"],
            "leaf": cats["leaf"],
            "outer": cats["outer"],
        },
        copy=False,
    )
    notes: list[str] = []
    categorical = names if isinstance(names, pd.Categorical) else pd.Categorical(names)
    is_region = np.asarray([str(c).startswith("Torch-Compiled Region") for c in categorical.categories] + [False])
    region = is_region[categorical.codes]
    if region.any():
        notes.append(
            f"{cats['self_ns'][region].sum() / 1e6:.1f} ms of self time inside torch.compile regions "
            "counted as elementwise: inductor's fused kernels run there without op events of their own"
        )
    return work, tuple(notes)


def _empty_work() -> pd.DataFrame:
    """The work frame of a trace without host ops, as the frame of empty columns gave it."""
    empty = pd.DataFrame({c: [] for c in ("ts", "dur", "self_ns", "name", "short", "category", "leaf", "outer")})
    return pd.DataFrame(
        {
            "start_ns": empty["ts"].to_numpy(),
            "end_ns": (empty["ts"] + empty["dur"]).to_numpy(),
            "time_ns": empty["self_ns"].to_numpy(),
            "anchor_ns": empty["ts"].to_numpy(),
            "name": empty["name"].array,
            "short": empty["short"].array,
            "category": empty["category"].array,
            "leaf": empty["leaf"].to_numpy(),
            "outer": empty["outer"].to_numpy(),
        }
    )
