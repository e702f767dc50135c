"""Write a Timeline and its Analysis as a Perfetto protobuf trace (opens in ui.perfetto.dev).

Built with the `perfetto` package's StreamingTraceProtoBuilder from TrackDescriptor
and TrackEvent packets on one packet sequence with interned names, so a large
trace streams to disk instead of sitting in memory twice.

What goes in:
  - one lane per GPU stream (grouped under "GPU n · name") with its kernels, copies, sets;
  - per host thread a "host launches" lane (runtime/driver calls) and a "host ops" lane;
  - a "Stepscope phases" group: prefill and decode steps, GPU idle gaps (cause and
    length), and counter tracks for kernels per step and GPU idle per step;
  - a "Memory" group, when the trace has memory events: allocated and reserved bytes per device as counter
    tracks (read back into the memory table by parsers.perfetto_memory).
Every Timeline row is written with its kind as category, its correlation id (plus
a flow arrow from the launch call to each GPU activity it started: a graph launch's to every kernel it replays, the
links analysis/launch_links.py follows), external id and input shapes, so Stepscope's
Perfetto reader rebuilds the same Timeline and re-analysis finds the same steps
and gaps. Slices that overlap without nesting go to extra lanes ("lane 2"),
because Perfetto slices on one track must nest.
"""

from __future__ import annotations

import io
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
import pandas as pd

from stepscope.analysis.model import Analysis
from stepscope.parsers.memory_table import UNKNOWN
from stepscope.parsers.perfetto_memory import FIGURES, MEMORY_GROUP, memory_track_name
from stepscope.parsers.perfetto_reader import (
    EXTERNAL_ID_ANNOTATION,
    HOST_LAUNCH_GROUP,
    HOST_OPS_GROUP,
    INPUT_DIMS_ANNOTATION,
    PHASES_TRACK,
    gpu_group_name,
    gpu_lane_name,
    host_lane_name,
)
from stepscope.parsers.timeline import GPU_KINDS, HOST_LAUNCH_KINDS, Timeline

SEQUENCE_ID = 1
PHASE_CATEGORY = "stepscope.phase"
GAP_CATEGORY = "stepscope.gap"
_INT32_MAX = (1 << 31) - 1
_BEGIN, _END, _COUNTER = 1, 2, 4
_ANNOTATION_IIDS = {EXTERNAL_ID_ANNOTATION: 1, INPUT_DIMS_ANNOTATION: 2}


@dataclass(frozen=True)
class PerfettoExport:
    """What was written, for the CLI's message and the page's caption."""

    path: Path | None
    bytes_written: int
    slices: int
    tracks: int
    steps: int
    gaps: int


def write_perfetto(timeline: Timeline, analysis: Analysis, out_path: str | os.PathLike) -> PerfettoExport:
    """Write the trace to out_path atomically: a temp file in the same folder, then os.replace."""
    out = Path(out_path)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            counts = _write_trace(timeline, analysis, f)
            size = f.tell()
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return PerfettoExport(out, size, *counts)


def perfetto_trace_bytes(timeline: Timeline, analysis: Analysis) -> bytes:
    """The same trace in memory, for a download button or for sending to the Perfetto UI."""
    buf = io.BytesIO()
    _write_trace(timeline, analysis, buf)
    return buf.getvalue()


class _Tracks:
    """Allocates track uuids and writes their descriptors once."""

    def __init__(self, builder) -> None:
        self.builder = builder
        self.uuids: dict[object, int] = {}

    def get(self, key: object, describe) -> int:
        uuid = self.uuids.get(key)
        if uuid is None:
            uuid = self.uuids[key] = len(self.uuids) + 1
            packet = self.builder.create_packet()
            packet.trusted_packet_sequence_id = SEQUENCE_ID
            packet.track_descriptor.uuid = uuid
            describe(packet.track_descriptor)
            self.builder.write_packet(packet)
        return uuid


def _write_trace(timeline: Timeline, analysis: Analysis, f: IO[bytes]) -> tuple[int, int, int, int]:
    from perfetto.trace_builder.proto_builder import StreamingTraceProtoBuilder

    ev = timeline.events
    if len(ev) and int(ev["ts"].min()) < 0:
        raise ValueError("the trace has negative timestamps, which a Perfetto trace cannot hold")
    builder = StreamingTraceProtoBuilder(f)
    names = pd.Index(ev["name"].cat.categories.astype(str) if len(ev) else [])
    kinds = list(ev["kind"].cat.categories.astype(str)) if len(ev) else []
    phase_names = [_step_name(row) for row in analysis.steps.itertuples(index=False)]
    gap_names = [_gap_name(row) for row in analysis.gaps.itertuples(index=False)]
    extra_names = list(dict.fromkeys(phase_names + gap_names))
    _write_interned_state(builder, [*names, *extra_names], [*kinds, PHASE_CATEGORY, GAP_CATEGORY])
    tracks = _Tracks(builder)
    phases_root = tracks.get("phases", lambda d: setattr(d, "name", PHASES_TRACK))

    slices, flow_ids = _timeline_slices(timeline, tracks)
    extra_iid = {n: len(names) + i + 1 for i, n in enumerate(extra_names)}
    step_slices = _step_slices(analysis, tracks, phases_root, phase_names, extra_iid, len(kinds))
    gap_slices = _gap_slices(analysis, tracks, phases_root, gap_names, extra_iid, len(kinds))
    counters = _step_counters(analysis, tracks, phases_root) + _memory_counters(timeline, tracks)
    _write_events(builder, [slices, step_slices, gap_slices], counters, flow_ids)
    n_slices = sum(len(s["ts"]) for s in (slices, step_slices, gap_slices))
    return n_slices, len(tracks.uuids), len(analysis.steps), len(analysis.gaps)


def _write_interned_state(builder, names: list[str], categories: list[str]) -> None:
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TracePacket

    packet = builder.create_packet()
    packet.trusted_packet_sequence_id = SEQUENCE_ID
    packet.sequence_flags = TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
    interned = packet.interned_data
    for iid, name in enumerate(names, start=1):
        interned.event_names.add(iid=iid, name=name)
    for iid, name in enumerate(categories, start=1):
        interned.event_categories.add(iid=iid, name=name)
    for name, iid in _ANNOTATION_IIDS.items():
        interned.debug_annotation_names.add(iid=iid, name=name)
    builder.write_packet(packet)


def _timeline_slices(timeline: Timeline, tracks: _Tracks) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Every Timeline row as a slice on its lane, with the columns the packets need; and the flow ids their
    flow_lo:flow_hi ranges index (_flows)."""
    ev = timeline.events
    n = len(ev)
    kind = ev["kind"].astype(str).to_numpy() if n else np.zeros(0, dtype=object)
    on_gpu = np.isin(kind, (*GPU_KINDS, "gpu_annotation"))
    launch = np.isin(kind, HOST_LAUNCH_KINDS)
    pid, tid = ev["pid"].to_numpy(), ev["tid"].to_numpy()
    device, stream = ev["device"].to_numpy(), ev["stream"].to_numpy()
    ts, end = ev["ts"].to_numpy(), ev["ts"].to_numpy() + ev["dur"].to_numpy()
    family = np.where(on_gpu, 0, np.where(launch, 1, 2))
    groups = pd.DataFrame({"f": family, "p": pid, "t": tid, "d": np.where(on_gpu, device, -1), "s": stream})
    group_codes, group_keys = pd.factorize(pd.MultiIndex.from_frame(groups)) if n else (np.zeros(0, int), [])
    lanes = _lanes(group_codes, ts, end)
    meta = timeline.meta
    width = int(lanes.max()) + 1 if n else 1
    combo_codes, combos = pd.factorize(group_codes * width + lanes)
    uuids = np.zeros(len(combos), dtype=np.int64)
    for j, combo in enumerate(combos):
        code, lane = divmod(int(combo), width)
        f, p, t, d, s = (int(x) for x in group_keys[code])
        if f == 0:
            parent = tracks.get(("gpu", d), _named(gpu_group_name(d, _device_name(meta, d))))
            uuid = tracks.get(("lane", f, p, t, d, s, lane), _named(gpu_lane_name(d, s, p, t, lane), parent))
        else:
            parent = tracks.get(("process", p), _process(p, meta.process_names.get(p)))
            group = HOST_LAUNCH_GROUP if f == 1 else HOST_OPS_GROUP
            label = meta.thread_names.get((p, t))
            uuid = tracks.get(("lane", f, p, t, d, s, lane), _named(host_lane_name(group, p, t, label, lane), parent))
        uuids[j] = uuid
    track = uuids[combo_codes] if n else np.zeros(0, dtype=np.int64)
    kind_codes = ev["kind"].cat.codes.to_numpy().astype(np.int64) + 1 if n else np.zeros(0, np.int64)
    corr = ev["correlation"].to_numpy()
    flow_lo, flow_hi, flow_in, flow_ids = _flows(corr, on_gpu, launch)
    dims = ev["input_dims"].astype(str).to_numpy() if "input_dims" in ev else np.full(n, "", dtype=object)
    return {
        "ts": ts,
        "end": end,
        "track": track,
        "name_iid": ev["name"].cat.codes.to_numpy().astype(np.int64) + 1 if n else np.zeros(0, np.int64),
        "category_iid": kind_codes,
        "correlation": corr,
        "external_id": ev["external_id"].to_numpy(),
        "input_dims": dims,
        "flow_lo": flow_lo,
        "flow_hi": flow_hi,
        "flow_in": flow_in,
        "annotations": np.full(n, None, dtype=object),
    }, flow_ids


def _device_name(meta, device: int) -> str | None:
    info = meta.devices.get(device)
    return info.name if info and info.name else None


def _named(name: str, parent: int = 0):
    def describe(desc) -> None:
        desc.name = name
        if parent:
            desc.parent_uuid = parent

    return describe


def _process(pid: int, name: str | None):
    """A process track when the pid fits Perfetto's int32 (the UI then groups its lanes), else a named one."""

    def describe(desc) -> None:
        if 0 <= pid <= _INT32_MAX:
            desc.process.pid = pid
            desc.process.process_name = name or f"host process {pid}"
        else:
            desc.name = name or f"host process {pid}"

    return describe


def _flows(corr: np.ndarray, on_gpu: np.ndarray, launch: np.ndarray) -> tuple[np.ndarray, ...]:
    """The launch -> device work links as flows, the same links as analysis/launch_links.py (by correlation id):
    every linked GPU activity ends a flow of its own (id: its row + 1), and the launch call (the first with that
    id) starts all of its work's flows, a graph launch's one per kernel it replays. (flow_lo, flow_hi, flow_in):
    the call's flows are ids[flow_lo:flow_hi] of the returned ids, in _write_events."""
    n = len(corr)
    flow_in = np.zeros(n, dtype=np.int64)
    lo, hi = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    linked = np.intersect1d(corr[on_gpu & (corr >= 0)], corr[launch & (corr >= 0)])
    work = np.flatnonzero(on_gpu & np.isin(corr, linked))
    work = work[np.argsort(corr[work], kind="stable")]  # grouped by correlation, in row order within a group
    flow_in[work] = work + 1
    calls = np.flatnonzero(launch & np.isin(corr, linked))
    _, first = np.unique(corr[calls], return_index=True)
    calls = calls[first]
    lo[calls] = np.searchsorted(corr[work], corr[calls], side="left")
    hi[calls] = np.searchsorted(corr[work], corr[calls], side="right")
    return lo, hi, flow_in, work + 1


def _lanes(group_codes: np.ndarray, ts: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Lane per slice so that slices on one lane either nest or do not overlap (Perfetto's rule)."""
    lanes = np.zeros(len(ts), dtype=np.int64)
    if len(ts) < 2:
        return lanes
    order = np.lexsort((-end, ts, group_codes))
    g, s, e = group_codes[order], ts[order], end[order]
    same = g[1:] == g[:-1]
    # fast path: within each group every slice starts after all earlier ones ended
    if not (same & (s[1:] < np.maximum.accumulate(e)[:-1])).any() or _disjoint_within_groups(g, s, e):
        return lanes
    stacks: list[list[int]] = []
    current = None
    for i in range(len(order)):
        if g[i] != current:
            current, stacks = g[i], []
        start, stop = s[i], e[i]
        for lane, stack in enumerate(stacks):
            while stack and stack[-1] <= start:
                stack.pop()
            if not stack or stop <= stack[-1]:
                stack.append(stop)
                lanes[order[i]] = lane
                break
        else:
            stacks.append([stop])
            lanes[order[i]] = len(stacks) - 1
    return lanes


def _disjoint_within_groups(g: np.ndarray, s: np.ndarray, e: np.ndarray) -> bool:
    """The global running max can carry one group's end into the next: recheck group by group."""
    starts = np.flatnonzero(np.append(True, g[1:] != g[:-1]))
    for a, b in zip(starts, [*starts[1:], len(g)], strict=True):
        if b - a > 1 and (s[a + 1 : b] < np.maximum.accumulate(e[a:b])[:-1]).any():
            return False
    return True


def _step_name(row) -> str:
    tokens = "" if pd.isna(row.tokens) else f" · {int(row.tokens)} tok"
    return f"{row.kind} r{int(row.request)} #{int(row.index)}{tokens}"


def _gap_name(row) -> str:
    return f"idle {row.dur_ns / 1000:.1f} us · {row.cause}"


def _step_slices(analysis: Analysis, tracks: _Tracks, root: int, names: list[str], iid: dict, n_kinds: int) -> dict:
    steps = analysis.steps
    track = tracks.get("steps", _named("steps", root)) if len(steps) else 0
    notes = [
        {
            "kind": str(r.kind),
            "request": int(r.request),
            "index": int(r.index),
            "tokens": None if pd.isna(r.tokens) else int(r.tokens),
            "batch": None if pd.isna(r.batch) else int(r.batch),
            "kernels": int(r.kernels),
            "launches": int(r.launches),
            "gpu_busy_us": r.gpu_busy_ns / 1000.0,
            "gpu_idle_us": r.gpu_idle_ns / 1000.0,
            "label": str(r.label),
        }
        for r in steps.itertuples(index=False)
    ]
    return _derived_slices(steps["start_ns"], steps["end_ns"], track, names, iid, n_kinds + 1, notes)


def _gap_slices(analysis: Analysis, tracks: _Tracks, root: int, names: list[str], iid: dict, n_kinds: int) -> dict:
    gaps = analysis.gaps
    devices = gaps["device"].to_numpy()
    track = np.zeros(len(gaps), dtype=np.int64)
    for d in np.unique(devices):
        track[devices == d] = tracks.get(("gaps", int(d)), _named(f"GPU {int(d)} idle gaps", root))
    notes = [
        {
            "cause": str(r.cause),
            "dur_us": r.dur_ns / 1000.0,
            "placement": str(r.placement),
            "step": int(r.step),
            "device": int(r.device),
        }
        for r in gaps.itertuples(index=False)
    ]
    return _derived_slices(gaps["start_ns"], gaps["end_ns"], track, names, iid, n_kinds + 2, notes)


def _derived_slices(start, end, track, names, iid, category_iid, notes) -> dict:
    n = len(names)
    ts, stop = np.asarray(start, dtype=np.int64), np.asarray(end, dtype=np.int64)
    track = np.broadcast_to(np.asarray(track, dtype=np.int64), (n,)).copy()
    if n:
        lanes = _lanes(track, ts, stop)
        track = np.where(lanes > 0, -(track * 1024 + lanes), track)  # rare overlap: resolved in _write_events
    none = np.full(n, -1, dtype=np.int64)
    return {
        "ts": ts,
        "end": stop,
        "track": track,
        "name_iid": np.array([iid[x] for x in names], dtype=np.int64),
        "category_iid": np.full(n, category_iid, dtype=np.int64),
        "correlation": none,
        "external_id": none,
        "input_dims": np.full(n, "", dtype=object),
        "flow_lo": np.zeros(n, dtype=np.int64),
        "flow_hi": np.zeros(n, dtype=np.int64),
        "flow_in": np.zeros(n, dtype=np.int64),
        "annotations": np.array([*notes, None], dtype=object)[:n],
    }


def _step_counters(analysis: Analysis, tracks: _Tracks, root: int) -> list[tuple[int, int, float]]:
    """(ts, track, value) samples: each step's kernel count and GPU idle time, set at its start."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import CounterDescriptor

    steps = analysis.steps
    if steps.empty:
        return []

    def counter(name: str, unit: int):
        def describe(desc) -> None:
            desc.name = name
            desc.parent_uuid = root
            desc.counter.unit = unit

        return describe

    kernels = tracks.get("kernels per step", counter("kernels per step", CounterDescriptor.UNIT_COUNT))
    idle = tracks.get("GPU idle per step", counter("GPU idle per step", CounterDescriptor.UNIT_TIME_NS))
    starts = steps["start_ns"].to_numpy()
    last_end = int(steps["end_ns"].max())
    samples = [(int(t), kernels, float(k)) for t, k in zip(starts, steps["kernels"], strict=True)]
    samples += [(int(t), idle, float(v)) for t, v in zip(starts, steps["gpu_idle_ns"], strict=True)]
    samples += [(last_end, kernels, 0.0), (last_end, idle, 0.0)]
    return samples


def _memory_counters(timeline: Timeline, tracks: _Tracks) -> list[tuple[int, int, float]]:
    """(ts, track, value) samples of each device's allocated and reserved bytes, where the trace says them."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import CounterDescriptor

    memory = timeline.memory
    if memory is None:
        return []
    root = tracks.get("memory", lambda d: setattr(d, "name", MEMORY_GROUP))
    samples: list[tuple[int, int, float]] = []
    ts = memory["ts"].to_numpy()
    device_type, device = memory["device_type"].to_numpy(), memory["device"].to_numpy()
    for dt, dev in sorted(set(zip(device_type.tolist(), device.tolist(), strict=True))):
        on_device = (device_type == dt) & (device == dev)
        for figure in FIGURES:
            values = memory[figure].to_numpy()
            rows = on_device & (values != UNKNOWN)
            if not rows.any():
                continue
            name = memory_track_name(figure, dt, dev)

            def describe(desc, name=name) -> None:
                desc.name = name
                desc.parent_uuid = root
                desc.counter.unit = CounterDescriptor.UNIT_SIZE_BYTES

            track = tracks.get(("memory", name), describe)
            count = int(rows.sum())
            samples += zip(ts[rows].tolist(), [track] * count, values[rows].astype(float).tolist(), strict=True)
    return samples


def _write_events(builder, parts: list[dict], counters: list[tuple[int, int, float]], flow_ids: np.ndarray) -> None:
    """BEGIN/END packets for all slices in time order: ENDs before BEGINs at the same instant (so
    back-to-back slices do not nest), outer BEGINs before inner ones, a zero-length slice's END last."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TracePacket

    cols = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    _resolve_overflow_lanes(cols, builder)
    n = len(cols["ts"])
    ts, end = cols["ts"], cols["end"]
    zero = ts == end
    times = np.concatenate([ts, end])
    phase = np.concatenate([np.ones(n, np.int64), np.where(zero, 2, 0)])
    tiebreak = np.concatenate([-end, -ts])
    which = np.lexsort((tiebreak, phase, times))
    counter_at = sorted(counters)
    c = 0
    needs_state = TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
    names = _ANNOTATION_IIDS
    for k in which.tolist():
        t = int(times[k])
        while c < len(counter_at) and counter_at[c][0] <= t:
            _counter_packet(builder, *counter_at[c], needs_state)
            c += 1
        packet = builder.create_packet()
        packet.timestamp = t
        packet.trusted_packet_sequence_id = SEQUENCE_ID
        packet.sequence_flags = needs_state
        event = packet.track_event
        i = k - n if k >= n else k
        event.track_uuid = int(cols["track"][i])
        if k >= n:
            event.type = _END
            if cols["flow_in"][i]:
                event.terminating_flow_ids.append(int(cols["flow_in"][i]))
        else:
            event.type = _BEGIN
            event.name_iid = int(cols["name_iid"][i])
            event.category_iids.append(int(cols["category_iid"][i]))
            if cols["correlation"][i] >= 0:
                event.correlation_id = int(cols["correlation"][i])
            if cols["external_id"][i] >= 0:
                external_id = int(cols["external_id"][i])
                event.debug_annotations.add(name_iid=names[EXTERNAL_ID_ANNOTATION], int_value=external_id)
            if cols["input_dims"][i]:
                event.debug_annotations.add(name_iid=names[INPUT_DIMS_ANNOTATION], string_value=cols["input_dims"][i])
            if cols["flow_hi"][i] > cols["flow_lo"][i]:
                event.flow_ids.extend(flow_ids[cols["flow_lo"][i] : cols["flow_hi"][i]].tolist())
            notes = cols["annotations"][i]
            if notes:
                for key, value in notes.items():
                    _annotate(event.debug_annotations.add(name=key), value)
        builder.write_packet(packet)
    for sample in counter_at[c:]:
        _counter_packet(builder, *sample, needs_state)


def _resolve_overflow_lanes(cols: dict, builder) -> None:
    """Derived slices that overlapped were marked -(track*1024 + lane): give each such lane a sibling track."""
    track = cols["track"]
    for code in np.unique(track[track < 0]):
        base, lane = divmod(int(-code), 1024)
        packet = builder.create_packet()
        packet.trusted_packet_sequence_id = SEQUENCE_ID
        uuid = (1 << 40) + int(-code)
        packet.track_descriptor.uuid = uuid
        packet.track_descriptor.parent_uuid = base
        packet.track_descriptor.name = f"lane {lane + 1}"
        builder.write_packet(packet)
        track[track == code] = uuid


def _annotate(ann, value) -> None:
    if value is None:
        ann.string_value = "unknown"
    elif isinstance(value, bool):
        ann.bool_value = value
    elif isinstance(value, int):
        ann.int_value = value
    elif isinstance(value, float):
        ann.double_value = value
    else:
        ann.string_value = str(value)


def _counter_packet(builder, ts: int, track: int, value: float, flags: int) -> None:
    packet = builder.create_packet()
    packet.timestamp = ts
    packet.trusted_packet_sequence_id = SEQUENCE_ID
    packet.sequence_flags = flags
    packet.track_event.type = _COUNTER
    packet.track_event.track_uuid = track
    packet.track_event.double_counter_value = value
    builder.write_packet(packet)
