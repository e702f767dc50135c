"""GPU idle gaps: holes in the union of device work, where they lie and why they happened."""

from __future__ import annotations

import numpy as np
import pandas as pd
from stepscope.analysis.activity import Activity
from stepscope.analysis.model import GAP_COLUMNS


def find_gaps(
    act: Activity, busy_by_device: dict[int, tuple[np.ndarray, np.ndarray]], steps: pd.DataFrame, threshold_ns: int
) -> pd.DataFrame:
    frames = []
    for device, (bs, be) in busy_by_device.items():
        if len(bs) < 2:
            continue
        g0, g1 = be[:-1], bs[1:]
        keep = (g1 - g0) >= max(threshold_ns, 1)
        g0, g1 = g0[keep], g1[keep]
        frames.append(
            pd.DataFrame(
                {
                    "start_ns": g0,
                    "end_ns": g1,
                    "dur_ns": g1 - g0,
                    "device": device,
                    "cause": _causes(act, device, g0, g1),
                }
            )
        )
    if not frames:
        return pd.DataFrame(
            {c: pd.Series(dtype=object if c in ("placement", "cause") else "int64") for c in GAP_COLUMNS}
        )
    gaps = pd.concat(frames, ignore_index=True).sort_values("start_ns", kind="stable").reset_index(drop=True)
    placement, step = _placement(gaps, steps)
    gaps["placement"] = placement
    gaps["step"] = step
    return gaps[list(GAP_COLUMNS)]


def _causes(act: Activity, device: int, g0: np.ndarray, g1: np.ndarray) -> np.ndarray:
    """Why the GPU sat idle, judged by the work that ended the gap.

    other: that work was already queued when the GPU went idle (its launch call came earlier), or its launch
    is not in the trace: the host is not what the GPU waited for.
    Otherwise the host was late, and the gap is sync when the host was blocked in a synchronize call then
    (or a device-to-host copy had just finished: the host was waiting for its result), else launch.
    """
    if not act.on_gpu:
        return np.full(len(g0), "other", dtype=object)
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
    cause = np.where(in_sync | after_d2h, "sync", "launch")
    return np.where(host_late, cause, "other").astype(object)


def _overlaps(s: np.ndarray, e: np.ndarray, g0: np.ndarray, g1: np.ndarray) -> np.ndarray:
    """Whether any [s, e) interval overlaps each gap's start [g0, g1)."""
    if len(s) == 0:
        return np.zeros(len(g0), dtype=bool)
    order = np.argsort(s, kind="stable")
    s, running_end = s[order], np.maximum.accumulate(e[order])
    i = np.searchsorted(s, g1, side="left") - 1  # last call starting before the gap ends
    return (i >= 0) & (running_end[np.maximum(i, 0)] > g0)


def _placement(gaps: pd.DataFrame, steps: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    n = len(gaps)
    if steps.empty:
        return np.full(n, "outside generation", dtype=object), np.full(n, -1, dtype=np.int64)
    s, e = steps["start_ns"].to_numpy(), steps["end_ns"].to_numpy()
    mid = (gaps["start_ns"].to_numpy() + gaps["end_ns"].to_numpy()) // 2
    i = np.searchsorted(s, mid, side="right") - 1
    inside = (i >= 0) & (mid < e[np.maximum(i, 0)])
    between = ~inside & (mid > s[0]) & (mid < e.max())
    placement = np.where(inside, "within step", np.where(between, "between steps", "outside generation"))
    return placement.astype(object), np.where(inside, i, -1)
