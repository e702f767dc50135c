"""The arrays every later stage needs, derived once from a Timeline.

"Device work" is GPU kernels, copies and sets when the trace has them. A
CPU-only trace has none, so its leaf host ops stand in for kernels and idle
means no op running: the same step, gap and busy logic then applies unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from stepscope.parsers.timeline import GPU_KINDS, HOST_LAUNCH_KINDS, Timeline
from .categories import _nesting_sort
from .event_rows import isin_ints, kind_mask
from .names import name_matches

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
    events: pd.DataFrame  # the timeline's events (a reference, not a copy)
    first_ts: int
    last_ts: int

    @property
    def host_ops(self) -> pd.DataFrame:
        """Host ops (cpu_op rows), selected when asked for: most callers never read them."""
        return self.events[kind_mask(self.events, ["cpu_op"])]


def derive_activity(timeline: Timeline) -> Activity:
    """Device work, launches and syncs as arrays. Rows are chosen by position (kinds tested on codes) and
    only the columns read are taken: a boolean selection of the events frame would copy a dozen columns."""
    ev = timeline.events
    ts_all, dur_all, corr_all = ev["ts"].to_numpy(), ev["dur"].to_numpy(), ev["correlation"].to_numpy()
    names_all = ev["name"]
    first_ts = int(ts_all[0]) if len(ev) else 0
    last_ts = int((ts_all + dur_all).max()) if len(ev) else 0

    gpu = np.flatnonzero(kind_mask(ev, GPU_KINDS))
    gpu_corr = corr_all[gpu]
    host_calls = np.flatnonzero(kind_mask(ev, HOST_LAUNCH_KINDS))
    is_launch = isin_ints(corr_all[host_calls], gpu_corr[gpu_corr >= 0]) | name_matches(
        names_all, "|".join(LAUNCH_NAME_PARTS), host_calls
    )
    launches = host_calls[is_launch]  # positions, in time order
    sync_calls = host_calls[name_matches(names_all, "|".join(SYNC_NAME_PARTS), host_calls)]
    syncs = _syncs(ts_all, dur_all, sync_calls, np.flatnonzero(kind_mask(ev, ["sync"])))

    if len(gpu):
        gpu_ts = ts_all[gpu]
        gpu_kind = ev["kind"].array.take(gpu)
        names = names_all.array.take(gpu)
        anchor = _launch_time(gpu_corr, corr_all[launches], ts_all[launches])
        work = dict(
            on_gpu=True,
            work_start=gpu_ts,
            work_end=gpu_ts + dur_all[gpu],
            work_device=ev["device"].to_numpy()[gpu],
            work_is_kernel=_is_kind(gpu_kind, "kernel"),
            work_is_d2h=_is_kind(gpu_kind, "memcpy") & name_matches(names, "DtoH|D2H"),
            work_name=names,
            work_anchor=np.where(anchor >= 0, anchor, gpu_ts),
            work_launched=anchor >= 0,
        )
        work.update(busy_start=work["work_start"], busy_end=work["work_end"], busy_device=work["work_device"])
    else:
        cpu = np.flatnonzero(kind_mask(ev, ["cpu_op"]))
        cpu_ts, cpu_dur = ts_all[cpu], dur_all[cpu]
        leaves = cpu[_leaf_ops(ev["tid"].to_numpy()[cpu], cpu_ts, cpu_dur)]
        starts = ts_all[leaves]
        work = dict(
            on_gpu=False,
            work_start=starts,
            work_end=starts + dur_all[leaves],
            work_device=np.full(len(leaves), -1, dtype=np.int64),
            work_is_kernel=np.ones(len(leaves), dtype=bool),
            work_is_d2h=np.zeros(len(leaves), dtype=bool),
            work_name=names_all.array.take(leaves),
            work_anchor=starts,
            work_launched=np.zeros(len(leaves), dtype=bool),
            busy_start=cpu_ts,
            busy_end=cpu_ts + cpu_dur,
            busy_device=np.full(len(cpu), -1, dtype=np.int64),
        )
    return Activity(
        **work,
        launch_start=ts_all[launches],
        launch_dur=dur_all[launches],
        launch_is_graph=name_matches(names_all, "GraphLaunch", launches),
        launch_is_kernel=name_matches(names_all, "LaunchKernel|LaunchCooperativeKernel", launches),
        sync_start=syncs[0],
        sync_end=syncs[1],
        events=ev,
        first_ts=first_ts,
        last_ts=last_ts,
    )


def _is_kind(kinds, kind: str) -> np.ndarray:
    """Which of `kinds` (a categorical, compared on codes, or plain values) are `kind`."""
    if not isinstance(kinds, pd.Categorical):
        return np.asarray(kinds == kind, dtype=bool)
    categories = list(kinds.categories)
    return kinds.codes == categories.index(kind) if kind in categories else np.zeros(len(kinds), dtype=bool)


def _syncs(ts: np.ndarray, dur: np.ndarray, calls: np.ndarray, events: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the host's synchronize calls and sync events (positions), in order of start (calls first
    on a tie)."""
    rows = np.concatenate([calls, events])
    order = np.argsort(ts[rows], kind="stable")
    rows = rows[order]
    return ts[rows], ts[rows] + dur[rows]


def _launch_time(gpu_corr: np.ndarray, corr: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Host start of the call that launched each GPU activity (-1 if none): graph replays share one call.
    `corr`, `starts`: the launch calls' correlations and starts."""
    keep = corr >= 0
    corr, starts = corr[keep], starts[keep]
    if len(corr) == 0:
        return np.full(len(gpu_corr), -1, dtype=np.int64)
    order = np.argsort(corr, kind="stable")
    corr, starts = corr[order], starts[order]
    pos = np.clip(np.searchsorted(corr, gpu_corr), 0, len(corr) - 1)
    return np.where((corr[pos] == gpu_corr) & (gpu_corr >= 0), starts[pos], -1)


def _leaf_ops(tid: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Positions of the host ops with no op nested inside them on the same thread (the CPU's 'kernels'),
    in order of start (stable). The ops come sorted by ts; the (tid, ts, longest first) sort is skipped
    when they already are in that order (one thread, as most CPU traces)."""
    if len(ts) == 0:
        return np.empty(0, dtype=np.int64)
    order = _nesting_sort(tid, ts, dur)  # None: in that order already, nothing to take
    if order is not None:
        tid, ts, dur = tid[order], ts[order], dur[order]
    end = ts + dur
    is_leaf = np.empty(len(ts), dtype=bool)
    is_leaf[-1] = True  # the last op of the last thread
    is_leaf[:-1] = (tid[1:] != tid[:-1]) | (ts[1:] >= end[:-1])  # the next op starts on another thread or after
    leaves = np.flatnonzero(is_leaf) if order is None else order[is_leaf]
    return leaves[np.argsort(ts[is_leaf], kind="stable")]


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
