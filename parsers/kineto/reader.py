"""Read Chrome-trace JSON as torch.profiler / Kineto write it into a Timeline: the entry points and the document.

A big plain file is read in pieces by two processes (parsers/kineto/two_processes.py); anything else, or anything
unusual about it, is read here in one process: the event list is first split into raw byte slices (no parsing of
their content), then decoded in batches into typed structs (parsers/kineto/fields.py) from which the column builder
(parsers/kineto/columns.py) pulls columns. Only one batch of structs is alive at a time, so peak memory is the file
plus the columns.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

import msgspec

from ..errors import TraceError
from ..limits import ReadLimits, check_event_count
from ..timeline import DeviceInfo, Timeline, TraceMeta
from .columns import TIME_REASONS, ColumnBuilder, one_line
from .fields import AnyEvent, TraceDoc

if TYPE_CHECKING:
    from .two_processes import Meanwhile, Progress

BATCH_EVENTS = 32_768

_ROOT_DECODER = msgspec.json.Decoder(TraceDoc)
_ARRAY_DECODER = msgspec.json.Decoder(list[msgspec.Raw])
_BATCH_DECODER = msgspec.json.Decoder(list[AnyEvent])
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
) -> Timeline:
    """Parse decompressed Chrome-trace JSON bytes into a Timeline.

    Given a one-element list instead, the reader takes the bytes out of it, so that (with no other
    reference left) the file's bytes are freed once the last event is decoded, before the frame is built.
    `meanwhile` and `progress`: as two_processes says, for big files decoded by two processes.
    """
    if isinstance(data, list):
        data = data.pop()
    if not data or not bytes(data[:4096]).strip():
        raise TraceError("the file is empty")
    from .pieces import SplitNotPossibleError
    from .two_processes import decode_in_two

    max_events = (limits or ReadLimits.from_env()).max_events
    box = [data]  # big files: in pieces, shared with a second process; anything unusual falls back
    del data
    try:
        return _timeline(*decode_in_two(box, max_events, meanwhile, progress))  # empties the box
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
    builder = ColumnBuilder()
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
        dropped = {r: n for r, n in builder.skipped.items() if r in TIME_REASONS}
        if dropped:
            raise TraceError(f"none of the {event_count} events has a usable time: skipped {dropped}")
        raise TraceError(f"none of the {event_count} events is a complete (ph X) event: nothing to analyse")
    return _timeline(doc, builder, event_count)


def read_chrome_trace_file(
    path: str | os.PathLike,
    limits: ReadLimits | None = None,
    meanwhile: Meanwhile | None = None,
    progress: Progress | None = None,
) -> Timeline:
    """A big plain JSON trace read in pieces straight from disk by two processes (two_processes). Raises
    pieces.SplitNotPossibleError when that cannot be done: the caller reads the whole file instead;
    pieces.DecodeStoppedError when `meanwhile` returns True."""
    from ..memory_budget import events_within, over_budget_error
    from .pieces import OverEventLimitError
    from .two_processes import decode_file_in_two

    limits = limits or ReadLimits.from_env()
    try:
        decoded = decode_file_in_two(path, limits.events_in_pieces, meanwhile, progress)
    except OverEventLimitError as exc:
        if limits.memory_budget_bytes is None:
            raise  # limits of the caller's own: the one-process reader words the error
        if limits.events_in_pieces < events_within(limits.memory_budget_bytes):  # STEPSCOPE_MAX_EVENTS, set lower
            check_event_count(exc.events, limits)
        raise over_budget_error(exc.events, limits.memory_budget_bytes, exc.strings) from None
    return _timeline(*decoded)


def _timeline(doc: TraceDoc, builder: ColumnBuilder, event_count: int) -> Timeline:
    """The frame and metadata from the decoded columns and the document's other fields."""
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
    return Timeline(events=builder.frame(), meta=meta, memory=memory)


def _decode_batch(raws: list[msgspec.Raw], offset: int, builder: ColumnBuilder | None = None) -> list:
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
        raise TraceError(f"malformed JSON in the event list: {one_line(exc)}") from None


def _decode_root(data: bytes | bytearray | memoryview) -> TraceDoc:
    head = bytes(data[:64]).lstrip()
    if head.startswith(b"\xef\xbb\xbf"):
        data = memoryview(data)[len(bytes(data[:64])) - len(head) + 3 :]
        head = head[3:].lstrip()
    try:
        try:
            if head[:1] == b"[":
                return TraceDoc(traceEvents=_ARRAY_DECODER.decode(data))
            if head[:1] == b"{":
                return _ROOT_DECODER.decode(data)
        except UnicodeDecodeError:  # outside the events (names inside them are repaired per batch)
            repaired, _ = _repair_utf8(bytes(data))
            return _decode_root(repaired)
    except msgspec.ValidationError as exc:
        raise TraceError(_locate(exc)) from None
    except (msgspec.DecodeError, RecursionError) as exc:
        raise TraceError(f"malformed or truncated JSON: {one_line(exc)}") from None
    raise TraceError("not JSON: the file does not start with '{' or '['")


_REPLACEMENT = "\ufffd".encode()


def _repair_utf8(data: bytes) -> tuple[bytes, int]:
    """The bytes with every invalid UTF-8 sequence replaced by U+FFFD, and how many were replaced."""
    repaired = data.decode("utf-8", errors="replace").encode("utf-8")
    return repaired, repaired.count(_REPLACEMENT) - data.count(_REPLACEMENT)


def _count(value: int | None) -> int | None:
    """A non-negative size from the file (SMs, bytes, ns), None when absent or beyond 2^62."""
    return value if value is not None and 0 <= value < 1 << 62 else None


def _small_count(value: object) -> int | None:
    """A small non-negative integer from the file (a compute capability, a warp size), None otherwise."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 16 else None


def _locate(exc: msgspec.ValidationError, offset: int = 0) -> str:
    """Turn msgspec's '$.traceEvents[12].ts' path into 'event 12: ... (at ts)'."""
    text = one_line(exc)
    match = _PATH_INDEX.search(text)
    if match:
        index = int(match.group(1)) + offset
        field = text[match.end() :].lstrip(".").strip("`")
        reason = text.split(" - at ")[0]
        return f"event {index}: {reason}" + (f" (at {field})" if field else "")
    return f"bad event: {text}"
