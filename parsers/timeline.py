"""The Timeline: the one shape every reader produces and analysis consumes.

Events are a single columnar DataFrame so that analysis can stay vectorised
over a million rows; metadata keeps everything else the file said, including
what the reader could not map, so nothing is dropped silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

# Kinds of duration events, in the order the UI lists them.
KINDS = (
    "kernel",
    "memcpy",
    "memset",
    "gpu_annotation",
    "runtime",
    "driver",
    "cpu_op",
    "annotation",
    "python",
    "sync",
    "other",
)
GPU_KINDS = ("kernel", "memcpy", "memset")
HOST_LAUNCH_KINDS = ("runtime", "driver")

COLUMNS = ("ts", "dur", "kind", "name", "pid", "tid", "device", "stream", "correlation", "external_id")


@dataclass(frozen=True)
class DeviceInfo:
    ordinal: int
    name: str
    sm_count: int | None = None  # SMs (NVIDIA), compute units (AMD)
    memory_bytes: int | None = None
    compute_major: int | None = None  # compute capability (NVIDIA); gfx major.minor (AMD: 9.4 is gfx942)
    compute_minor: int | None = None
    warp_size: int | None = None  # 32 on NVIDIA, 64 (wavefront) on AMD Instinct


@dataclass(frozen=True)
class TraceMeta:
    source_format: str
    event_count: int  # every entry in the file's event list, whatever its phase
    base_time_ns: int | None = None
    devices: dict[int, DeviceInfo] = field(default_factory=dict)
    process_names: dict[int, str] = field(default_factory=dict)
    thread_names: dict[tuple[int, int], str] = field(default_factory=dict)
    sort_order: dict[tuple[int, int | None], int] = field(default_factory=dict)  # (pid, tid or None) -> rank
    id_labels: dict[int, str] = field(default_factory=dict)  # string pid/tid -> the int standing for it
    unknown_categories: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)  # events not in the frame, by reason
    warnings: tuple[str, ...] = ()
    extra: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Timeline:
    """Duration events (ts and dur in int64 ns on the trace's own clock) plus metadata.

    The frame is sorted by ts. Treat it as read-only: analysis derives new frames. `memory`: the trace's
    allocations, frees and memory samples (parsers.memory_table), None when it has none.
    """

    events: pd.DataFrame
    meta: TraceMeta
    memory: pd.DataFrame | None = None

    def __len__(self) -> int:
        return len(self.events)

    def kind_counts(self) -> dict[str, int]:
        counts = self.events["kind"].value_counts()
        return {k: int(counts.get(k, 0)) for k in KINDS}

    @property
    def device_name(self) -> str | None:
        """Name of the GPU that ran most activity, else the device in a collector's run.json, else the device
        its properties identify (device_source says which), else None."""
        return self.device_source[0]

    @property
    def device_source(self) -> tuple[str | None, str | None]:
        """(device name, where it came from: "deviceProperties", "run.json" or the identification's evidence)."""
        gpu = self.events.loc[self.events["device"] >= 0, "device"]
        ordinals = list(gpu.value_counts().index) or sorted(self.meta.devices)
        for ordinal in ordinals:
            info = self.meta.devices.get(int(ordinal))
            if info and info.name:
                return info.name, "deviceProperties"
        # ROCm traces number kernels' devices by the node's GPU index (9, say) and deviceProperties by the
        # process's visible index (0): a trace that describes one device describes the one it ran on.
        named = {info.name for info in self.meta.devices.values() if info.name}
        if len(named) == 1:
            return named.pop(), "deviceProperties"
        run = self.meta.extra.get("run")  # a contracts.run_record.RunRecord (parsers.run_sidecar)
        device = getattr(run, "device", None)
        if isinstance(device, str) and device:
            return device[:200], "run.json"
        from .device_identity import identified_name  # it imports DeviceInfo from here

        # an unnamed device (ROCm writes "name": ""): named when every device described fits one part
        found = {identified_name(info) for info in self.meta.devices.values()}
        if len(found) == 1 and None not in found:
            return found.pop()
        return None, None
