"""Memory over the run: what the device that ran the model held per step and per phase, and how fast its KV cache
grew per decode step. analysis.memory_model sets these against a model; analysis.memory_findings says what to change.

Read from the Timeline's memory table (parsers.memory_table). A device's allocated and reserved totals are carried
forward from event to event (a Perfetto counter says one of them per sample). Per step: allocated at its end (the
last total at or before it), its change (end minus what was held at its start) and the peak inside it (the most held
from its start to its end, the start included). The KV growth of a decode step is the robust slope of step-end
allocations against the step's position, within each request: the median of the slopes between steps half a request
apart, so the transient copies a dynamic cache makes inside a step, and a step end that catches one, do not move it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd

from stepscope.parsers.memory_table import CPU_DEVICE_TYPE, UNKNOWN, device_label
from stepscope.parsers.timeline import Timeline
from .model import Analysis
from .roofline.gpus import match_gpu
from .summary import MemorySummary

MIN_KV_STEPS = 3  # decode steps of one request needed for a slope
STEP_MEMORY_COLUMNS = ("memory_allocated_end_bytes", "memory_change_bytes", "memory_peak_bytes")


@dataclass(frozen=True)
class DeviceSeries:
    """One device's totals after each of its memory events, in time order (NaN: not said yet)."""

    device_type: int
    device: int
    ts: np.ndarray  # int64 ns
    allocated: np.ndarray  # float64, carried forward
    reserved: np.ndarray  # float64, carried forward; all NaN where the device has no reserve
    first_before: float  # allocated before the first event (its total minus its change), NaN when unknown

    @property
    def label(self) -> str:
        return device_label(self.device_type, self.device)

    def held_at(self, t: np.ndarray, values: np.ndarray | None = None) -> np.ndarray:
        """What was held at each time: the last total at or before it (before the first event: first_before)."""
        values = self.allocated if values is None else values
        i = np.searchsorted(self.ts, np.asarray(t, dtype=np.int64), side="right") - 1
        before = self.first_before if values is self.allocated else np.nan
        return np.where(i >= 0, values[np.clip(i, 0, None)], before) if len(values) else np.full(len(i), np.nan)


def device_series(memory: pd.DataFrame | None) -> dict[tuple[int, int], DeviceSeries]:
    """Each device's series from the memory table, keyed by (device type, device)."""
    if memory is None or not len(memory):
        return {}
    device_type, device = memory["device_type"].to_numpy(), memory["device"].to_numpy()
    key = device_type * (1 << 32) + device
    if (key == key[0]).all():  # one device (a CPU trace, most GPU traces): no sort
        groups = [np.arange(len(key))]
    else:
        order = np.argsort(key, kind="stable")  # each device's rows together, in time order
        cuts = np.flatnonzero(np.diff(key[order])) + 1
        groups = np.split(order, cuts)
    ts, change = memory["ts"].to_numpy(), memory["bytes"].to_numpy()
    allocated_all, reserved_all = memory["allocated"].to_numpy(), memory["reserved"].to_numpy()
    out = {}
    for rows in groups:  # one pass per device
        dt, dev = int(device_type[rows[0]]), int(device[rows[0]])
        allocated, reserved = _carried(allocated_all[rows]), _carried(reserved_all[rows])
        if dt == CPU_DEVICE_TYPE or not np.nanmax(np.append(reserved, 0)) > 0:
            reserved = np.full(len(rows), np.nan)  # the CPU allocator keeps no reserve (Kineto writes 0)
        first = float(allocated[0] - change[rows[0]])
        out[(dt, dev)] = DeviceSeries(dt, dev, ts[rows], allocated, reserved, first)
    return dict(sorted(out.items()))


def _carried(values: np.ndarray) -> np.ndarray:
    """Totals carried forward over the events that do not say them (UNKNOWN), as floats (NaN before the first)."""
    known = values != UNKNOWN
    last = np.maximum.accumulate(np.where(known, np.arange(len(values)), -1))
    out = np.where(last >= 0, values[np.clip(last, 0, None)], 0).astype(np.float64)
    out[last < 0] = np.nan
    return out


def model_device(timeline: Timeline, keys: list[tuple[int, int]]) -> tuple[tuple[int, int], str | None]:
    """(the device that ran the model, a note when that took a guess): the GPU with the most kernels on GPU traces,
    the CPU on CPU-only traces; a GPU trace without that GPU's memory takes the GPU with the most memory events."""
    ev = timeline.events
    gpu = ev["device"].to_numpy()
    gpu = gpu[gpu >= 0]
    cuda = [k for k in keys if k[0] != CPU_DEVICE_TYPE]
    if len(gpu):
        busiest = int(pd.Series(gpu).value_counts().index[0])
        match = [k for k in cuda if k[1] == busiest]
        if match:
            return match[0], None
        if cuda:
            return cuda[0], f"GPU {busiest} ran the kernels but has no memory events: {device_label(*cuda[0])} shown"
        cpu = [k for k in keys if k[0] == CPU_DEVICE_TYPE]
        return (cpu or keys)[0], "the trace has no GPU memory events: host memory shown"
    cpu = [k for k in keys if k[0] == CPU_DEVICE_TYPE]
    return (cpu or keys)[0], None if cpu else f"a trace without GPU work: {device_label(*keys[0])} shown"


def with_memory(timeline: Timeline, analysis: Analysis) -> Analysis:
    """The analysis with each step's memory columns (STEP_MEMORY_COLUMNS), summary.memory and the memory findings
    that need no model; unchanged (summary.memory None) when the trace has no memory events."""
    series = device_series(timeline.memory)
    if not series:
        return analysis
    from .memory_findings import memory_findings

    key, note = model_device(timeline, list(series))
    main = series[key]
    steps = analysis.steps
    per_step = step_memory(main, steps)
    summary = memory_summary(main, steps, per_step, series, timeline, analysis.summary.batch)
    if note:
        summary = dataclasses.replace(summary, notes=(note, *summary.notes))
    steps = steps.assign(**{c: pd.array(per_step[c], dtype="Int64") for c in STEP_MEMORY_COLUMNS})
    result = dataclasses.replace(analysis, steps=steps, summary=dataclasses.replace(analysis.summary, memory=summary))
    return dataclasses.replace(result, findings=(*result.findings, *memory_findings(summary)))


def step_memory(series: DeviceSeries, steps: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per step: allocated at its end, its change, the peak inside it (float, NaN unknown); also the reserved peak."""
    if not len(steps):
        return {c: np.array([], dtype=float) for c in (*STEP_MEMORY_COLUMNS, "reserved_peak")}
    start, end = steps["start_ns"].to_numpy(np.int64), steps["end_ns"].to_numpy(np.int64)
    at_start, at_end = series.held_at(start), series.held_at(end)
    lo = np.searchsorted(series.ts, start, side="right")
    hi = np.searchsorted(series.ts, end, side="right")
    peak = np.fmax(at_start, _segment_max(series.allocated, lo, hi))
    reserved_peak = np.fmax(series.held_at(start, series.reserved), _segment_max(series.reserved, lo, hi))
    return {
        "memory_allocated_end_bytes": at_end,
        "memory_change_bytes": at_end - at_start,
        "memory_peak_bytes": peak,
        "reserved_peak": reserved_peak,
    }


def _segment_max(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """max(values[lo:hi]) for each (lo, hi), NaN for empty ranges; one reduceat when the ranges are in order (steps
    do not overlap), else range by range (a loop over steps, never over events)."""
    out = np.full(len(lo), np.nan)
    full = hi > lo
    if not full.any():
        return out
    a, b = lo[full], hi[full]
    bounds = np.empty(2 * len(a), dtype=np.int64)
    bounds[0::2], bounds[1::2] = a, b
    if (np.diff(bounds) >= 0).all():
        padded = np.append(values, np.nan)  # hi may be len(values)
        out[full] = np.fmax.reduceat(padded, bounds)[0::2]
    else:
        out[full] = [_max_or_nan(values[i:j]) for i, j in zip(a, b, strict=True)]
    return out


def _max_or_nan(values: np.ndarray) -> float:
    return float(np.nanmax(values)) if np.isfinite(values).any() else np.nan


def memory_summary(
    series: DeviceSeries,
    steps: pd.DataFrame,
    per_step: dict[str, np.ndarray],
    every: dict[tuple[int, int], DeviceSeries],
    timeline: Timeline,
    batch: int | None,
) -> MemorySummary:
    """The model device's figures without a model (analysis.memory_model adds the expected ones)."""
    growth, used, basis = kv_growth(steps, per_step["memory_allocated_end_bytes"])
    first_start = int(steps["start_ns"].min()) if len(steps) else None
    resident = _whole(series.held_at(np.array([first_start]))[0]) if first_start is not None else None
    capacity, capacity_note = device_capacity(timeline, series)
    batch_used = batch or 1
    notes = [capacity_note] if capacity_note else []
    if growth is not None and not batch:
        notes.append("batch unknown: taken as 1")
    return MemorySummary(
        device=series.label,
        events=len(series.ts),
        peak_allocated_bytes=_whole(np.nanmax(series.allocated)) if np.isfinite(series.allocated).any() else None,
        peak_reserved_bytes=_whole(np.nanmax(series.reserved)) if np.isfinite(series.reserved).any() else None,
        kv_growth_bytes_per_token=growth,
        kv_growth_steps=used,
        transient_bytes_per_decode_step=_transient(steps, per_step),
        kv_tokens_capacity=kv_tokens_capacity(capacity, resident, growth, batch_used),
        device_memory_bytes=capacity,
        resident_bytes=resident,
        batch=batch_used,
        phases=_phases(steps, per_step),
        requests=_requests(series, steps, per_step),
        devices=[_device_row(s) for k, s in every.items() if s is not series],
        basis=basis,
        notes=tuple(notes),
    )


def kv_growth(steps: pd.DataFrame, end_allocated: np.ndarray) -> tuple[float | None, int, str]:
    """(bytes per decode step of the whole batch, decode steps used, how it was measured): the median of the slopes
    of step-end allocation against step position between decode steps half a request apart, pooled over requests."""
    if not len(steps):
        return None, 0, "no steps"
    decode = (steps["kind"].to_numpy() == "decode") & np.isfinite(end_allocated)
    request = steps["request"].to_numpy()[decode]
    position = steps["index"].to_numpy()[decode].astype(np.float64)
    y = end_allocated[decode]
    order = np.lexsort((position, request))
    request, position, y = request[order], position[order], y[order]
    _, first, counts = np.unique(request, return_index=True, return_counts=True)
    usable = counts >= MIN_KV_STEPS
    if not usable.any():
        return None, 0, f"fewer than {MIN_KV_STEPS} decode steps with memory in any request: KV growth not measured"
    first, counts = first[usable], counts[usable]
    half = counts // 2
    pairs = counts - half
    group = np.repeat(np.arange(len(first)), pairs)
    offset = np.arange(pairs.sum()) - np.repeat(np.cumsum(pairs) - pairs, pairs)
    left = first[group] + offset
    right = left + half[group]
    dx = position[right] - position[left]
    slopes = (y[right] - y[left])[dx > 0] / dx[dx > 0]
    if not len(slopes):
        return None, 0, "decode steps without distinct positions: KV growth not measured"
    used = int(counts.sum())
    basis = (
        f"median of {len(slopes)} slopes of step-end allocation between decode steps half a request apart "
        f"({used} decode steps, {len(first)} request(s)); robust to transient copies inside a step"
    )
    return float(np.median(slopes)), used, basis


def kv_tokens_capacity(capacity: int | None, held: int | None, growth: float | None, batch: int) -> int | None:
    """Tokens of KV per sequence that fit in the device beside `held` (the weights) at `growth` per decode step of
    `batch` sequences: the seed's admission check (needed = tokens x KV per token) turned around."""
    if capacity is None or held is None or growth is None or growth <= 0 or batch < 1:
        return None
    return max(int((capacity - held) // (growth / batch)), 0)


def device_capacity(timeline: Timeline, series: DeviceSeries) -> tuple[int | None, str | None]:
    """(the device's memory size, where it came from when not the trace's own deviceProperties)."""
    if series.device_type == CPU_DEVICE_TYPE:
        return None, None
    info = timeline.meta.devices.get(series.device)
    if info is not None and info.memory_bytes:
        return int(info.memory_bytes), None
    name = info.name if info is not None and info.name else timeline.device_name
    row = match_gpu(name)
    if row is not None and row.capacity_bytes:
        gib = row.capacity_bytes / (1 << 30)
        return row.capacity_bytes, f"device memory {gib:.0f} GiB from the GPU table ({row.name}): the trace has no size"
    return None, None


def _transient(steps: pd.DataFrame, per_step: dict[str, np.ndarray]) -> float | None:
    """Median over decode steps of the peak above what the step keeps at its end."""
    if not len(steps):
        return None
    decode = steps["kind"].to_numpy() == "decode"
    extra = (per_step["memory_peak_bytes"] - per_step["memory_allocated_end_bytes"])[decode]
    extra = extra[np.isfinite(extra)]
    return float(np.median(extra)) if len(extra) else None


def _phases(steps: pd.DataFrame, per_step: dict[str, np.ndarray]) -> dict[str, dict[str, int | None]]:
    out: dict[str, dict[str, int | None]] = {}
    kinds = steps["kind"].to_numpy() if len(steps) else np.array([], dtype=object)
    for kind in ("prefill", "decode", "mixed"):
        rows = kinds == kind
        if not rows.any():
            continue
        out[kind] = {
            "peak_allocated_bytes": _max(per_step["memory_peak_bytes"][rows]),
            "peak_reserved_bytes": _max(per_step["reserved_peak"][rows]),
        }
    return out


def _requests(series: DeviceSeries, steps: pd.DataFrame, per_step: dict[str, np.ndarray]) -> list[dict[str, object]]:
    """Per request: allocated when its first step starts, at its last step's end, and once it is over (the next
    request's start, else the trace's last memory event after it): what a finished request left behind."""
    if not len(steps):
        return []
    frame = pd.DataFrame(
        {
            "request": steps["request"].to_numpy(),
            "start": steps["start_ns"].to_numpy(),
            "end": steps["end_ns"].to_numpy(),
        }
    )
    frame["end_allocated"] = per_step["memory_allocated_end_bytes"]
    grouped = frame.groupby("request", sort=False)
    first_start = grouped["start"].min().sort_values()
    last_end = grouped["end"].max().reindex(first_start.index).to_numpy()
    starts = first_start.to_numpy()
    before = series.held_at(starts)
    last_row = frame.loc[grouped["end"].idxmax().reindex(first_start.index), "end_allocated"].to_numpy()
    after_at = np.append(starts[1:], series.ts[-1] if len(series.ts) else 0)
    after = series.held_at(after_at)
    over = np.append(np.ones(len(starts) - 1, dtype=bool), len(series.ts) > 0 and series.ts[-1] > last_end[-1])
    return [
        {
            "request": int(r),
            "before_bytes": _whole(b),
            "last_step_end_bytes": _whole(e),
            "after_bytes": _whole(a) if ok else None,
        }
        for r, b, e, a, ok in zip(first_start.index, before, last_row, after, over, strict=True)
    ]


def _device_row(series: DeviceSeries) -> dict[str, object]:
    return {
        "device": series.label,
        "events": len(series.ts),
        "peak_allocated_bytes": _max(series.allocated),
        "peak_reserved_bytes": _max(series.reserved),
    }


def _max(values: np.ndarray) -> int | None:
    values = values[np.isfinite(values)]
    return _whole(values.max()) if len(values) else None


def _whole(value: float) -> int | None:
    return int(value) if value is not None and np.isfinite(value) else None
