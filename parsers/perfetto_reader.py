"""Read Perfetto protobuf traces made of TrackEvent slices into a Timeline.

Decoding uses the `perfetto` package's own protos, so the field layout is
Perfetto's, not ours. Slices come from BEGIN/END pairs matched with a stack per
track; names, categories and debug-annotation names may be interned per packet
sequence, and that state is reset whenever a sequence says it was cleared.

Two kinds of trace arrive here. Stepscope's own exports (exporters/perfetto_trace.py)
name their tracks in the formats defined below and put the Timeline kind in each
slice's category, so they read back exactly; their "Stepscope phases" tracks are
derived output and are skipped. Any other TrackEvent trace is mapped by
heuristics (GPU/stream tracks -> kernels, cuda*/hip* calls -> runtime, "::" names
-> cpu_op, the rest annotations) and says so in its warnings. A trace with no
TrackEvent slices at all (ftrace, Android system traces) needs Perfetto's
trace_processor_shell, used only when a binary is already on the machine.
"""

from __future__ import annotations

import re
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .errors import TraceError
from .kineto.columns import CATEGORY_KINDS
from .limits import ReadLimits, check_event_count
from .numbers import MAX_TIME
from .perfetto_memory import with_memory_counters
from .timeline import COLUMNS, KINDS, DeviceInfo, Timeline, TraceMeta
from .trace_processor import TRACE_PROCESSOR_ENV, find_trace_processor

if TYPE_CHECKING:
    import pandas as pd

SOURCE_FORMAT = "perfetto"

# Track names Stepscope writes and reads back; exporters/perfetto_trace.py uses these functions.
PHASES_TRACK = "Stepscope phases"
_GPU_GROUP = re.compile(r"^GPU (?P<device>-?\d+)(?: · (?P<device_name>.*))?$")
_GPU_LANE = re.compile(
    r"^GPU (?P<device>-?\d+) stream (?P<stream>-?\d+)(?: \(pid (?P<pid>-?\d+) tid (?P<tid>-?\d+)\))?(?: lane \d+)?$"
)
_HOST_LANE = re.compile(
    r"^(?P<group>host launches|host ops)(?: · .*)? \(pid (?P<pid>-?\d+) tid (?P<tid>-?\d+)\)(?: lane \d+)?$", re.S
)
HOST_LAUNCH_GROUP = "host launches"
HOST_OPS_GROUP = "host ops"
EXTERNAL_ID_ANNOTATION = "external_id"
INPUT_DIMS_ANNOTATION = "input_dims"
_CORRELATION_ANNOTATIONS = frozenset({"correlation", "correlation_id", "correlationId"})
_EXTERNAL_ANNOTATIONS = frozenset({EXTERNAL_ID_ANNOTATION, "External id", "external id"})

_SEQ_CLEARED = 1
_SEQ_NEEDS_STATE = 2
_TYPE_BEGIN, _TYPE_END, _TYPE_INSTANT, _TYPE_COUNTER = 1, 2, 3, 4
_NO_STATE = "track events before their sequence's state was set"
_NO_TRACK = 0  # events with neither a track_uuid nor a sequence default
_FAR_TIME = "track events with a timestamp beyond 2^62 ns (would overflow 64-bit time)"
_MAX_TRACK_DEPTH = 32  # ancestors looked at per track: real traces nest a few levels; a hostile chain stays linear


def _text(value: str | bytes, counter: Counter | None = None) -> str:
    """A string field as text: protobuf hands invalid UTF-8 back as bytes; it is replaced and counted."""
    if isinstance(value, bytes):
        if counter is not None:
            counter["strings with invalid UTF-8 (replaced with U+FFFD)"] += 1
        return value.decode("utf-8", errors="replace")
    return value


def _small_int(text: str | None) -> int | None:
    """An id written in a track name, None when absent or too long to be one (never a huge int)."""
    if text is None or len(text.lstrip("-")) > 15:
        return None
    return int(text)


def gpu_group_name(device: int, device_name: str | None) -> str:
    return f"GPU {device}" + (f" · {device_name}" if device_name else "")


def gpu_lane_name(device: int, stream: int, pid: int, tid: int, lane: int = 0) -> str:
    ids = "" if (pid, tid) == (device, stream) else f" (pid {pid} tid {tid})"
    return f"GPU {device} stream {stream}{ids}" + (f" lane {lane + 1}" if lane else "")


def host_lane_name(group: str, pid: int, tid: int, thread_name: str | None = None, lane: int = 0) -> str:
    label = f" · {' '.join(thread_name.split())[:80]}" if thread_name else ""
    return f"{group}{label} (pid {pid} tid {tid})" + (f" lane {lane + 1}" if lane else "")


def looks_like_perfetto(data: bytes | bytearray | memoryview) -> bool:
    """Content sniff: a Trace is a run of `packet` fields (tag 0x0a, a length, a TracePacket).

    The first packet's header must parse and, when the next packet starts inside
    the data, it must start with the same tag. A cut-off file still sniffs as
    Perfetto so that the reader can say it is truncated.
    """
    head = bytes(data[:32])
    if len(head) < 3 or head[0] != 0x0A:
        return False
    length, pos = _varint(head, 1)
    if length is None or length == 0:
        return False
    first_tag, _ = _varint(head, pos)
    if first_tag is None or first_tag >> 3 == 0 or (first_tag & 7) not in (0, 1, 2, 5):
        return False
    nxt = pos + length
    return nxt >= len(data) or data[nxt] == 0x0A


def _varint(buf: bytes | memoryview, pos: int) -> tuple[int | None, int]:
    value = shift = 0
    while pos < len(buf) and shift < 64:
        byte = buf[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            return value, pos
        shift += 7
    return None, pos


def read_perfetto(data: bytes | bytearray | memoryview, limits: ReadLimits | None = None) -> Timeline:
    """Parse a Perfetto protobuf trace into a Timeline. Raises TraceError with a one-line reason."""
    from google.protobuf.message import DecodeError
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace

    raw = bytes(data)
    try:
        trace = Trace.FromString(raw)
    except DecodeError:
        raise TraceError(_framing_problem(raw)) from None
    check_event_count(len(trace.packet), limits, "packets")
    collected = _SliceCollector()
    for packet in trace.packet:
        collected.add_packet(packet)
    del trace
    if not collected.rows:
        return _without_track_events(raw, collected)
    return collected.timeline()


def _framing_problem(raw: bytes) -> str:
    """Why protobuf decoding failed, as one line: a cut-off file or corrupt bytes."""
    view = memoryview(raw)
    pos = index = 0
    while pos < len(view):
        if view[pos] != 0x0A:
            return f"corrupt Perfetto trace: byte {pos} (packet {index}) is not a packet header"
        length, body = _varint(view, pos + 1)
        if length is None:
            return f"truncated Perfetto trace: the file ends inside packet {index}'s header"
        if body + length > len(view):
            return (
                f"truncated Perfetto trace: packet {index} needs {length} bytes from byte {body} "
                f"but the file ends at {len(view)}"
            )
        pos, index = body + length, index + 1
    return f"corrupt Perfetto trace: one of its {index} packets does not decode as a TracePacket"


@dataclass
class _Track:
    uuid: int
    parent: int = 0
    name: str = ""
    pid: int | None = None
    tid: int | None = None
    process_name: str | None = None
    thread_name: str | None = None
    is_counter: bool = False


class _SequenceState:
    """Interned strings and defaults of one packet sequence, valid until it is cleared."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.categories: dict[int, str] = {}
        self.annotation_names: dict[int, str] = {}
        self.default_track = _NO_TRACK


class _SliceCollector:
    """Walks packets once, matching BEGIN/END per track; everything else is counted, not kept."""

    def __init__(self) -> None:
        self.tracks: dict[int, _Track] = {}
        self.sequences: dict[int, _SequenceState] = {}
        self.stacks: dict[int, list[tuple]] = {}
        # one tuple per finished slice: (ts, dur, track, name, category, correlation, external_id, input_dims)
        self.rows: list[tuple] = []
        self.skipped: Counter[str] = Counter()
        self.notes: Counter[str] = Counter()  # values repaired on reading, said in the warnings
        self.packet_kinds: Counter[str] = Counter()
        self.track_events = 0
        self.counter_samples: list[tuple[int, int, float]] = []  # (ts, track, value): memory counters among them

    def add_packet(self, packet) -> None:
        seq_id = packet.trusted_packet_sequence_id
        if packet.sequence_flags & _SEQ_CLEARED or packet.incremental_state_cleared:
            self.sequences[seq_id] = _SequenceState()
        state = self.sequences.get(seq_id)
        if packet.HasField("interned_data") or packet.HasField("trace_packet_defaults"):
            if state is None:
                state = self.sequences[seq_id] = _SequenceState()
            self._read_sequence_state(packet, state)
        which = packet.WhichOneof("data")
        if which == "track_event":
            self.track_events += 1
            if state is None and packet.sequence_flags & _SEQ_NEEDS_STATE:
                self.skipped[_NO_STATE] += 1
                return
            self._add_event(packet, state or _SequenceState())
        elif which == "track_descriptor":
            self._add_track(packet.track_descriptor)
        elif which is not None:
            self.packet_kinds[which] += 1

    def _read_sequence_state(self, packet, state: _SequenceState) -> None:
        if packet.HasField("trace_packet_defaults"):
            defaults = packet.trace_packet_defaults
            if defaults.HasField("track_event_defaults"):
                state.default_track = defaults.track_event_defaults.track_uuid
        interned = packet.interned_data
        for entry in interned.event_names:
            state.names[entry.iid] = _text(entry.name, self.notes)
        for entry in interned.event_categories:
            state.categories[entry.iid] = _text(entry.name, self.notes)
        for entry in interned.debug_annotation_names:
            state.annotation_names[entry.iid] = _text(entry.name, self.notes)

    def _add_track(self, desc) -> None:
        track = self.tracks.setdefault(desc.uuid, _Track(desc.uuid))
        track.parent = desc.parent_uuid
        track.name = _text(desc.name or desc.static_name, self.notes) or track.name
        track.is_counter = desc.HasField("counter")
        if desc.HasField("process"):
            track.pid = desc.process.pid
            track.process_name = _text(desc.process.process_name, self.notes) or None
        if desc.HasField("thread"):
            track.pid, track.tid = desc.thread.pid, desc.thread.tid
            track.thread_name = _text(desc.thread.thread_name, self.notes) or None

    def _add_event(self, packet, state: _SequenceState) -> None:
        event = packet.track_event
        kind = event.type
        track = event.track_uuid if event.HasField("track_uuid") else state.default_track
        ts = packet.timestamp
        if ts > MAX_TIME and kind in (_TYPE_BEGIN, _TYPE_END):
            self.skipped[_FAR_TIME] += 1
            return
        if kind == _TYPE_BEGIN:
            name = _text(event.name, self.notes) if event.HasField("name") else state.names.get(event.name_iid, "")
            if event.categories:
                category = _text(event.categories[0], self.notes)
            elif event.category_iids:
                category = state.categories.get(event.category_iids[0], "")
            else:
                category = ""
            correlation, external_id, dims = _annotations(event, state, self.notes)
            self.stacks.setdefault(track, []).append((ts, track, name, category, correlation, external_id, dims))
        elif kind == _TYPE_END:
            stack = self.stacks.get(track)
            if not stack:
                self.skipped["slice ends without a begin"] += 1
                return
            begin = stack.pop()
            self.rows.append((begin[0], ts - begin[0], *begin[1:]))
        elif kind == _TYPE_INSTANT:
            self.skipped["instant"] += 1
        elif kind == _TYPE_COUNTER:
            self.skipped["counter"] += 1  # not a slice; a memory counter's samples also go to the memory table
            if ts <= MAX_TIME:
                value = event.double_counter_value if event.HasField("double_counter_value") else event.counter_value
                self.counter_samples.append((ts, track, float(value)))
        else:
            self.skipped["track events of unspecified type (legacy)"] += 1

    def timeline(self) -> Timeline:
        import pandas as pd  # loaded only when a Perfetto trace is read

        open_slices = sum(len(s) for s in self.stacks.values())
        if open_slices:
            self.skipped["slices never ended"] += open_slices
        slices = pd.DataFrame.from_records(
            self.rows, columns=["ts", "dur", "track", "name", "category", "correlation", "external_id", "input_dims"]
        )
        self.rows = []
        negative = slices["dur"].to_numpy() < 0
        if negative.any():
            self.skipped["slices ending before they begin"] += int(negative.sum())
            slices = slices[~negative]
        for kind, n in self.packet_kinds.items():
            self.skipped[f"packets of type {kind} (not read)"] += n
        timeline = _build_timeline(slices, self.tracks, self.track_events, self.skipped, self.notes)
        return with_memory_counters(timeline, self.counter_samples, lambda u: _ancestors(self.tracks, u), PHASES_TRACK)


def _annotations(event, state: _SequenceState, notes: Counter) -> tuple[int, int, str]:
    """(correlation, external_id, input_dims) from the event's fields and debug annotations."""
    correlation = event.correlation_id if event.HasField("correlation_id") else -1
    if correlation > MAX_TIME:
        notes["correlation ids beyond 2^62 (read as unknown)"] += 1
        correlation = -1
    external_id, dims = -1, ""
    for ann in event.debug_annotations:
        key = _text(ann.name, notes) if ann.HasField("name") else state.annotation_names.get(ann.name_iid, "")
        if key in _EXTERNAL_ANNOTATIONS:
            external_id = _int_value(ann)
        elif key in _CORRELATION_ANNOTATIONS and correlation < 0:
            correlation = _int_value(ann)
        elif key == INPUT_DIMS_ANNOTATION and ann.HasField("string_value"):
            dims = _text(ann.string_value, notes)[:2000]
    return correlation, external_id, dims


def _int_value(ann) -> int:
    if ann.HasField("int_value"):
        return ann.int_value
    if ann.HasField("uint_value") and ann.uint_value < 1 << 63:
        return ann.uint_value
    return -1


@dataclass(frozen=True)
class _Lane:
    """Where a track's slices go in the Timeline; kind None means: guess from the slice's name."""

    pid: int
    tid: int
    device: int
    stream: int
    kind: str | None  # fallback when the category does not name a kind
    on_gpu: bool
    derived: bool = False  # Stepscope's own phases/gaps: skipped on reading
    stepscope: bool = False


def _resolve_lanes(tracks: dict[int, _Track], used: list[int]) -> tuple[dict[int, _Lane], dict[int, DeviceInfo]]:
    lanes: dict[int, _Lane] = {}
    devices: dict[int, DeviceInfo] = {}
    for track in tracks.values():
        group = _GPU_GROUP.match(track.name)
        if group and group["device_name"] and _small_int(group["device"]) is not None:
            ordinal = int(group["device"])
            devices[ordinal] = DeviceInfo(ordinal=ordinal, name=group["device_name"].strip())
    for index, uuid in enumerate(used):
        chain = _ancestors(tracks, uuid)
        track = chain[0] if chain else _Track(uuid)
        if any(t.name == PHASES_TRACK for t in chain):
            lanes[uuid] = _Lane(0, 0, -1, -1, None, False, derived=True)
            continue
        gpu, host = _GPU_LANE.match(track.name), _HOST_LANE.match(track.name)
        if gpu and any(_small_int(v) is None and v is not None for v in gpu.groupdict().values()):
            gpu = None  # ids too long to be ids: not a lane Stepscope wrote
        if host and any(_small_int(host[k]) is None for k in ("pid", "tid")):
            host = None
        if gpu:
            device, stream = int(gpu["device"]), int(gpu["stream"])
            pid = int(gpu["pid"]) if gpu["pid"] else device
            tid = int(gpu["tid"]) if gpu["tid"] else stream
            lanes[uuid] = _Lane(pid, tid, device, stream, "kernel", True, stepscope=True)
            continue
        if host:
            kind = "runtime" if host["group"] == HOST_LAUNCH_GROUP else "cpu_op"
            lanes[uuid] = _Lane(int(host["pid"]), int(host["tid"]), -1, -1, kind, False, stepscope=True)
            continue
        lanes[uuid] = _foreign_lane(chain, index)
    return lanes, devices


def _ancestors(tracks: dict[int, _Track], uuid: int) -> list[_Track]:
    chain, seen = [], set()
    while uuid in tracks and uuid not in seen and len(chain) < _MAX_TRACK_DEPTH:
        seen.add(uuid)
        chain.append(tracks[uuid])
        uuid = tracks[uuid].parent
    return chain


_GPU_TRACK_NAME = re.compile(r"stream|GPU|CUDA|HIP", re.I)
_DEVICE_NUMBER = re.compile(r"(?:GPU|device|cuda:)\s*(\d+)", re.I)
_STREAM_NUMBER = re.compile(r"stream\s*(\d+)", re.I)


def _foreign_lane(chain: list[_Track], index: int) -> _Lane:
    """A lane for a track without Stepscope naming: ids from its descriptors, GPU-ness from its names."""
    synthetic = -(1 << 40) - index
    pid = next((t.pid for t in chain if t.pid is not None), None)
    tid = chain[0].tid if chain and chain[0].tid is not None else synthetic
    names = " / ".join(t.name for t in chain)
    if chain and chain[0].tid is None and _GPU_TRACK_NAME.search(names):
        device = _DEVICE_NUMBER.search(names)
        stream = _STREAM_NUMBER.search(names)
        dev = (_small_int(device.group(1)) if device else 0) or 0
        strm = _small_int(stream.group(1)) if stream else index
        strm = index if strm is None else strm
        return _Lane(pid if pid is not None else dev, strm, dev, strm, None, True)
    return _Lane(pid if pid is not None else synthetic, tid, -1, -1, None, False)


_HOST_RUNTIME = re.compile(r"^(?:cuda|hip)[A-Z_]")
_HOST_DRIVER = re.compile(r"^cu[A-Z]")
_MEMCPY = re.compile(r"memcpy|Memcpy|MemCpy")
_MEMSET = re.compile(r"memset|Memset")


def _guess_host_kind(name: str) -> str:
    if _HOST_RUNTIME.match(name):
        return "runtime"
    if _HOST_DRIVER.match(name):
        return "driver"
    return "cpu_op" if "::" in name else "annotation"


def _guess_gpu_kind(name: str) -> str:
    return "memcpy" if _MEMCPY.search(name) else "memset" if _MEMSET.search(name) else "kernel"


def _build_timeline(
    slices: pd.DataFrame, tracks: dict[int, _Track], track_events: int, skipped: Counter, notes: Counter | None = None
) -> Timeline:
    """Columns from the slice table: per-track and per-name decisions made once, then broadcast."""
    import pandas as pd  # loaded only when a Perfetto trace is read

    track_codes, used = pd.factorize(slices["track"].to_numpy())
    lanes, devices = _resolve_lanes(tracks, [int(u) for u in used])
    lane_list = [lanes[int(u)] for u in used]
    derived = np.array([lane.derived for lane in lane_list], dtype=bool)[track_codes]
    if derived.any():
        skipped["Stepscope phases, gaps and counters (derived, not read back)"] += int(derived.sum())
        slices, track_codes = slices[~derived], track_codes[~derived]
    if slices.empty:
        raise TraceError("the Perfetto trace has no slices outside Stepscope's own phase tracks: nothing to analyse")
    warnings = []
    per_track = {
        col: np.array([getattr(lane, col) for lane in lane_list], dtype=np.int64)[track_codes]
        for col in ("pid", "tid", "device", "stream")
    }
    kind = _kinds(slices, track_codes, lane_list)
    foreign_index = [i for i, lane in enumerate(lane_list) if not lane.stepscope and not lane.derived]
    foreign = [lane_list[i] for i in foreign_index]
    if foreign:
        n_foreign = int(np.isin(track_codes, foreign_index).sum())
        warnings.append(
            f"{n_foreign} slices on {len(foreign)} tracks without Stepscope naming: kinds guessed from names "
            "(GPU/stream tracks -> kernel, cuda*/hip* calls -> runtime, '::' names -> cpu_op, the rest annotation)"
        )
    for reason in ("slice ends without a begin", "slices never ended", _NO_STATE, _FAR_TIME):
        if skipped.get(reason):
            warnings.append(f"{skipped[reason]} track events skipped: {reason}")
    warnings += [f"{n} {what}" for what, n in (notes or {}).items()]
    order = np.argsort(slices["ts"].to_numpy(), kind="stable")
    data = {
        "ts": slices["ts"].to_numpy(dtype=np.int64)[order],
        "dur": slices["dur"].to_numpy(dtype=np.int64)[order],
        "kind": pd.Categorical(kind[order], categories=[k for k in KINDS if k in set(kind)]),
        "name": pd.Categorical(slices["name"].to_numpy(dtype=object)[order]),
        **{col: values[order] for col, values in per_track.items()},
        "correlation": slices["correlation"].to_numpy(dtype=np.int64)[order],
        "external_id": slices["external_id"].to_numpy(dtype=np.int64)[order],
    }
    events = pd.DataFrame({c: data[c] for c in COLUMNS}, copy=False)
    events["input_dims"] = pd.Categorical(slices["input_dims"].to_numpy(dtype=object)[order])
    process_names = {t.pid: t.process_name for t in tracks.values() if t.pid is not None and t.process_name}
    thread_names = {
        (t.pid, t.tid): t.thread_name
        for t in tracks.values()
        if t.tid is not None and t.pid is not None and t.thread_name
    }
    id_labels = {
        lane.tid: _ancestors(tracks, int(u))[0].name if int(u) in tracks else "(no track)"
        for u, lane in zip(used, lane_list, strict=True)
        if lane.tid < -(1 << 39)
    }
    meta = TraceMeta(
        source_format=SOURCE_FORMAT,
        event_count=track_events,
        devices=devices,
        process_names=process_names,
        thread_names=thread_names,
        id_labels=id_labels,
        skipped=dict(skipped),
        warnings=tuple(warnings),
        extra={"stepscope_export": not foreign},
    )
    return Timeline(events=events, meta=meta)


def _kinds(slices: pd.DataFrame, track_codes: np.ndarray, lanes: list[_Lane]) -> np.ndarray:
    """Kind per slice: the category when it names one, else the track's kind, else a guess from the name."""
    import pandas as pd  # loaded only when a Perfetto trace is read

    cat_codes, categories = pd.factorize(slices["category"].to_numpy(dtype=object))
    by_category = np.array([_category_kind(c) or "" for c in categories] + [""], dtype=object)[cat_codes]
    name_codes, names = pd.factorize(slices["name"].to_numpy(dtype=object))
    gpu_guess = np.array([_guess_gpu_kind(n) for n in names] + ["kernel"], dtype=object)[name_codes]
    host_guess = np.array([_guess_host_kind(n) for n in names] + ["annotation"], dtype=object)[name_codes]
    lane_kind = np.array([lane.kind or "" for lane in lanes] + [""], dtype=object)[track_codes]
    on_gpu = np.array([lane.on_gpu for lane in lanes] + [False], dtype=bool)[track_codes]
    guessed = np.where(on_gpu, gpu_guess, host_guess)
    kind = np.where(by_category != "", by_category, np.where(lane_kind != "", lane_kind, guessed))
    return kind.astype(object)


def _category_kind(category: str) -> str | None:
    if category in KINDS:
        return category
    return CATEGORY_KINDS.get(category)


# --- Traces without TrackEvent slices: Perfetto's trace_processor_shell, when one is on this machine.


def _without_track_events(raw: bytes, collected: _SliceCollector) -> Timeline:
    held = ", ".join(f"{k} ({n})" for k, n in collected.packet_kinds.most_common(4)) or "no data packets"
    binary = find_trace_processor()
    if binary is None:
        raise TraceError(
            f"this Perfetto trace has no TrackEvent slices (it holds {held}); reading it needs trace_processor_shell, "
            f"which is not on this machine (set {TRACE_PROCESSOR_ENV} to its path)"
        )
    return _read_with_trace_processor(raw, binary, collected.track_events)


_TP_QUERY = """
select s.ts as ts, s.dur as dur, s.name as name, coalesce(s.category, '') as category, s.track_id as track,
       coalesce(t.name, '') as track_name, th.tid as tid, coalesce(p.pid, tp.pid) as pid
from slice s
join track t on t.id = s.track_id
left join thread_track tt on tt.id = s.track_id
left join thread th on th.utid = tt.utid
left join process p on p.upid = th.upid
left join process_track pt on pt.id = s.track_id
left join process tp on tp.upid = pt.upid
where s.dur >= 0
"""


def _read_with_trace_processor(raw: bytes, binary: Path, track_events: int) -> Timeline:
    """Slices of any Perfetto trace through trace_processor_shell, mapped with the same heuristics."""
    import pandas as pd  # loaded only when a Perfetto trace is read

    try:
        from perfetto.trace_processor import TraceProcessor, TraceProcessorConfig
    except ImportError as exc:
        raise TraceError(f"the perfetto package cannot load its trace processor: {exc}") from None
    with tempfile.TemporaryDirectory(prefix="stepscope-tp-") as tmp:
        path = Path(tmp) / "trace.pftrace"
        path.write_bytes(raw)
        try:
            tp = TraceProcessor(trace=str(path), config=TraceProcessorConfig(bin_path=str(binary)))
            try:
                frame = tp.query(_TP_QUERY).as_pandas_dataframe()
            finally:
                tp.close()
        except Exception as exc:  # the shell's own failure modes are many; report them as one line
            raise TraceError(f"trace_processor_shell could not read the trace: {exc}") from None
    if frame.empty:
        raise TraceError("trace_processor_shell found no slices in this Perfetto trace: nothing to analyse")
    tracks: dict[int, _Track] = {}
    for row in frame.drop_duplicates("track").itertuples(index=False):
        tracks[int(row.track) + 1] = _Track(
            uuid=int(row.track) + 1,
            name=str(row.track_name),
            pid=None if pd.isna(row.pid) else int(row.pid),
            tid=None if pd.isna(row.tid) else int(row.tid),
        )
    slices = pd.DataFrame(
        {
            "ts": frame["ts"].astype(np.int64),
            "dur": frame["dur"].astype(np.int64),
            "track": frame["track"].astype(np.int64) + 1,
            "name": frame["name"].fillna("").astype(str),
            "category": frame["category"].astype(str),
            "correlation": -1,
            "external_id": -1,
            "input_dims": "",
        }
    )
    timeline = _build_timeline(slices, tracks, track_events, Counter())
    meta = timeline.meta
    warnings = (*meta.warnings, f"read through trace_processor_shell ({binary})")
    return Timeline(timeline.events, TraceMeta(**{**meta.__dict__, "warnings": warnings}))
