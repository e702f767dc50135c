"""The arrays every later stage needs, derived once from a Timeline.

"Device work" is GPU kernels, copies and sets when the trace has them. A
CPU-only trace has none, so its leaf host ops stand in for kernels and idle
means no op running: the same step, gap and busy logic then applies unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from stepscope.analysis.names import name_matches
from stepscope.parsers.timeline import GPU_KINDS, HOST_LAUNCH_KINDS, Timeline

SYNC_NAME_PARTS = ("Synchronize", "synchronize")
LAUNCH_NAME_PARTS = ("Launch", "launch", "MemcpyAsync", "MemsetAsync", "memcpyAsync", "memsetAsync")


@dataclass(frozen=True)
class Activity:
    on_gpu: bool  # False: CPU-only trace, host ops stand in for kernels
    # device work, sorted by start
    work_start: np.ndarray
    work_end: np.ndarray
    work_device: np.ndarray
    work_is_kernel: np.ndarray
    work_is_d2h: np.ndarray
    work_name: pd.Categorical
    work_anchor: np.ndarray  # host time that placed this work in a step: its launch call, else its own start
    work_launched: np.ndarray  # whether the work's launch call is in the trace
    # what counts as "busy": device work on a GPU; on a CPU-only trace any host op running
    busy_start: np.ndarray
    busy_end: np.ndarray
    busy_device: np.ndarray
    # host launch calls (runtime/driver calls that put work on a device), sorted by start
    launch_start: np.ndarray
    launch_dur: np.ndarray
    launch_is_graph: np.ndarray  # a graph replay: one call, many kernels
    launch_is_kernel: np.ndarray  # a plain kernel launch (copies may block, graphs cost more)
    # host synchronisation calls, sorted by start
    sync_start: np.ndarray
    sync_end: np.ndarray
    # host ops (cpu_op), for step detection and host ends
    host_ops: pd.DataFrame
    first_ts: int
    last_ts: int


def derive_activity(timeline: Timeline) -> Activity:
    ev = timeline.events
    kind = ev["kind"]
    gpu = ev[kind.isin(GPU_KINDS)]
    host_calls = ev[kind.isin(HOST_LAUNCH_KINDS)]
    cpu_ops = ev[kind == "cpu_op"]
    ends = ev["ts"].to_numpy() + ev["dur"].to_numpy()
    first_ts = int(ev["ts"].iloc[0]) if len(ev) else 0
    last_ts = int(ends.max()) if len(ev) else 0

    gpu_corr = gpu["correlation"].to_numpy()
    corr_known = gpu_corr[gpu_corr >= 0]
    is_launch = (
        host_calls["correlation"].isin(corr_known).to_numpy()
        | name_matches(host_calls["name"], "|".join(LAUNCH_NAME_PARTS))
    )
    launches = host_calls[is_launch]
    is_sync_call = name_matches(host_calls["name"], "|".join(SYNC_NAME_PARTS))
    syncs = pd.concat([host_calls[is_sync_call], ev[kind == "sync"]]).sort_values("ts", kind="stable")

    if len(gpu):
        names = gpu["name"]
        anchor = _launch_time(gpu_corr, launches)
        work = dict(
            on_gpu=True,
            work_start=gpu["ts"].to_numpy(),
            work_end=gpu["ts"].to_numpy() + gpu["dur"].to_numpy(),
            work_device=gpu["device"].to_numpy(),
            work_is_kernel=(gpu["kind"] == "kernel").to_numpy(),
            work_is_d2h=(gpu["kind"] == "memcpy").to_numpy() & name_matches(names, "DtoH|D2H"),
            work_name=names.array,
            work_anchor=np.where(anchor >= 0, anchor, gpu["ts"].to_numpy()),
            work_launched=anchor >= 0,
        )
        work.update(busy_start=work["work_start"], busy_end=work["work_end"], busy_device=work["work_device"])
    else:
        leaves = _leaf_ops(cpu_ops)
        starts = leaves["ts"].to_numpy()
        work = dict(
            on_gpu=False,
            work_start=starts,
            work_end=starts + leaves["dur"].to_numpy(),
            work_device=np.full(len(leaves), -1, dtype=np.int64),
            work_is_kernel=np.ones(len(leaves), dtype=bool),
            work_is_d2h=np.zeros(len(leaves), dtype=bool),
            work_name=leaves["name"].array,
            work_anchor=starts,
            work_launched=np.zeros(len(leaves), dtype=bool),
            busy_start=cpu_ops["ts"].to_numpy(),
            busy_end=(cpu_ops["ts"] + cpu_ops["dur"]).to_numpy(),
            busy_device=np.full(len(cpu_ops), -1, dtype=np.int64),
        )
    return Activity(
        **work,
        launch_start=launches["ts"].to_numpy(),
        launch_dur=launches["dur"].to_numpy(),
        launch_is_graph=name_matches(launches["name"], "GraphLaunch"),
        launch_is_kernel=name_matches(launches["name"], "LaunchKernel|LaunchCooperativeKernel"),
        sync_start=syncs["ts"].to_numpy(),
        sync_end=(syncs["ts"] + syncs["dur"]).to_numpy(),
        host_ops=cpu_ops,
        first_ts=first_ts,
        last_ts=last_ts,
    )


def _launch_time(gpu_corr: np.ndarray, launches: pd.DataFrame) -> np.ndarray:
    """Host start of the call that launched each GPU activity (-1 if none): graph replays share one call."""
    corr = launches["correlation"].to_numpy()
    keep = corr >= 0
    corr, starts = corr[keep], launches["ts"].to_numpy()[keep]
    if len(corr) == 0:
        return np.full(len(gpu_corr), -1, dtype=np.int64)
    order = np.argsort(corr, kind="stable")
    corr, starts = corr[order], starts[order]
    pos = np.clip(np.searchsorted(corr, gpu_corr), 0, len(corr) - 1)
    return np.where((corr[pos] == gpu_corr) & (gpu_corr >= 0), starts[pos], -1)


def _leaf_ops(ops: pd.DataFrame) -> pd.DataFrame:
    """Host ops with no op nested inside them on the same thread: the CPU's 'kernels'."""
    if ops.empty:
        return ops
    ordered = ops.sort_values(["tid", "ts", "dur"], ascending=[True, True, False], kind="stable")
    tid = ordered["tid"].to_numpy()
    ts = ordered["ts"].to_numpy()
    end = ts + ordered["dur"].to_numpy()
    next_ts = np.append(ts[1:], np.iinfo(np.int64).max)
    next_tid = np.append(tid[1:], np.iinfo(np.int64).min)
    is_leaf = (next_tid != tid) | (next_ts >= end)
    return ordered[is_leaf].sort_values("ts", kind="stable")


def busy_union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge intervals into disjoint busy periods (sorted input not required)."""
    if len(starts) == 0:
        return starts.astype(np.int64), ends.astype(np.int64)
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    running_end = np.maximum.accumulate(e)
    new_block = np.empty(len(s), dtype=bool)
    new_block[0] = True
    new_block[1:] = s[1:] > running_end[:-1]
    block_starts = s[new_block]
    # a block ends at the running maximum just before the next block opens (times may be negative:
    # no accumulator starting at 0)
    last_of_block = np.append(np.flatnonzero(new_block)[1:] - 1, len(s) - 1)
    block_ends = running_end[last_of_block].astype(np.int64)
    return block_starts, block_ends


def covered_time(block_starts: np.ndarray, block_ends: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Busy time inside each window [lo, hi) given disjoint sorted busy blocks, vectorised over windows."""
    if len(block_starts) == 0 or len(lo) == 0:
        return np.zeros(len(lo), dtype=np.int64)
    cum = np.concatenate([[0], np.cumsum(block_ends - block_starts)])

    def busy_before(t: np.ndarray) -> np.ndarray:
        # busy time in (-inf, t)
        i = np.searchsorted(block_starts, t, side="right")  # blocks starting before t
        full = cum[np.maximum(i - 1, 0)]
        last_start = block_starts[np.maximum(i - 1, 0)]
        last_end = block_ends[np.maximum(i - 1, 0)]
        partial = np.clip(np.minimum(t, last_end) - last_start, 0, None)
        return np.where(i > 0, full + partial, 0)

    return busy_before(hi) - busy_before(lo)
