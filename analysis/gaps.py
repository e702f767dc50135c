"""GPU idle gaps: holes in the union of device work, where they lie and why they happened."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .activity import Activity
from .event_rows import text_column
from .model import GAP_COLUMNS

CAUSES = ("launch", "sync", "other")  # the cause column's values, by code
PLACEMENTS = ("within step", "between steps", "outside generation")


def find_gaps(
    act: Activity, busy_by_device: dict[int, tuple[np.ndarray, np.ndarray]], steps: pd.DataFrame, threshold_ns: int
) -> pd.DataFrame:
    """Idle intervals of at least threshold_ns between busy blocks, per device, ordered by start (stable).

    Causes and placements are worked out as small integer codes and turned into text once, at the end: a
    trace has tens of thousands of gaps and three words for each column."""
    parts = []
    for device, (bs, be) in busy_by_device.items():
        if len(bs) < 2:
            continue
        g0, g1 = be[:-1], bs[1:]
        keep = (g1 - g0) >= max(threshold_ns, 1)
        g0, g1 = g0[keep], g1[keep]
        parts.append((g0, g1, np.full(len(g0), device, dtype=np.int64), _causes(act, device, g0, g1)))
    if not parts:
        return pd.DataFrame(
            {c: pd.Series(dtype=object if c in ("placement", "cause") else "int64") for c in GAP_COLUMNS}
        )
    start, end, device, cause = (np.concatenate(column) for column in zip(*parts, strict=True))
    order = np.argsort(start, kind="stable")
    start, end, device, cause = start[order], end[order], device[order], cause[order]
    placement, step = _placement(start, end, steps)
    gaps = pd.DataFrame(
        {
            "start_ns": start,
            "end_ns": end,
            "dur_ns": end - start,
            "device": device,
            "placement": text_column(PLACEMENTS, placement),
            "step": step,
            "cause": text_column(CAUSES, cause),
        }
    )
    return gaps[list(GAP_COLUMNS)]


def _causes(act: Activity, device: int, g0: np.ndarray, g1: np.ndarray) -> np.ndarray:
    """Why the GPU sat idle, judged by the work that ended the gap.

    other: that work was already queued when the GPU went idle (its launch call came earlier), or its launch
    is not in the trace: the host is not what the GPU waited for.
    Otherwise the host was late, and the gap is sync when the host was blocked in a synchronize call then
    (or a device-to-host copy had just finished: the host was waiting for its result), else launch.
    """
    launch, sync, other = range(len(CAUSES))
    if not act.on_gpu:
        return np.full(len(g0), other, dtype=np.int8)
    on_dev = act.work_device == device
    order = np.argsort(act.work_start[on_dev], kind="stable")
    starts = act.work_start[on_dev][order]
    anchors = act.work_anchor[on_dev][order]
    launched = act.work_launched[on_dev][order]
    nxt = np.clip(np.searchsorted(starts, g1, side="left"), 0, len(starts) - 1)
    host_late = launched[nxt] & (anchors[nxt] >= g0)

    in_sync = _overlaps(act.sync_start, act.sync_end, g0, g1)
    d2h_ends = np.sort(act.work_end[on_dev & act.work_is_d2h])
    j = np.searchsorted(d2h_ends, g0, side="right") - 1
    after_d2h = (j >= 0) & (g0 - d2h_ends[np.maximum(j, 0)] <= 0) if len(d2h_ends) else np.zeros(len(g0), bool)
    cause = np.where(in_sync | after_d2h, sync, launch)
    return np.where(host_late, cause, other).astype(np.int8)


def _overlaps(s: np.ndarray, e: np.ndarray, g0: np.ndarray, g1: np.ndarray) -> np.ndarray:
    """Whether any [s, e) interval overlaps each gap's start [g0, g1)."""
    if len(s) == 0:
        return np.zeros(len(g0), dtype=bool)
    order = np.argsort(s, kind="stable")
    s, running_end = s[order], np.maximum.accumulate(e[order])
    i = np.searchsorted(s, g1, side="left") - 1  # last call starting before the gap ends
    return (i >= 0) & (running_end[np.maximum(i, 0)] > g0)


def _placement(start: np.ndarray, end: np.ndarray, steps: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(PLACEMENTS code, step row or -1) of each gap, judged by its midpoint."""
    n = len(start)
    within, between, outside = range(len(PLACEMENTS))
    if steps.empty:
        return np.full(n, outside, dtype=np.int8), np.full(n, -1, dtype=np.int64)
    s, e = steps["start_ns"].to_numpy(), steps["end_ns"].to_numpy()
    mid = (start + end) // 2
    i = np.searchsorted(s, mid, side="right") - 1
    inside = (i >= 0) & (mid < e[np.maximum(i, 0)])
    is_between = ~inside & (mid > s[0]) & (mid < e.max())
    placement = np.where(inside, within, np.where(is_between, between, outside)).astype(np.int8)
    return placement, np.where(inside, i, -1)
