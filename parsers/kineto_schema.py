"""The shape of a Kineto / Chrome-trace JSON document as msgspec decodes it: typed structs for the events
Stepscope reads, field-less ones for the phases it only counts.

Its own module, free of numpy: the two-process reader decodes the document's head and plans its pieces with
these before it forks, and the numpy-based column building (chrome_trace) is imported after the fork, in both
processes at once."""

from __future__ import annotations

import math
from typing import Any, Union

import msgspec

_NO_RAW = msgspec.Raw(b"")


class _Args(msgspec.Struct, frozen=True, gc=False):
    correlation: int = -1
    external_id: int = msgspec.field(default=-1, name="External id")
    external_id_legacy: int = msgspec.field(default=-1, name="external id")
    device: int = -1
    stream: int = -1
    input_dims: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input Dims")
    grid: tuple[int, ...] | int | float | str | None = ()  # a kernel's launch grid and block (Kineto: [x, y, z])
    block: tuple[int, ...] | int | float | str | None = ()


_NO_ARGS = _Args()


class _Complete(msgspec.Struct, tag_field="ph", tag="X", gc=False):
    """A duration event: the only phase that becomes a Timeline row."""

    cat: str = ""
    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float = math.nan
    dur: float = math.nan
    args: _Args = _NO_ARGS


class _MetaArgs(msgspec.Struct, gc=False):
    name: str | int | float | None = None
    sort_index: int | float | None = None


class _Metadata(msgspec.Struct, tag_field="ph", tag="M", gc=False):
    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    args: _MetaArgs | None = None


class _MemoryArgs(msgspec.Struct, gc=False):
    """What a `[memory]` instant says (profile_memory=True); typed loosely: an instant's args are free-form, and a
    value that is not a number is skipped and counted by the column builder, never a reason to reject the file."""

    bytes: Any = msgspec.field(default=None, name="Bytes")
    allocated: Any = msgspec.field(default=None, name="Total Allocated")
    reserved: Any = msgspec.field(default=None, name="Total Reserved")
    device_type: Any = msgspec.field(default=None, name="Device Type")
    device: Any = msgspec.field(default=None, name="Device Id")


class _Instant(msgspec.Struct, tag_field="ph", tag="i", gc=False):
    """An instant event: not a Timeline row; the `[memory]` ones fill the memory table (parsers.memory_table)."""

    name: Any = ""
    ts: Any = None
    args: _MemoryArgs | list | str | int | float | bool | None = None


class _LegacyInstant(_Instant, tag="I"):
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
_SKIPPED_TYPES = {_skipped_phase(p): SKIPPED_LABELS[p] for p in COUNTED_PHASES}
_INSTANT_TYPES = (_Instant, _LegacyInstant)
_AnyEvent = Union[(_Complete, _Metadata, *_INSTANT_TYPES, *_SKIPPED_TYPES)]


class _DeviceProps(msgspec.Struct):
    id: int = 0
    name: str = ""
    numSms: int | None = None  # noqa: N815 - Kineto's key
    totalGlobalMem: int | None = None  # noqa: N815
    # what names a device whose "name" is empty (ROCm): read as anything and checked by the reader, so that a
    # malformed value costs its field, not the trace
    computeMajor: Any = None  # noqa: N815
    computeMinor: Any = None  # noqa: N815
    warpSize: Any = None  # noqa: N815


class _TraceDoc(msgspec.Struct):
    traceEvents: list[msgspec.Raw] | None = None  # noqa: N815
    deviceProperties: list[_DeviceProps] | None = None  # noqa: N815
    baseTimeNanoseconds: int | None = None  # noqa: N815
    schemaVersion: int | str | None = None  # noqa: N815
    traceName: str | None = None  # noqa: N815
    distributedInfo: Any = None  # noqa: N815 - rank, world_size, backend of a torch.distributed job (checked by its reader)
    host_name: Any = None
