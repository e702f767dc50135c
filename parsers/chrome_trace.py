"""Read Chrome-trace JSON as torch.profiler / Kineto write it into a Timeline.

Speed and memory come from msgspec: the event list is first split into raw
byte slices (no parsing of their content), then decoded in batches into typed
structs from which columns are pulled with C-level iteration. Only one batch of
structs is alive at a time, so peak memory is the file plus the columns.
"""

from __future__ import annotations

import math
import operator
import os
import re
from collections import Counter, defaultdict
from functools import partial
from itertools import count, filterfalse, repeat
from operator import attrgetter
from typing import TYPE_CHECKING, Union

import msgspec
import numpy as np

from .errors import TraceError
from .kineto_schema import (  # the JSON's shape, as msgspec decodes it
    _INSTANT_TYPES,
    _SKIPPED_TYPES,
    MEMORY_EVENT,
    _AnyEvent,
    _Complete,
    _Instant,
    _MemoryArgs,
    _Metadata,
    _TraceDoc,
)
from .limits import ReadLimits, check_event_count
from .memory_table import COUNTED_TOTALS, MEMORY_COLUMNS, UNKNOWN, memory_frame, with_counted_totals
from .timeline import COLUMNS, GPU_KINDS, DeviceInfo, Timeline, TraceMeta

if TYPE_CHECKING:
    import pandas as pd

    from .piece_merge import FrameSink
    from .scanned_piece import ScannedPiece, ScannedRows
    from .split_decode import Meanwhile, Progress

BATCH_EVENTS = 32_768
# Duration events turned into columns at once: the dozen passes over a batch's structs (one per field) run over
# this many while they are still in a core's cache. Measured on 12 real vLLM pieces of 35k events (with_stack,
# mostly python spans), modes shuffled, 6-8 rounds each: a piece's whole read (decode, columns, sort, free) took
# a median 918 ns an event in slices of 8,192 (925 for 4,096, 972 for 16,384) against 1,018 at once.
SLICE_EVENTS = 8_192
MAX_TIME_US = float(1 << 62) / 1000  # |ts| and dur beyond 2^62 ns (146 years): skipped, never wrapped
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
FAR_TIME = "ts or dur beyond 2^62 ns (would overflow 64-bit time)"
_TIME_REASONS = ("missing or non-finite ts", "missing, negative or non-finite dur", FAR_TIME)
MAX_NAME_CHARS = 16384

# Kineto categories (current and 2021 names) -> Timeline kinds.
CATEGORY_KINDS = {
    "kernel": "kernel",
    "Kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "Memcpy": "memcpy",
    "gpu_memset": "memset",
    "Memset": "memset",
    "gpu_user_annotation": "gpu_annotation",
    "cuda_runtime": "runtime",
    "Runtime": "runtime",
    "cuda_driver": "driver",
    "Driver": "driver",
    "cpu_op": "cpu_op",
    "Operator": "cpu_op",
    "user_annotation": "annotation",
    "User annotation": "annotation",
    "python_function": "python",
    "Python": "python",
    "cuda_sync": "sync",
    "overhead": "other",
    "Trace": "other",
    "cpu_instant_event": "other",
    "Memory": "other",
    "fwdbwd": "other",
}
_LEGACY_CATEGORIES = frozenset({"Operator", "Kernel", "Runtime", "Memcpy", "Memset"})
# Ops whose input shapes analysis reads (token counts, vocabulary-sized outputs; and what a batch holds: the rows
# sampled, the attention's query and key lengths, per-sequence causal mask blocks: step_finding.batch_contents).
SHAPE_OPS = frozenset(
    {
        "aten::embedding",
        "aten::linear",
        "aten::mm",
        "aten::addmm",
        "aten::matmul",
        "aten::argmax",
        "aten::multinomial",
        "aten::softmax",
        "aten::log_softmax",
        "aten::topk",
        "aten::sort",
        "aten::scaled_dot_product_attention",
        "aten::_scaled_dot_product_flash_attention",
        "aten::_scaled_dot_product_efficient_attention",
        "aten::_scaled_dot_product_cudnn_attention",
        "aten::_scaled_dot_product_flash_attention_for_cpu",
        "aten::triu_",
        # a packed batch's per-sequence metadata (query start locations [S + 1], sequence lengths [S], block table
        # [S, blocks]) on serving engines' attention ops: step_finding.packed_metadata (issue 38)
        "_C::cpu_attention_with_kv_cache",
        "_vllm_fa2_C::varlen_fwd",
        "_vllm_fa3_C::fwd",
    }
)


_ROOT_DECODER = msgspec.json.Decoder(_TraceDoc)
_ARRAY_DECODER = msgspec.json.Decoder(list[msgspec.Raw])
_BATCH_DECODER = msgspec.json.Decoder(list[_AnyEvent])
_PATH_INDEX = re.compile(r"\$(?:\.traceEvents)?\[(\d+)\]")


def looks_like_chrome_trace(head: bytes) -> bool:
    """Cheap content sniff: a JSON object or array at the start."""
    stripped = head.lstrip()
    if stripped.startswith(b"\xef\xbb\xbf"):
        stripped = stripped[3:].lstrip()
    return stripped[:1] in (b"{", b"[")


def read_chrome_trace(
    data: bytes | bytearray | list[bytes | bytearray],
    limits: ReadLimits | None = None,
    meanwhile: Meanwhile | None = None,
    progress: Progress | None = None,
    sink: FrameSink | None = None,
) -> Timeline:
    """Parse decompressed Chrome-trace JSON bytes into a Timeline.

    Given a one-element list instead, the reader takes the bytes out of it, so that (with no other
    reference left) the file's bytes are freed once the last event is decoded, before the frame is built.
    `meanwhile` and `progress`: as split_decode says, for big files decoded by two processes; `sink`: as _timeline
    says.
    """
    if isinstance(data, list):
        data = data.pop()
    if not data or not bytes(data[:4096]).strip():
        raise TraceError("the file is empty")
    from .split_decode import SplitNotPossibleError, decode_in_two

    max_events = (limits or ReadLimits.from_env()).max_events
    box = [data]  # big files: in pieces, shared with a second process; anything unusual falls back
    del data
    try:
        return _timeline(*decode_in_two(box, max_events, meanwhile, progress), sink=sink)  # empties the box
    except SplitNotPossibleError:
        data = box.pop()
    # Every event has a "ph" key: counting them (one C-level scan) bounds the event count before the
    # event list, whose per-event overhead dwarfs a tiny event's bytes, is built.
    check_event_count(data.count(b'"ph"'), limits)
    doc = _decode_root(data)
    del data  # the raw slices keep the buffer alive until the last of them is gone
    evs = doc.traceEvents
    if evs is None:
        raise TraceError("JSON has no traceEvents list: not a Chrome/Kineto trace")
    doc.traceEvents = None
    event_count = len(evs)
    builder = _ColumnBuilder()
    # The event list was only split into raw slices; each batch is decoded into structs, turned
    # into columns and freed before the next, so at most one batch of structs is ever alive.
    # Batches are taken from the end (no list shifting); frame() puts them back in file order.
    while evs:
        start = (len(evs) - 1) // BATCH_EVENTS * BATCH_EVENTS
        batch = evs[start:]
        del evs[start:]
        builder.add_batch(_decode_batch(batch, start, builder), start)
        del batch
    if builder.duration_events == 0:
        if event_count == 0:
            raise TraceError("the trace has no events")
        dropped = {r: n for r, n in builder.skipped.items() if r in _TIME_REASONS}
        if dropped:
            raise TraceError(f"none of the {event_count} events has a usable time: skipped {dropped}")
        raise TraceError(f"none of the {event_count} events is a complete (ph X) event: nothing to analyse")
    return _timeline(doc, builder, event_count)


def read_chrome_trace_file(
    path: str | os.PathLike,
    limits: ReadLimits | None = None,
    meanwhile: Meanwhile | None = None,
    progress: Progress | None = None,
    sink: FrameSink | None = None,
) -> Timeline:
    """A big plain JSON trace read in pieces straight from disk by two processes (split_decode). Raises
    split_decode.SplitNotPossibleError when that cannot be done: the caller reads the whole file instead;
    split_decode.DecodeStoppedError when `meanwhile` returns True. `sink`: as _timeline says."""
    from .memory_budget import events_within, over_budget_error
    from .split_decode import OverEventLimitError, decode_file_in_two

    limits = limits or ReadLimits.from_env()
    try:
        decoded = decode_file_in_two(path, limits.events_in_pieces, meanwhile, progress)
    except OverEventLimitError as exc:
        if limits.memory_budget_bytes is None:
            raise  # limits of the caller's own: the one-process reader words the error
        if limits.events_in_pieces < events_within(limits.memory_budget_bytes):  # STEPSCOPE_MAX_EVENTS, set lower
            check_event_count(exc.events, limits)
        raise over_budget_error(exc.events, limits.memory_budget_bytes) from None
    return _timeline(*decoded, sink=sink)


def _timeline(doc: _TraceDoc, builder: _ColumnBuilder, event_count: int, sink: FrameSink | None = None) -> Timeline:
    """The frame and metadata from the decoded columns and the document's other fields. `sink`: where the frame of
    a trace read in pieces is written (piece_merge.FrameSink: the cache's entry file), else it is built in memory."""
    memory = builder.memory_frame()
    devices = {
        p.id: DeviceInfo(
            ordinal=p.id,
            name=p.name.strip()[:200],
            sm_count=_count(p.numSms),
            memory_bytes=_count(p.totalGlobalMem),
            compute_major=_small_count(p.computeMajor),
            compute_minor=_small_count(p.computeMinor),
            warp_size=_small_count(p.warpSize),
        )
        for p in (doc.deviceProperties or [])
        if 0 <= p.id < 1 << 31
    }
    meta = TraceMeta(
        source_format="kineto-json",
        event_count=event_count,
        base_time_ns=doc.baseTimeNanoseconds if _count(doc.baseTimeNanoseconds) else None,
        devices=devices,
        process_names=builder.process_names,
        thread_names=builder.thread_names,
        sort_order=builder.sort_order,
        id_labels={v: k for k, v in builder.string_ids.items()},
        unknown_categories=dict(builder.unknown_categories),
        skipped=dict(builder.skipped),
        warnings=tuple(builder.warnings()),
        extra={
            "trace_name": doc.traceName,
            "schema_version": doc.schemaVersion,
            "distributed": doc.distributedInfo,
            "host_name": doc.host_name,
        },
    )
    return _with_frame(builder, meta, memory, sink)


def _with_frame(builder: _ColumnBuilder, meta: TraceMeta, memory, sink: FrameSink | None) -> Timeline:
    into = getattr(builder, "timeline_into", None)  # a trace read in pieces (piece_merge.JoinedBuilder): its runs
    if sink is not None and into is not None:
        timeline = into(sink, meta, memory)
        if timeline is not None:
            return timeline
    return Timeline(events=builder.frame(), meta=meta, memory=memory)


def _decode_batch(raws: list[msgspec.Raw], offset: int, builder: _ColumnBuilder | None = None) -> list:
    batch = b"[" + b",".join(raws) + b"]"
    try:
        try:
            return _BATCH_DECODER.decode(batch)
        except UnicodeDecodeError:  # invalid UTF-8 in a name: replaced with U+FFFD and counted, not fatal
            batch, replaced = _repair_utf8(batch)
            if builder is not None:
                builder.invalid_utf8 += replaced
            return _BATCH_DECODER.decode(batch)
    except msgspec.ValidationError as exc:
        raise TraceError(_locate(exc, offset)) from None
    except (msgspec.DecodeError, RecursionError) as exc:  # nesting too deep for the decoder, say
        raise TraceError(f"malformed JSON in the event list: {_one_line(exc)}") from None


def _decode_root(data: bytes | bytearray | memoryview) -> _TraceDoc:
    head = bytes(data[:64]).lstrip()
    if head.startswith(b"\xef\xbb\xbf"):
        data = memoryview(data)[len(bytes(data[:64])) - len(head) + 3 :]
        head = head[3:].lstrip()
    try:
        try:
            if head[:1] == b"[":
                return _TraceDoc(traceEvents=_ARRAY_DECODER.decode(data))
            if head[:1] == b"{":
                return _ROOT_DECODER.decode(data)
        except UnicodeDecodeError:  # outside the events (names inside them are repaired per batch)
            repaired, _ = _repair_utf8(bytes(data))
            return _decode_root(repaired)
    except msgspec.ValidationError as exc:
        raise TraceError(_locate(exc)) from None
    except (msgspec.DecodeError, RecursionError) as exc:
        raise TraceError(f"malformed or truncated JSON: {_one_line(exc)}") from None
    raise TraceError("not JSON: the file does not start with '{' or '['")


_REPLACEMENT = "\ufffd".encode()


def _repair_utf8(data: bytes) -> tuple[bytes, int]:
    """The bytes with every invalid UTF-8 sequence replaced by U+FFFD, and how many were replaced."""
    repaired = data.decode("utf-8", errors="replace").encode("utf-8")
    return repaired, repaired.count(_REPLACEMENT) - data.count(_REPLACEMENT)


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:300]


class _StructRows:
    """Duration events decoded by msgspec, asked for their fields a column at a time: what _add_durations reads.
    scanned_piece.ScannedRows answers the same questions from the compiled scanner's arrays."""

    def __init__(self, evs: list[_Complete], builder: _ColumnBuilder) -> None:
        self.evs, self.builder = evs, builder

    def __len__(self) -> int:
        return len(self.evs)

    def take(self, index: np.ndarray) -> _StructRows:
        return _StructRows(list(map(self.evs.__getitem__, index.tolist())), self.builder)

    def slice(self, start: int, stop: int) -> _StructRows:
        return _StructRows(self.evs[start:stop], self.builder)

    def floats(self, field: str) -> np.ndarray:
        return np.fromiter(map(attrgetter(field), self.evs), dtype=np.float64, count=len(self.evs))

    def codes(self, field: str) -> tuple[np.ndarray, list]:
        return _codes(map(attrgetter(field), self.evs), len(self.evs))

    def ints(self, field: str) -> np.ndarray:
        return self.builder._int64(self.evs, field)

    def ids(self, field: str) -> np.ndarray:
        return self.builder._id_column(self.evs, field)

    def volumes(self, field: str) -> np.ndarray:
        return _volumes(list(map(attrgetter(field), self.evs)))

    def texts(self) -> list[bytes]:
        return list(map(bytes, map(attrgetter("args.input_dims"), self.evs)))


_Rows = Union[_StructRows, "ScannedRows"]


class _ColumnBuilder:
    """Accumulates one batch of decoded events at a time into compact columns.

    Strings (names, categories) become integer codes through dicts shared by all
    batches, so each distinct name is stored once however many events carry it.
    """

    def __init__(self) -> None:
        self.parts: dict[str, list[np.ndarray]] = {c: [] for c in COLUMNS}
        self.parts["input_dims"] = []
        self.parts["grid"] = []
        self.parts["block"] = []
        for col in MEMORY_PARTS:  # the memory table's columns, built and merged like the frame's
            self.parts[col] = []
        self.kinds: dict[str, int] = {}
        self.names: dict[str, int] = {}
        self.dims: dict[str, int] = {"": 0}
        self.string_ids: dict[str, int] = {}
        self.process_names: dict[int, str] = {}
        self.thread_names: dict[tuple[int, int], str] = {}
        self.sort_order: dict[tuple[int, int | None], int] = {}
        self.unknown_categories: Counter[str] = Counter()
        self.skipped: Counter[str] = Counter()
        self.categories: dict[str, str] = {}
        self.duration_events = 0
        self.invalid_utf8 = 0
        self.wide_ids = 0
        self.memory_counted = 0  # memory events whose totals were counted (memory_frame)
        self._ids = count()

    def add_batch(self, evs: list, offset: int = 0) -> None:
        complete = list(filter(_Complete.__instancecheck__, evs))  # nearly every event: counted without a Counter
        if len(complete) != len(evs):
            others = list(filterfalse(_Complete.__instancecheck__, evs))
            phases = Counter(map(type, others))
            for cls, n in phases.items():
                if cls in _SKIPPED_TYPES:
                    self.skipped[_SKIPPED_TYPES[cls]] += n
            if phases.get(_Metadata):
                self.skipped["metadata"] += phases[_Metadata]
                self._read_metadata(list(filter(_Metadata.__instancecheck__, others)))
            instants = sum(phases.get(cls, 0) for cls in _INSTANT_TYPES)
            if instants:
                self.skipped["instant"] += instants  # not frame rows; the memory ones also go to the memory table
                self._add_memory(list(filter(_Instant.__instancecheck__, others)))
        if complete:
            self._add_rows(_StructRows(complete, self), offset)

    def add_scanned(self, piece: ScannedPiece) -> None:
        """A piece read by the compiled scanner (parsers.scanned_piece): its other events first, as add_batch takes a
        batch's, then its duration rows, so that every table fills in the order add_batch would fill it."""
        self.skipped.update(piece.skipped)
        if piece.others:
            self.add_batch(piece.others)
        self._add_rows(piece.rows(), 0)

    def _add_rows(self, rows: _Rows, offset: int) -> None:
        sliced = len(rows) > SLICE_EVENTS
        before = {c: len(v) for c, v in self.parts.items()} if sliced else {}
        for start in range(0, len(rows), SLICE_EVENTS):  # in file order: names and ids are coded as first seen
            part = rows.slice(start, start + SLICE_EVENTS)
            try:
                self._add_durations(part)
            except (OverflowError, ValueError, TypeError) as exc:
                first = offset + start
                raise TraceError(
                    f"one of events {first}..{first + len(part) - 1} holds a value out of range for its field "
                    f"(ts, dur, pid, tid or an id in args): {_one_line(exc)}"
                ) from None
        if sliced:  # the parts are kept last-first (see frame()): the slices' too
            for column, parts in self.parts.items():
                parts[before[column] :] = parts[before[column] :][::-1]

    def _add_durations(self, rows: _Rows) -> None:
        n = len(rows)
        ts_us = rows.floats("ts")
        dur_us = rows.floats("dur")
        bad_ts = ~np.isfinite(ts_us)
        bad_dur = ~np.isfinite(dur_us) | (dur_us < 0)
        # ts and dur each within 2^62 ns, so ts + dur never wraps around in int64
        far_ts = ~bad_ts & (np.abs(np.where(bad_ts, 0, ts_us)) > MAX_TIME_US)
        far_dur = ~bad_dur & (np.where(bad_dur, 0, dur_us) > MAX_TIME_US)
        keep = ~(bad_ts | bad_dur | far_ts | far_dur)
        if not keep.all():
            self.skipped["missing or non-finite ts"] += int(bad_ts.sum())
            self.skipped["missing, negative or non-finite dur"] += int((bad_dur & ~bad_ts).sum())
            self.skipped[FAR_TIME] += int(((far_ts | far_dur) & ~bad_ts & ~bad_dur).sum())
            idx = np.flatnonzero(keep)
            rows = rows.take(idx)
            ts_us, dur_us, n = ts_us[idx], dur_us[idx], len(idx)
            if n == 0:
                return
        whole = np.floor(ts_us)
        parts = self.parts
        parts["ts"].append(whole.astype(np.int64) * 1000 + np.rint((ts_us - whole) * 1000).astype(np.int64))
        parts["dur"].append(np.rint(dur_us * 1000).astype(np.int64))

        cat_codes, cat_labels = rows.codes("cat")
        kinds = np.array([self._kind_code(c, int(np.count_nonzero(cat_codes == i))) for i, c in enumerate(cat_labels)])
        kind_codes = kinds[cat_codes]
        parts["kind"].append(kind_codes)
        gpu_codes = [self.kinds[k] for k in GPU_KINDS if k in self.kinds]
        gpu = np.isin(kind_codes, gpu_codes)

        name_codes, name_labels = rows.codes("name")
        name_map = np.fromiter(
            (self.names.setdefault(_clip(s), len(self.names)) for s in name_labels), np.int64, len(name_labels)
        )
        parts["name"].append(name_map[name_codes])
        parts["input_dims"].append(self._shape_codes(rows, name_labels, name_codes))

        pid = rows.ids("pid")
        tid = rows.ids("tid")
        parts["pid"].append(pid)
        parts["tid"].append(tid)

        # Python spans (with_stack: most events of such a trace) link by their own Python ids, which are not read;
        # Kineto gives them no correlation or External id, so theirs are not read either (-1): two passes fewer.
        linked = np.flatnonzero(kind_codes != self.kinds["python"]) if "python" in self.kinds else None
        every_row = linked is None or len(linked) == n
        linked_rows = rows if every_row else rows.take(linked)

        def link_id(field: str) -> np.ndarray:
            values = linked_rows.ints(field)
            if every_row:
                return values
            column = np.full(n, -1, dtype=np.int64)
            column[linked] = values
            return column

        ext = link_id("args.external_id")
        if not _LEGACY_CATEGORIES.isdisjoint(cat_labels):  # 2021 traces spell it "external id"
            ext = np.where(ext >= 0, ext, link_id("args.external_id_legacy"))
        device = np.full(n, -1, dtype=np.int64)
        stream = np.full(n, -1, dtype=np.int64)
        grid = np.zeros(n, dtype=np.int64)
        block = np.zeros(n, dtype=np.int64)
        gpu_idx = np.flatnonzero(gpu)
        if len(gpu_idx):
            gpu_rows = rows.take(gpu_idx)
            dev, strm = gpu_rows.ints("args.device"), gpu_rows.ints("args.stream")
            # GPU rows without args fall back to Kineto's layout: pid = device, tid = stream.
            device[gpu_idx] = np.where(dev >= 0, dev, np.maximum(pid[gpu_idx], 0))
            stream[gpu_idx] = np.where(strm >= 0, strm, tid[gpu_idx])
            # total blocks and threads per block; 0 where the trace does not say
            grid[gpu_idx] = gpu_rows.volumes("args.grid")
            block[gpu_idx] = gpu_rows.volumes("args.block")
        parts["grid"].append(grid)
        parts["block"].append(block)
        parts["device"].append(device)
        parts["stream"].append(stream)
        parts["correlation"].append(link_id("args.correlation"))
        parts["external_id"].append(ext)
        self.duration_events += n

    def _add_memory(self, instants: list[_Instant]) -> None:
        """The `[memory]` instants' columns (MEMORY_PARTS). One without a usable time, without its args or with a
        value that is not a number is left out and counted (MEMORY_SKIPPED); an absent value reads as unknown.

        Each field is one C-level pass into int64: measured on 57k memory events, 3 ms a field, where one pass
        building a tuple per event took 50 ms and passes into float64 6 ms a field."""
        names = list(map(attrgetter("name"), instants))
        if names.count(MEMORY_EVENT) != len(names):
            named = np.fromiter(map(partial(operator.eq, MEMORY_EVENT), names), bool, len(names))
            instants = list(map(instants.__getitem__, np.flatnonzero(named).tolist()))
        n = len(instants)
        if not n:
            return
        args = list(map(attrgetter("args"), instants))
        ts_us = _floats(instants, "ts")
        try:  # every value an integer (Kineto's layout): int64 straight away
            numbers = [np.fromiter(map(attrgetter(f), args), np.int64, n) for f in _MEMORY_NUMBERS]
            usable = np.ones(n, dtype=bool)
        except (AttributeError, TypeError, ValueError, OverflowError):  # absent or odd values, args not an object
            numbers, usable = _memory_numbers(instants)
        keep = usable & np.isfinite(ts_us) & (np.abs(np.where(np.isfinite(ts_us), ts_us, 0)) <= MAX_TIME_US)
        if not keep.all():
            self.skipped[MEMORY_SKIPPED] += int((~keep).sum())
            if not keep.any():
                return
            ts_us, numbers = ts_us[keep], [values[keep] for values in numbers]
        whole = np.floor(ts_us)
        parts = self.parts
        parts["memory_ts"].append(whole.astype(np.int64) * 1000 + np.rint((ts_us - whole) * 1000).astype(np.int64))
        for field, values in zip(_MEMORY_NUMBERS, numbers, strict=True):
            parts[f"memory_{field}"].append(values)

    def _int64(self, rows: list, field: str) -> np.ndarray:
        """The rows' integer field as an int64 column; JSON allows any integer, so values beyond int64 become -1
        (unknown), counted."""
        try:  # straight from the rows: no list of the values first
            return np.fromiter(map(attrgetter(field), rows), dtype=np.int64, count=len(rows))
        except OverflowError:
            values = list(map(attrgetter(field), rows))
            wide = [v if _INT64_MIN <= v <= _INT64_MAX else None for v in values]  # only on hostile input
            self.wide_ids += wide.count(None)
            return np.array([-1 if v is None else v for v in wide], dtype=np.int64)

    def _kind_code(self, category: str, count: int) -> int:
        kind = CATEGORY_KINDS.get(category)
        if kind is None:
            self.unknown_categories[category or "(no category)"] += count
            kind = "other"
        return self.kinds.setdefault(kind, len(self.kinds))

    def _shape_codes(self, rows: _Rows, labels: list[str], codes: np.ndarray) -> np.ndarray:
        out = np.zeros(len(rows), dtype=np.int64)
        wanted = [i for i, s in enumerate(labels) if s in SHAPE_OPS]
        if not wanted:
            return out
        at = np.flatnonzero(np.isin(codes, wanted))
        texts = rows.take(at).texts()
        text_codes, distinct = _codes(texts, len(texts))  # each distinct shape list decoded once
        ids = [self.dims.setdefault(t.decode(errors="replace")[:2000], len(self.dims)) if t else 0 for t in distinct]
        out[at] = np.asarray(ids, dtype=np.int64)[text_codes]
        return out

    def _id_column(self, evs: list[_Complete], field: str) -> np.ndarray:
        try:  # the common case: every id is an int
            return np.fromiter(map(attrgetter(field), evs), dtype=np.int64, count=len(evs))
        except (TypeError, ValueError, OverflowError):
            pass
        values = list(map(attrgetter(field), evs))
        codes, uniques = _codes(values, len(values))
        mapped = np.fromiter((self._id_of(u) for u in uniques), dtype=np.int64, count=len(uniques))
        return mapped[codes]

    def _id_of(self, value: int | str) -> int:
        if isinstance(value, int):
            if _INT64_MIN >> 1 <= value <= _INT64_MAX:
                return value
            self.wide_ids += 1
            value = str(value)[:40]  # beyond 64 bits: a named lane like any other label
        text = value.strip()
        if _digits(text[1:] if text.startswith("-") else text) and len(text) < 19:
            return int(text)
        if text.startswith("stream ") and _digits(text[7:]) and len(text) < 26:  # legacy GPU tid "stream 7"
            return int(text[7:])
        # Named lanes ("Traces", "Spans") get ids far below any real pid/tid.
        return self.string_ids.setdefault(value[:200], -(1 << 40) - len(self.string_ids))

    def _read_metadata(self, evs: list[_Metadata]) -> None:
        for e in reversed(evs):  # batches come last-first: the first label in the file is set last and wins
            order = e.args.sort_index if e.args is not None else None
            order = order if isinstance(order, int | float) and abs(order) < 1 << 31 else None  # NaN fails too
            if e.name == "process_sort_index" and isinstance(order, int | float):
                self.sort_order[(self._id_of(e.pid), None)] = int(order)
            elif e.name == "thread_sort_index" and isinstance(order, int | float):
                self.sort_order[(self._id_of(e.pid), self._id_of(e.tid))] = int(order)
            label = e.args.name if e.args is not None else None
            if not isinstance(label, str):
                continue
            if e.name == "process_name":
                self.process_names[self._id_of(e.pid)] = label[:200]
            elif e.name == "thread_name":
                self.thread_names[(self._id_of(e.pid), self._id_of(e.tid))] = label[:200]

    def warnings(self) -> list[str]:
        out = []
        if self.unknown_categories:
            total = sum(self.unknown_categories.values())
            out.append(f"{total} events in unknown categories kept as 'other': {dict(self.unknown_categories)}")
        for reason in _TIME_REASONS:
            if self.skipped.get(reason):
                out.append(f"{self.skipped[reason]} events skipped: {reason}")
        if self.invalid_utf8:
            out.append(f"{self.invalid_utf8} invalid UTF-8 sequences in the events replaced with U+FFFD")
        if self.wide_ids:
            out.append(f"{self.wide_ids} ids (correlation, device, stream, pid, tid) beyond 64 bits read as unknown")
        if self.memory_counted:
            out.append(f"{self.memory_counted} {COUNTED_TOTALS}")
        if self.skipped.get(MEMORY_SKIPPED):
            out.append(f"{self.skipped[MEMORY_SKIPPED]} {MEMORY_SKIPPED}")
        clipped = sum(1 for s in self.names if len(s) > MAX_NAME_CHARS)
        if clipped:
            out.append(f"{clipped} names longer than {MAX_NAME_CHARS} characters were cut")
        return out

    def frame(self) -> pd.DataFrame:
        import pandas as pd  # here, not at the top: a big file's decoding starts before pandas is loaded

        cols = {c: np.concatenate(v[::-1]) for c, v in self.parts.items() if c not in MEMORY_PARTS}  # last-first
        ts = cols["ts"]
        in_order = len(ts) < 2 or bool((ts[1:] >= ts[:-1]).all())
        order = None if in_order else np.argsort(ts, kind="stable")
        tables = {"kind": self.kinds, "name": self.names, "input_dims": self.dims}

        def sorted_column(col: str):
            values = cols[col]
            if col in tables:  # codes narrowed before the gather: fewer bytes moved
                values = values.astype(_code_dtype(len(tables[col])))
            values = values if order is None else values[order]
            return pd.Categorical.from_codes(values, categories=list(tables[col])) if col in tables else values

        names = list(COLUMNS)
        if cols["grid"].any():  # optional columns: only traces that record launch geometry have them
            names += ["grid", "block"]
        return pd.DataFrame({c: sorted_column(c) for c in [*names, "input_dims"]}, copy=False)

    def memory_frame(self) -> pd.DataFrame | None:
        """The memory table (parsers.memory_table), None without memory events. A device whose events carry no
        totals (traces before Kineto wrote them) gets the running sum of its changes, from the trace's start."""
        parts = {c: self.parts[f"memory_{c}"][::-1] for c in MEMORY_COLUMNS}  # batches came last-first
        if not parts["ts"]:
            return None
        table = memory_frame({c: np.concatenate(v) for c, v in parts.items()})
        if table is None:
            return None
        table, self.memory_counted = with_counted_totals(table)
        return table


MEMORY_PARTS = tuple(f"memory_{c}" for c in MEMORY_COLUMNS)
MEMORY_SKIPPED = "[memory] events without a usable ts, args or values, left out of the memory table"


_MEMORY_NUMBERS = ("bytes", "allocated", "reserved", "device_type", "device")
_MAX_MEMORY_NUMBER = float(1 << 53)  # beyond this a size or id is not exact in float64: the event is left out


def _floats(rows: list, field: str) -> np.ndarray:
    """float64 of each row's field, NaN for anything that is not a number (only hostile input takes the slow path)."""
    try:
        return np.fromiter(map(attrgetter(field), rows), dtype=np.float64, count=len(rows))
    except (TypeError, ValueError, OverflowError):
        return np.array([_number(v) for v in map(attrgetter(field), rows)], dtype=np.float64)


def _memory_numbers(instants: list[_Instant]) -> tuple[list[np.ndarray], np.ndarray]:
    """(the five number columns as int64, which events are usable): the slow path for memory events with absent
    values (read as unknown: bytes 0, the others -1), values that are not numbers or args that are not an object."""
    n = len(instants)
    args = [e.args if isinstance(e.args, _MemoryArgs) else None for e in instants]
    usable = np.fromiter((a is not None for a in args), bool, n)
    columns = []
    for field in _MEMORY_NUMBERS:
        values = np.array([_number(getattr(a, field)) if a is not None else 0.0 for a in args], dtype=np.float64)
        size = np.abs(values) <= _MAX_MEMORY_NUMBER  # False for NaN (absent), inf (not a number), beyond 2^53
        usable &= np.isnan(values) | size
        columns.append(np.where(size, values, 0 if field == "bytes" else UNKNOWN).astype(np.int64))
    return columns, usable


def _number(value) -> float:
    """A JSON value as a float: NaN when absent (None), inf when not a number."""
    if value is None:
        return math.nan
    if type(value) in (int, float):
        return float(value) if abs(value) < 1e300 else math.inf
    return math.inf


def _count(value: int | None) -> int | None:
    """A non-negative size from the file (SMs, bytes, ns), None when absent or beyond 2^62."""
    return value if value is not None and 0 <= value < 1 << 62 else None


def _small_count(value: object) -> int | None:
    """A small non-negative integer from the file (a compute capability, a warp size), None otherwise."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 16 else None


def _code_dtype(n: int) -> type:
    return np.int8 if n < 127 else np.int16 if n < 32_000 else np.int32


def _volumes(dims: list) -> np.ndarray:
    """_volume of each entry: Kineto's usual [x, y, z] lists in one vectorised pass, other lists one by one."""
    out = np.zeros(len(dims), dtype=np.int64)
    lists = np.flatnonzero(list(map(operator.is_, map(type, dims), repeat(tuple))))
    if not len(lists):
        return out
    lengths = np.fromiter(map(len, map(dims.__getitem__, lists.tolist())), np.int64, len(lists))
    triples = lists[lengths == 3]
    try:
        table = np.array(list(map(dims.__getitem__, triples.tolist())), dtype=np.int64).reshape(-1, 3)
    except OverflowError:  # an int beyond 64 bits: these go one by one
        lengths[lengths == 3] = -1
    else:
        valid = ((table >= 0) & (table < 1 << 31)).all(axis=1)
        valid &= table.astype(np.float64).prod(axis=1) < _MAX_VOLUME
        out[triples] = np.where(valid, table.prod(axis=1), 0)
    for i in lists[(lengths != 3) & (lengths != 0)].tolist():  # [x] or [x, y]; () is "not said"
        out[i] = _volume(dims[i])
    return out


_MAX_VOLUME = float(1 << 62)


def _volume(dims: tuple[int, ...] | int | float | str | None) -> int:
    """x*y*z of a launch grid or block; 0 for anything that is not a list of non-negative ints below 2**31 (or whose
    product does not fit in 62 bits)."""
    if not isinstance(dims, tuple) or not dims or len(dims) > 3 or min(dims) < 0 or max(dims) >= 1 << 31:
        return 0
    volume = math.prod(dims)
    return volume if volume < _MAX_VOLUME else 0


def _digits(text: str) -> bool:
    """ASCII digits only: str.isdigit() is also true of "¹" and "²", which int() refuses."""
    return text.isascii() and text.isdigit()


def _clip(name: str) -> str:
    return name if len(name) <= MAX_NAME_CHARS else name[:MAX_NAME_CHARS] + "…"


def _codes(values, n: int) -> tuple[np.ndarray, list]:
    """Dense integer codes and the distinct values, in first-seen order, without a Python loop per value.

    A value seen before is one dict lookup returning its stored code; a new one gets the table's size as its code
    (defaultdict's factory). Nothing is made per value (setdefault with a counter made an int per value, then
    mapped first positions to codes): 48 against 62 ns a value on real event names."""
    table: defaultdict = defaultdict()
    table.default_factory = table.__len__
    return np.fromiter(map(table.__getitem__, values), dtype=np.int64, count=n), list(table)


def _locate(exc: msgspec.ValidationError, offset: int = 0) -> str:
    """Turn msgspec's '$.traceEvents[12].ts' path into 'event 12: ... (at ts)'."""
    text = _one_line(exc)
    match = _PATH_INDEX.search(text)
    if match:
        index = int(match.group(1)) + offset
        field = text[match.end() :].lstrip(".").strip("`")
        reason = text.split(" - at ")[0]
        return f"event {index}: {reason}" + (f" (at {field})" if field else "")
    return f"bad event: {text}"
