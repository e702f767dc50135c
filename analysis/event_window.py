"""The part of a trace the app draws or lists at full detail: a time range of events, a bounded page of a table,
and what a window of the run holds (issue 42: "select a range and see what is in it").

Why: a big trace's frame is memory-mapped from the cache's entry (trace_cache.timelines), and a view that filtered
it with a mask over every row would read (fault in) every column of millions of rows for each redraw of a range
of a few steps. The frame is sorted by ts (parsers.timeline), so a range is a binary search on the ts column and a
slice: the rows outside the range are never read, and the slice is a view, not a copy.

A window's contents are the analysis' own work items (analysis.anatomy's `work`: kernels, copies and sets on a GPU
trace; host ops on a CPU trace, the leaf ones counted as kernels, as analysis/steps.py counts them), each in the step
the anatomy placed it in (by the host time of its launch call, as analysis/steps.py places work; the anatomy bounds a
step by its end where steps.py bounds a request's last step by its host range and the request's usual tail, so a
kernel launched between the two could be counted differently: tests/test_window_contents.py checks that every step
of the samples, real traces and captures gets the same count both ways). Its busy time is
analysis.activity.covered_time over the same busy blocks a step's `gpu_busy_ns` is measured on. So
`window(steps=[i])` says what step i's row says: busy equal to its gpu_busy, counts summing to its kernels.
Everything is done on arrays: binary searches on the work sorted by start, groups on the names' categorical codes;
no loop over events.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from stepscope.parsers.timeline import GPU_KINDS, Timeline
from .activity import busy_union, covered_time
from .categories import CATEGORIES
from .event_rows import kind_mask
from .model import Analysis

TABLE_ROWS_SHOWN = 5_000  # rows of a per-step table sent to the browser at once
WINDOW_COLUMNS = ("name", "short_name", "category", "count", "total_us", "mean_us", "share_pct")
NO_NAME = "(no name)"


def range_rows(timeline: Timeline, lo: int, hi: int) -> tuple[int, int]:
    """(first, stop): the rows of the frame whose ts lies in [lo, hi), by binary search on the sorted ts."""
    ts = timeline.events["ts"].to_numpy()
    return int(np.searchsorted(ts, lo, side="left")), int(np.searchsorted(ts, hi, side="left"))


def events_in_range(timeline: Timeline, lo: int, hi: int) -> pd.DataFrame:
    """The events starting in [lo, hi) (ns on the trace's clock), in ts order: a slice of the frame, the rest
    never read."""
    first, stop = range_rows(timeline, lo, hi)
    return timeline.events.iloc[first:stop]


@dataclass(frozen=True)
class TablePage:
    """One page of a table: its rows, where they start, and how many the whole table has."""

    rows: pd.DataFrame
    start: int
    total: int

    @property
    def complete(self) -> bool:
        return len(self.rows) == self.total


def table_page(frame: pd.DataFrame, page: int = 0, size: int = TABLE_ROWS_SHOWN) -> TablePage:
    """Page `page` (from 0; past the end: the last page) of `size` rows of a table, for a view that must not ship
    every row of a long table to the browser (the download keeps them all)."""
    size = max(1, size)
    last = max(0, (len(frame) - 1) // size)
    start = min(max(0, page), last) * size
    return TablePage(frame.iloc[start : start + size], start, len(frame))


@dataclass(frozen=True)
class WorkIndex:
    """The analysis' work items as arrays sorted by start, built once per answer and read by every window."""

    start: np.ndarray  # ns, ascending
    end: np.ndarray
    reach: np.ndarray  # running maximum of end: items before the first whose reach passes t all end by t
    name: pd.Categorical
    short: pd.Categorical
    category: np.ndarray  # codes into CATEGORIES
    kernel: np.ndarray  # counted as a kernel (a CPU trace: a leaf host op), as the steps count them
    step: np.ndarray  # row in analysis.steps of the step that owns the item, -1 outside steps
    busy_start: np.ndarray  # the busy blocks steps are measured on (every device merged)
    busy_end: np.ndarray
    step_start: np.ndarray  # analysis.steps' start_ns, end_ns and kernels
    step_end: np.ndarray
    step_kernels: np.ndarray
    origin_ns: int  # the app's clock: ms are counted from here (analysis.time_origin_ns)
    on_gpu: bool
    event_rows: np.ndarray | None  # each item's row in the timeline's events, None where they do not line up

    @property
    def unit(self) -> str:
        return "kernels" if self.on_gpu else "host ops"


def work_index(timeline: Timeline, analysis: Analysis) -> WorkIndex:
    """The index of `analysis`' work (its anatomy's; computed here when the analysis was made without one)."""
    anat = analysis.anatomy
    if anat is None:
        from .anatomy import anatomy

        anat = anatomy(timeline, analysis)
    work = anat.work
    start = work["start_ns"].to_numpy(dtype=np.int64)
    order = None if len(start) < 2 or bool((start[1:] >= start[:-1]).all()) else np.argsort(start, kind="stable")

    def column(values):
        return values if order is None else values[order]

    start, end = column(start), column(work["end_ns"].to_numpy(dtype=np.int64))
    name = work["name"].array
    name = name if isinstance(name, pd.Categorical) else pd.Categorical(np.asarray(name, dtype=object))
    short = work["short"].array
    short = short if isinstance(short, pd.Categorical) else pd.Categorical(np.asarray(short, dtype=object))
    steps = analysis.steps
    return WorkIndex(
        start=start,
        end=end,
        reach=np.maximum.accumulate(end) if len(end) else end,
        name=name if order is None else name.take(order),
        short=short if order is None else short.take(order),
        category=column(np.asarray(work["category"].array.codes, dtype=np.int64)),
        kernel=column(work["leaf"].to_numpy(dtype=bool)),
        step=column(work["step"].to_numpy(dtype=np.int64)),
        **dict(zip(("busy_start", "busy_end"), _busy_blocks(analysis), strict=True)),
        step_start=steps["start_ns"].to_numpy(dtype=np.int64),
        step_end=steps["end_ns"].to_numpy(dtype=np.int64),
        step_kernels=steps["kernels"].to_numpy(dtype=np.int64),
        origin_ns=int(analysis.time_origin_ns),
        on_gpu=bool(anat.on_gpu),
        event_rows=_event_rows(timeline, anat.on_gpu, len(start), order),
    )


def _busy_blocks(analysis: Analysis) -> tuple[np.ndarray, np.ndarray]:
    """The blocks analysis.pipeline measures a step's busy time on: one device's own, else every device's merged."""
    blocks = list(analysis.busy_intervals.values())
    if not blocks:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    if len(blocks) == 1:
        return np.asarray(blocks[0][0], dtype=np.int64), np.asarray(blocks[0][1], dtype=np.int64)
    return busy_union(np.concatenate([b[0] for b in blocks]), np.concatenate([b[1] for b in blocks]))


def _event_rows(timeline: Timeline, on_gpu: bool, n: int, order: np.ndarray | None) -> np.ndarray | None:
    """Each work item's row in the events, when the work is every device-work row (a GPU trace) or every host op
    (a CPU trace) in order; None when the analysis read a part of the trace (one process of several)."""
    rows = np.flatnonzero(kind_mask(timeline.events, GPU_KINDS if on_gpu else ["cpu_op"]))
    if len(rows) != n:
        return None
    return rows if order is None else rows[order]


MAX_MS = 1e12  # about 32 years: a time beyond it is a typing error, and its ns would not fit the clock's int64


def ms_to_ns(index: WorkIndex, ms: float) -> int:
    """A time in ms from the trace's start (the app's clock) on the trace's own clock in ns; ValueError (one line)
    for one that is not a finite number within MAX_MS of the start."""
    value = float(ms)
    if not math.isfinite(value) or abs(value) > MAX_MS:
        raise ValueError(f"{ms!r} ms is not a time in the trace (a finite number of ms from its start)")
    return index.origin_ns + round(value * 1e6)


def range_window(index: WorkIndex, lo: int, hi: int) -> pd.DataFrame:
    """What [lo, hi) (ns, the trace's clock) holds: one row per kernel name (WINDOW_COLUMNS), each kernel's time
    clipped to the range; attrs wall_us, busy_us, idle_us and the rest (`_attrs`)."""
    if hi < lo:
        raise ValueError(f"a window ends before it starts ({_ms(index, hi)} ms < {_ms(index, lo)} ms)")
    first = int(np.searchsorted(index.reach, lo, side="left"))  # the first item that may still run at lo
    stop = int(np.searchsorted(index.start, hi, side="left"))
    rows = np.arange(first, max(first, stop))
    s, e = index.start[rows], index.end[rows]
    inside = (e > lo) | ((e == s) & (s >= lo))  # overlaps the range; a zero-length item inside it counts too
    rows, s, e = rows[inside], s[inside], e[inside]
    clipped = np.clip(np.minimum(e, hi) - np.maximum(s, lo), 0, None)
    busy = int(covered_time(index.busy_start, index.busy_end, np.array([lo]), np.array([hi]))[0])
    frame = _kernel_table(index, rows, clipped)
    frame.attrs.update(_attrs(index, rows, clipped, wall_ns=hi - lo, busy_ns=busy, span=(lo, hi)))
    return frame


def steps_window(index: WorkIndex, steps: Iterable[int]) -> pd.DataFrame:
    """What the steps (rows of analysis.steps) hold: the work they own, clipped to their spans (a step's time
    adds up to its span), as range_window's rows; wall is the sum of their spans, busy the sum of their busy."""
    n = len(index.step_start)
    chosen = np.unique(np.asarray(list(steps), dtype=np.int64))
    if len(chosen) and (chosen[0] < 0 or chosen[-1] >= n):
        raise ValueError(f"no step {int(chosen[0] if chosen[0] < 0 else chosen[-1])}: the trace has {n} steps")
    wanted = np.zeros(n + 1, dtype=bool)  # index 0 stands for "outside steps" (-1)
    wanted[chosen + 1] = True
    rows = np.flatnonzero(wanted[index.step + 1])
    owner = index.step[rows]
    lo, hi = index.step_start[owner], index.step_end[owner]
    clipped = np.clip(np.minimum(index.end[rows], hi) - np.maximum(index.start[rows], lo), 0, None)
    starts, ends = index.step_start[chosen], index.step_end[chosen]
    busy = int(covered_time(index.busy_start, index.busy_end, starts, ends).sum())
    span = (int(starts.min()), int(ends.max())) if len(chosen) else (index.origin_ns, index.origin_ns)
    frame = _kernel_table(index, rows, clipped)
    frame.attrs.update(_attrs(index, rows, clipped, wall_ns=int((ends - starts).sum()), busy_ns=busy, span=span))
    frame.attrs["steps"] = chosen.tolist()
    counted = int(index.kernel[rows].sum())
    if counted != int(index.step_kernels[chosen].sum()):  # the anatomy placed some work elsewhere (the docstring)
        frame.attrs["notes"] = [
            f"{counted:,} {index.unit} placed in these steps by the anatomy, "
            f"{int(index.step_kernels[chosen].sum()):,} by the steps' own count: a launch near a request's end"
        ]
    return frame


def _attrs(index: WorkIndex, rows: np.ndarray, clipped: np.ndarray, wall_ns: int, busy_ns: int, span) -> dict:
    kernel = index.kernel[rows]
    copies = ~kernel if index.on_gpu else np.zeros(len(rows), dtype=bool)  # a CPU trace's outer ops are not work
    return {
        "start_ms": _ms(index, span[0]),
        "end_ms": _ms(index, span[1]),
        "wall_us": wall_ns / 1e3,
        "busy_us": busy_ns / 1e3,
        "idle_us": (wall_ns - busy_ns) / 1e3,
        "unit": index.unit,
        "kernels": int(kernel.sum()),
        "copies": int(copies.sum()),
        "copies_us": float(clipped[copies].sum()) / 1e3,
        "categories": _categories(index.category[rows][kernel], clipped[kernel]),
    }


def _ms(index: WorkIndex, ns: int) -> float:
    return (int(ns) - index.origin_ns) / 1e6


def _categories(codes: np.ndarray, time_ns: np.ndarray) -> dict[str, dict[str, float]]:
    """{category: {"count", "total_us"}} of the window's kernels, largest time first."""
    n = len(CATEGORIES)
    valid = (codes >= 0) & (codes < n)
    count = np.bincount(codes[valid], minlength=n)
    total = np.bincount(codes[valid], weights=time_ns[valid], minlength=n)
    order = sorted(np.flatnonzero(count), key=lambda c: (-total[c], c))  # a dozen categories at most
    return {CATEGORIES[c]: {"count": int(count[c]), "total_us": float(total[c]) / 1e3} for c in order}


def _kernel_table(index: WorkIndex, rows: np.ndarray, clipped: np.ndarray) -> pd.DataFrame:
    """One row per kernel name among `rows` (the kernels only), grouped on the names' codes: count, time (the
    clipped ns), mean, share of the window's kernel time, the short name and the category most of its time is
    in (a name whose kernels a module refines is in two categories; the window's categories keep both)."""
    keep = index.kernel[rows]
    rows, time_ns = rows[keep], clipped[keep].astype(np.float64)
    codes = np.asarray(index.name.codes)[rows]
    uniq, first, group = np.unique(codes, return_index=True, return_inverse=True)
    count = np.bincount(group, minlength=len(uniq))
    total = np.bincount(group, weights=time_ns, minlength=len(uniq))
    n_cat = len(CATEGORIES)
    cat = np.clip(index.category[rows], 0, n_cat - 1)
    by_cat = np.bincount(group * n_cat + cat, weights=time_ns + 1e-6, minlength=len(uniq) * n_cat)
    category = np.argmax(by_cat.reshape(len(uniq), n_cat), axis=1) if len(uniq) else np.empty(0, np.int64)
    names = np.append(np.asarray(index.name.categories, dtype=object), NO_NAME)[uniq]  # code -1: the last
    short_codes = np.asarray(index.short.codes)[rows][first]
    shorts = np.append(np.asarray(index.short.categories, dtype=object), NO_NAME)[short_codes]
    all_time = total.sum()
    frame = pd.DataFrame(
        {
            "name": names.astype(object),
            "short_name": shorts.astype(object),
            "category": np.asarray(CATEGORIES, dtype=object)[category],
            "count": count.astype(np.int64),
            "total_us": total / 1e3,
            "mean_us": np.divide(total, np.maximum(count, 1)) / 1e3,
            "share_pct": 100.0 * total / all_time if all_time > 0 else np.zeros(len(uniq)),
        },
        columns=list(WINDOW_COLUMNS),
    )
    return frame.sort_values(["total_us", "count"], ascending=False, kind="stable").reset_index(drop=True)


def window_json(frame: pd.DataFrame) -> dict:
    """The `window` object of `analyze --window A:B --json` (DESIGN.md)."""
    keys = ("start_ms", "end_ms", "wall_us", "busy_us", "idle_us", "unit")
    out = {key: frame.attrs.get(key) for key in keys}
    out["kernels"] = [
        {
            "name": str(row["name"]),
            "short_name": str(row["short_name"]),
            "category": str(row["category"]),
            "count": int(row["count"]),
            "total_us": round(float(row["total_us"]), 3),
            "mean_us": round(float(row["mean_us"]), 3),
            "share_pct": round(float(row["share_pct"]), 3),
        }
        for row in frame.to_dict("records")
    ]
    out["categories"] = frame.attrs.get("categories", {})
    return out
