"""The one table of what Stepscope reads from a Kineto / Chrome-trace JSON event, and everything derived from it.

`EVENT_FIELDS` lists each field of a duration event (`ph` X) that becomes part of a Timeline row: its JSON key,
whether it sits in the event's `args`, what kind of value it is and the frame column it feeds. From that table come
msgspec's schema of an event (`Complete`, `Args`), what the column builder asks a slice of rows for and how
(`Rows.read`, parsers/kineto/columns.py), the frame's columns and a piece's columns and code tables as the other
process sends them (parsers/kineto/two_processes.py). So a new field is one row here plus its use.

Free of numpy: the two-process reader decodes the document's head and plans its pieces with these before the
numpy-based column building is imported (after the fork, in both processes at once)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Union

import msgspec


@dataclass(frozen=True)
class Field:
    """One field of a duration event. kind: "time" (a float in us), "text" (a string coded into a table), "id" (a
    pid/tid: an int or a string lane), "int" (an int64 id, -1 when absent), "volume" (a launch grid or block: the
    product of its list), "raw" (JSON kept as written: the shapes of a host op)."""

    name: str
    key: str
    in_args: bool
    kind: str
    column: str


EVENT_FIELDS = (  # in the frame's column order
    Field("ts", "ts", False, "time", "ts"),
    Field("dur", "dur", False, "time", "dur"),
    Field("cat", "cat", False, "text", "kind"),
    Field("name", "name", False, "text", "name"),
    Field("pid", "pid", False, "id", "pid"),
    Field("tid", "tid", False, "id", "tid"),
    Field("device", "device", True, "int", "device"),
    Field("stream", "stream", True, "int", "stream"),
    Field("correlation", "correlation", True, "int", "correlation"),
    Field("external_id", "External id", True, "int", "external_id"),
    Field("external_id_legacy", "external id", True, "int", "external_id"),  # 2021 traces
    Field("input_dims", "Input Dims", True, "raw", "input_dims"),
    Field("grid", "grid", True, "volume", "grid"),
    Field("block", "block", True, "volume", "block"),
)
FIELDS = {f.name: f for f in EVENT_FIELDS}
OPTIONAL_COLUMNS = ("input_dims", "grid", "block")  # a frame has them where the trace does
# The frame's columns (parsers.timeline.COLUMNS), then the optional ones.
FRAME_COLUMNS = tuple(dict.fromkeys(f.column for f in EVENT_FIELDS if f.column not in OPTIONAL_COLUMNS))
CODE_COLUMNS = ("kind", "name", "input_dims")  # string codes into a table of the builder's

# --- msgspec's schema, from the table ---------------------------------------------------------------------------

_NO_RAW = msgspec.Raw(b"")
_TYPES: dict[str, tuple[Any, Any]] = {  # kind -> (msgspec type, default)
    "time": (float, math.nan),
    "text": (str, ""),
    "id": (int | str, 0),
    "int": (int, -1),
    "raw": (msgspec.Raw, _NO_RAW),
    "volume": (tuple[int, ...] | int | float | str | None, ()),
}


def _struct_fields(in_args: bool) -> list[tuple]:
    return [
        (f.name, _TYPES[f.kind][0], msgspec.field(default=_TYPES[f.kind][1], name=f.key))
        for f in EVENT_FIELDS
        if f.in_args == in_args
    ]


Args = msgspec.defstruct("Args", _struct_fields(True), frozen=True, gc=False)
NO_ARGS = Args()
# A duration event: the only phase that becomes a Timeline row.
Complete = msgspec.defstruct(
    "Complete",
    [*_struct_fields(False), ("args", Args, msgspec.field(default=NO_ARGS))],
    tag_field="ph",
    tag="X",
    gc=False,
)


class MetaArgs(msgspec.Struct, gc=False):
    name: str | int | float | None = None
    sort_index: int | float | None = None


class Metadata(msgspec.Struct, tag_field="ph", tag="M", gc=False):
    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    args: MetaArgs | None = None


class MemoryArgs(msgspec.Struct, gc=False):
    """What a `[memory]` instant says (profile_memory=True); typed loosely: an instant's args are free-form, and a
    value that is not a number is skipped and counted by the column builder, never a reason to reject the file."""

    bytes: Any = msgspec.field(default=None, name="Bytes")
    allocated: Any = msgspec.field(default=None, name="Total Allocated")
    reserved: Any = msgspec.field(default=None, name="Total Reserved")
    device_type: Any = msgspec.field(default=None, name="Device Type")
    device: Any = msgspec.field(default=None, name="Device Id")


class Instant(msgspec.Struct, tag_field="ph", tag="i", gc=False):
    """An instant event: not a Timeline row; the `[memory]` ones fill the memory table (parsers.memory_table)."""

    name: Any = ""
    ts: Any = None
    args: MemoryArgs | list | str | int | float | bool | None = None


class LegacyInstant(Instant, tag="I"):
    """The Chrome format's older spelling of an instant."""


MEMORY_EVENT = "[memory]"


def _skipped_phase(phase: str) -> type:
    """A field-less struct per other Chrome phase: msgspec skips their bodies without building objects."""
    return msgspec.defstruct(f"_Phase_{ord(phase)}", [], tag_field="ph", tag=phase, gc=False)


# Every phase of the Chrome trace format; an unknown phase means the file is not a trace.
COUNTED_PHASES = "BECbnestfPONDRc()Vv"  # and the instants above: only counted, never read
_PHASE_LABELS = {
    "i": "instant",
    "I": "instant",
    "s": "flow",
    "f": "flow",
    "t": "flow",
    "B": "begin/end (not read)",
    "E": "begin/end (not read)",
    "C": "counter (not read)",
}
SKIPPED_LABELS = {p: _PHASE_LABELS.get(p, f"phase {p} (not read)") for p in COUNTED_PHASES}  # in meta.skipped
SKIPPED_TYPES = {_skipped_phase(p): SKIPPED_LABELS[p] for p in COUNTED_PHASES}
INSTANT_TYPES = (Instant, LegacyInstant)
AnyEvent = Union[(Complete, Metadata, *INSTANT_TYPES, *SKIPPED_TYPES)]


class DeviceProps(msgspec.Struct):
    id: int = 0
    name: str = ""
    numSms: int | None = None  # noqa: N815 - Kineto's key
    totalGlobalMem: int | None = None  # noqa: N815
    # what names a device whose "name" is empty (ROCm): read as anything and checked by the reader, so that a
    # malformed value costs its field, not the trace
    computeMajor: Any = None  # noqa: N815
    computeMinor: Any = None  # noqa: N815
    warpSize: Any = None  # noqa: N815


class TraceDoc(msgspec.Struct):
    traceEvents: list[msgspec.Raw] | None = None  # noqa: N815
    deviceProperties: list[DeviceProps] | None = None  # noqa: N815
    baseTimeNanoseconds: int | None = None  # noqa: N815
    schemaVersion: int | str | None = None  # noqa: N815
    traceName: str | None = None  # noqa: N815
    distributedInfo: Any = None  # noqa: N815 - rank, world_size, backend of a torch.distributed job (checked by its reader)
    host_name: Any = None
