"""Attribute device work to steps and measure each step.

Work belongs to the step whose host range holds its launch call (correlation),
so kernels replayed by one graph launch, or running long after their step's
host work, still count for the step that issued them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .activity import Activity, covered_time
from .model import STEP_COLUMNS

EXTRA_COLUMNS = ("token_ns", "graph_launches", "gpu_lead_ns", "gpu_tail_ns", "lead_host_ns", "chain")


def measure_steps(
    bounds: pd.DataFrame, act: Activity, busy: tuple[np.ndarray, np.ndarray]
) -> tuple[pd.DataFrame, np.ndarray]:
    """One row per step (STEP_COLUMNS + token_ns, when its output was ready) and, per work item,
    the row of the step it belongs to (-1 = outside steps)."""
    if bounds.empty:
        return _empty_steps(), np.full(len(act.work_start), -1, dtype=np.int64)
    b = bounds.sort_values("start_ns", kind="stable").reset_index(drop=True)
    start = b["start_ns"].to_numpy()
    limit = _attribution_limits(b, act)

    work_step = _place(act.work_anchor, start, limit)
    launch_step = _place(act.launch_start, start, limit)
    n = len(b)
    kernels = np.bincount(work_step[(work_step >= 0) & act.work_is_kernel], minlength=n)
    d2h = np.bincount(work_step[(work_step >= 0) & act.work_is_d2h], minlength=n)
    launches = np.bincount(launch_step[launch_step >= 0], minlength=n)
    graph_launches = np.bincount(launch_step[(launch_step >= 0) & act.launch_is_graph], minlength=n)
    launch_host = np.bincount(launch_step[launch_step >= 0], weights=act.launch_dur[launch_step >= 0], minlength=n)
    sync_step = _place(act.sync_start, start, limit)
    syncs = np.bincount(sync_step[sync_step >= 0], minlength=n)

    # The step's token is ready when the last of its work (host range, device work) has finished.
    work_end = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    attributed = work_step >= 0
    np.maximum.at(work_end, work_step[attributed], act.work_end[attributed])
    host_end = np.minimum(b["host_end_ns"].to_numpy(), limit)
    token = np.maximum(np.maximum(work_end, host_end), start)
    # Steps of one request (a served run: of one run of steps, its chain) tile the time line (start to next start,
    # as ITL is read off a timeline); a request's last step ends with its token.
    chain = _chain(b)
    same_request = np.append(chain[1:] == chain[:-1], False)
    end = np.where(same_request, np.append(start[1:], 0), token)

    # A step's time adds up: busy + idle = its span, lead and tail being the idle parts before its first
    # and after its last device work (DESIGN.md, 2026-12-01: time before the trace's first device work is idle).
    busy_ns = covered_time(busy[0], busy[1], start, end)
    lead_ns, tail_ns = lead_and_tail(busy[0], busy[1], start, end)
    # the part of the lead before the step's first launch call: host preparation (the rest: launched, not started)
    first_launch = _first_launch(launch_step, act.launch_start, n)
    lead_host_ns = np.where(first_launch >= 0, np.clip(first_launch - start, 0, lead_ns), lead_ns)
    steps = pd.DataFrame(
        {
            "kind": b["kind"].to_numpy(),
            "request": b["request"].to_numpy(),
            "index": b["index"].to_numpy(),
            "start_ns": start,
            "end_ns": end,
            "tokens": b["tokens"].array,
            "batch": b["batch"].array,
            "kernels": kernels,
            "launches": launches,
            "launch_host_ns": launch_host.astype(np.int64),
            "gpu_busy_ns": busy_ns,
            "gpu_idle_ns": (end - start) - busy_ns,
            "d2h_copies": d2h,
            "syncs": syncs,
            "label": b["label"].to_numpy(),
            **_composition(b),
            "token_ns": token,
            "graph_launches": graph_launches,
            "gpu_lead_ns": lead_ns,
            "gpu_tail_ns": tail_ns,
            "lead_host_ns": lead_host_ns.astype(np.int64),
            "chain": chain,
        }
    )
    return steps[[*STEP_COLUMNS, *EXTRA_COLUMNS]], work_step


def lead_and_tail(
    block_starts: np.ndarray, block_ends: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per window [lo, hi): the idle time before its first busy moment and after its last, given disjoint
    sorted busy blocks. A window with no busy moment is all lead (tail 0), so lead + tail never exceeds it."""
    span = np.maximum(hi - lo, 0)
    if len(block_starts) == 0 or len(lo) == 0:
        return span.astype(np.int64), np.zeros(len(lo), dtype=np.int64)
    first = np.searchsorted(block_ends, lo, side="right")  # the first block still running at or after lo
    has_first = first < len(block_starts)
    first_start = block_starts[np.minimum(first, len(block_starts) - 1)]
    seen = has_first & (first_start < hi)
    lead = np.where(seen, np.clip(first_start - lo, 0, None), span)
    last = np.searchsorted(block_starts, hi, side="left") - 1  # the last block starting before hi
    last_end = block_ends[np.maximum(last, 0)]
    tail = np.where(seen & (last >= 0), np.clip(hi - last_end, 0, None), 0)
    return lead.astype(np.int64), tail.astype(np.int64)


def _first_launch(launch_step: np.ndarray, launch_start: np.ndarray, n: int) -> np.ndarray:
    """Host time of each step's first launch call, -1 for a step that launched nothing."""
    none = np.iinfo(np.int64).max
    first = np.full(n, none, dtype=np.int64)
    placed = launch_step >= 0
    np.minimum.at(first, launch_step[placed], launch_start[placed])
    return np.where(first < none, first, -1)


def _attribution_limits(b: pd.DataFrame, act: Activity) -> np.ndarray:
    """Host time up to which launches belong to each step.

    Within a request a step owns everything until the next step starts (sampling
    included). The last step of a request owns its host range plus the request's
    typical tail after a forward (sampling), never past the next request.
    """
    start = b["start_ns"].to_numpy()
    host_end = b["host_end_ns"].to_numpy()
    n = len(b)
    next_start = np.append(start[1:], np.iinfo(np.int64).max)
    request = _chain(b)
    same_request = np.append(request[1:] == request[:-1], False)
    tails = next_start - host_end
    # each request's median tail (within-request steps only), looked up for its last step: vectorised
    # in the number of requests (a trace of thousands of one-step requests must not loop over them)
    within = pd.Series(tails[same_request]).groupby(request[same_request]).median()
    last = ~same_request
    tail = within.reindex(request[last]).fillna(0).to_numpy().astype(np.int64)
    ceiling = next_start[last].copy()
    if n and last[-1]:
        ceiling[-1] = act.last_ts + 1
    limit = np.where(same_request, next_start, 0)
    limit[last] = np.minimum(np.maximum(host_end[last] + np.maximum(tail, 0), start[last] + 1), ceiling)
    return limit


def _chain(b: pd.DataFrame) -> np.ndarray:
    """The runs of steps that tile: a served run's chains (analysis.serving), else each request's steps."""
    return b["chain"].to_numpy() if "chain" in b else b["request"].to_numpy()


def _place(times: np.ndarray, start: np.ndarray, limit: np.ndarray) -> np.ndarray:
    """Index of the step whose [start, limit) holds each time, -1 for none (the last step starting at or before
    the time, if the time is before that step's limit)."""
    if len(start) and len(times) > 1 and _ascending(times) and _ascending(start):
        return _place_sorted(times, start, limit)
    idx = np.searchsorted(start, times, side="right") - 1
    if len(start) == 0:
        return idx  # all -1
    ok = (idx >= 0) & (times < limit[np.maximum(idx, 0)])
    return np.where(ok, idx, -1)


def _place_sorted(times: np.ndarray, start: np.ndarray, limit: np.ndarray) -> np.ndarray:
    """_place for ascending times and starts (a CPU trace's host ops, most work): step k holds the run of times
    from the first at or after its start to the first at or after its limit or the next step's start, found by
    two searches per step; the runs are painted with one cumulative sum instead of a search per time."""
    first = np.searchsorted(times, start, side="left")
    stop = np.searchsorted(times, limit, side="left")
    stop = np.maximum(np.minimum(stop, np.append(first[1:], len(times))), first)  # empty when the limit is passed
    k = np.arange(1, len(start) + 1, dtype=np.int64)
    paint = np.zeros(len(times) + 1, dtype=np.int64)
    np.add.at(paint, first, k)  # the runs are disjoint and in order: k + 1 inside step k's run, 0 outside
    np.add.at(paint, stop, -k)
    return np.cumsum(paint[:-1]) - 1


def _ascending(values: np.ndarray) -> bool:
    return bool((values[1:] >= values[:-1]).all())


def _composition(b: pd.DataFrame) -> dict:
    """What each forward holds, as step finding read it (analysis.step_finding.batch_contents)."""
    return {c: b[c].to_numpy() if c in ("model", "opens") else b[c].array for c in COMPOSITION}


COMPOSITION = ("prefill_tokens", "decode_sequences", "model", "opens", "accepted")


def _empty_steps() -> pd.DataFrame:
    columns = [*STEP_COLUMNS, *EXTRA_COLUMNS]
    return pd.DataFrame({c: pd.Series(dtype=object if c in ("kind", "label", "model") else "int64") for c in columns})
