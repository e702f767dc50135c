"""Kineto events -> compact columns: the column builder every way of reading a trace ends in.

A slice of duration events is read through one interface, `Rows.read(field)`, for each field of the table in
parsers/kineto/fields.py, by the field's kind; `ColumnBuilder._add_durations` is the one place columns are made.
Strings (names, categories) become integer codes through dicts shared by all batches, so each distinct name is
stored once however many events carry it.
"""

from __future__ import annotations

import math
import operator
from collections import Counter, defaultdict
from functools import partial
from itertools import count, filterfalse, repeat
from operator import attrgetter
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from ..errors import TraceError
from ..memory_table import COUNTED_TOTALS, MEMORY_COLUMNS, UNKNOWN, memory_frame, with_counted_totals
from ..timeline import COLUMNS, GPU_KINDS
from .fields import (
    CODE_COLUMNS,
    FIELDS,
    INSTANT_TYPES,
    MEMORY_EVENT,
    SKIPPED_TYPES,
    Complete,
    Instant,
    MemoryArgs,
    Metadata,
)

if TYPE_CHECKING:
    import pandas as pd

# Duration events turned into columns at once: the dozen passes over a batch's structs (one per field) run over
# this many while they are still in a core's cache. Measured on 12 real vLLM pieces of 35k events (with_stack,
# mostly python spans), modes shuffled, 6-8 rounds each: a piece's whole read (decode, columns, sort, free) took
# a median 918 ns an event in slices of 8,192 (925 for 4,096, 972 for 16,384) against 1,018 at once.
SLICE_EVENTS = 8_192
MAX_TIME_US = float(1 << 62) / 1000  # |ts| and dur beyond 2^62 ns (146 years): skipped, never wrapped
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
FAR_TIME = "ts or dur beyond 2^62 ns (would overflow 64-bit time)"
TIME_REASONS = ("missing or non-finite ts", "missing, negative or non-finite dur", FAR_TIME)
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


def one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:300]


class Rows:
    """Duration events decoded by msgspec (fields.Complete), asked for their fields a column at a time. By the
    field's kind (fields.Field): "time" float64 us, "text" (codes, the distinct strings in first-seen order), "id",
    "int" and "volume" int64, "raw" the bytes as written (b"" where absent)."""

    def __init__(self, evs: list, builder: ColumnBuilder) -> None:
        self.evs, self.builder = evs, builder

    def __len__(self) -> int:
        return len(self.evs)

    def take(self, index: np.ndarray) -> Rows:
        return Rows(list(map(self.evs.__getitem__, index.tolist())), self.builder)

    def slice(self, start: int, stop: int) -> Rows:
        return Rows(self.evs[start:stop], self.builder)

    def read(self, name: str):
        field = FIELDS[name]
        attribute = f"args.{name}" if field.in_args else name
        values = map(attrgetter(attribute), self.evs)
        if field.kind == "time":
            return np.fromiter(values, dtype=np.float64, count=len(self.evs))
        if field.kind == "text":
            return _codes(values, len(self.evs))
        if field.kind == "id":
            return self.builder._id_column(self.evs, attribute)
        if field.kind == "int":
            return self.builder._int64(self.evs, attribute)
        if field.kind == "volume":
            return _volumes(list(values))
        return list(map(bytes, values))


class ColumnBuilder:
    """Accumulates one batch of decoded events at a time into compact columns.

    Strings (names, categories) become integer codes through dicts shared by all
    batches, so each distinct name is stored once however many events carry it.
    """

    # a code column -> the table of its strings
    CODE_TABLES: ClassVar[dict[str, str]] = dict(zip(CODE_COLUMNS, ("kinds", "names", "dims"), strict=True))

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
        complete = list(filter(Complete.__instancecheck__, evs))  # nearly every event: counted without a Counter
        if len(complete) != len(evs):
            others = list(filterfalse(Complete.__instancecheck__, evs))
            phases = Counter(map(type, others))
            for cls, n in phases.items():
                if cls in SKIPPED_TYPES:
                    self.skipped[SKIPPED_TYPES[cls]] += n
            if phases.get(Metadata):
                self.skipped["metadata"] += phases[Metadata]
                self._read_metadata(list(filter(Metadata.__instancecheck__, others)))
            instants = sum(phases.get(cls, 0) for cls in INSTANT_TYPES)
            if instants:
                self.skipped["instant"] += instants  # not frame rows; the memory ones also go to the memory table
                self._add_memory(list(filter(Instant.__instancecheck__, others)))
        if complete:
            self._add_rows(Rows(complete, self), offset)

    def _add_rows(self, rows: Rows, offset: int) -> None:
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
                    f"(ts, dur, pid, tid or an id in args): {one_line(exc)}"
                ) from None
        if sliced:  # the parts are kept last-first (see frame()): the slices' too
            for column, parts in self.parts.items():
                parts[before[column] :] = parts[before[column] :][::-1]

    def _add_durations(self, rows: Rows) -> None:
        n = len(rows)
        ts_us = rows.read("ts")
        dur_us = rows.read("dur")
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

        cat_codes, cat_labels = rows.read("cat")
        kinds = np.array([self._kind_code(c, int(np.count_nonzero(cat_codes == i))) for i, c in enumerate(cat_labels)])
        kind_codes = kinds[cat_codes]
        parts["kind"].append(kind_codes)
        gpu_codes = [self.kinds[k] for k in GPU_KINDS if k in self.kinds]
        gpu = np.isin(kind_codes, gpu_codes)

        name_codes, name_labels = rows.read("name")
        name_map = np.fromiter(
            (self.names.setdefault(_clip(s), len(self.names)) for s in name_labels), np.int64, len(name_labels)
        )
        parts["name"].append(name_map[name_codes])
        parts["input_dims"].append(self._shape_codes(rows, name_labels, name_codes))

        pid = rows.read("pid")
        tid = rows.read("tid")
        parts["pid"].append(pid)
        parts["tid"].append(tid)

        # Python spans (with_stack: most events of such a trace) link by their own Python ids, which are not read;
        # Kineto gives them no correlation or External id, so theirs are not read either (-1): two passes fewer.
        linked = np.flatnonzero(kind_codes != self.kinds["python"]) if "python" in self.kinds else None
        every_row = linked is None or len(linked) == n
        linked_rows = rows if every_row else rows.take(linked)

        def link_id(field: str) -> np.ndarray:
            values = linked_rows.read(field)
            if every_row:
                return values
            column = np.full(n, -1, dtype=np.int64)
            column[linked] = values
            return column

        ext = link_id("external_id")
        if not _LEGACY_CATEGORIES.isdisjoint(cat_labels):  # 2021 traces spell it "external id"
            ext = np.where(ext >= 0, ext, link_id("external_id_legacy"))
        device = np.full(n, -1, dtype=np.int64)
        stream = np.full(n, -1, dtype=np.int64)
        grid = np.zeros(n, dtype=np.int64)
        block = np.zeros(n, dtype=np.int64)
        gpu_idx = np.flatnonzero(gpu)
        if len(gpu_idx):
            gpu_rows = rows.take(gpu_idx)
            dev, strm = gpu_rows.read("device"), gpu_rows.read("stream")
            # GPU rows without args fall back to Kineto's layout: pid = device, tid = stream.
            device[gpu_idx] = np.where(dev >= 0, dev, np.maximum(pid[gpu_idx], 0))
            stream[gpu_idx] = np.where(strm >= 0, strm, tid[gpu_idx])
            # total blocks and threads per block; 0 where the trace does not say
            grid[gpu_idx] = gpu_rows.read("grid")
            block[gpu_idx] = gpu_rows.read("block")
        parts["grid"].append(grid)
        parts["block"].append(block)
        parts["device"].append(device)
        parts["stream"].append(stream)
        parts["correlation"].append(link_id("correlation"))
        parts["external_id"].append(ext)
        self.duration_events += n

    def _add_memory(self, instants: list[Instant]) -> None:
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

    def _shape_codes(self, rows: Rows, labels: list[str], codes: np.ndarray) -> np.ndarray:
        out = np.zeros(len(rows), dtype=np.int64)
        wanted = [i for i, s in enumerate(labels) if s in SHAPE_OPS]
        if not wanted:
            return out
        at = np.flatnonzero(np.isin(codes, wanted))
        texts = rows.take(at).read("input_dims")
        text_codes, distinct = _codes(texts, len(texts))  # each distinct shape list decoded once
        ids = [self.dims.setdefault(t.decode(errors="replace")[:2000], len(self.dims)) if t else 0 for t in distinct]
        out[at] = np.asarray(ids, dtype=np.int64)[text_codes]
        return out

    def _id_column(self, evs: list[Complete], field: str) -> np.ndarray:
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

    def _read_metadata(self, evs: list[Metadata]) -> None:
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
        for reason in TIME_REASONS:
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
                values = values.astype(code_dtype(len(tables[col])))
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


def _memory_numbers(instants: list[Instant]) -> tuple[list[np.ndarray], np.ndarray]:
    """(the five number columns as int64, which events are usable): the slow path for memory events with absent
    values (read as unknown: bytes 0, the others -1), values that are not numbers or args that are not an object."""
    n = len(instants)
    args = [e.args if isinstance(e.args, MemoryArgs) else None for e in instants]
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


def code_dtype(n: int) -> type:
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
