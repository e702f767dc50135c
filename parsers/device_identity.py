"""A device the trace describes but does not name: ROCm traces often write `"name": ""` in deviceProperties
while giving the gfx version (computeMajor.computeMinor), the compute-unit count (numSms) and the memory size.
Those three settle the AMD Instinct parts below; anything else stays unnamed (never a guess).

Each row cites its datasheet: AMD Instinct MI300X (gfx942, 304 CUs, 192 GB HBM3), MI325X (gfx942, 304 CUs,
256 GB HBM3E), MI300A (gfx942, 228 CUs, 128 GB HBM3 shared with the CPU).
"""

from __future__ import annotations

from typing import NamedTuple

from .timeline import DeviceInfo

GIB = 1 << 30


class _Part(NamedTuple):
    name: str
    gfx: tuple[int, int]  # (computeMajor, computeMinor) as HIP reports them
    compute_units: int
    memory_gib: tuple[float, float]  # the memory HIP reports lies in [lo, hi)


_AMD_PARTS = (
    _Part("AMD Instinct MI300X", (9, 4), 304, (160, 224)),  # AMD Instinct MI300X datasheet
    _Part("AMD Instinct MI325X", (9, 4), 304, (224, 300)),  # AMD Instinct MI325X datasheet
    _Part("AMD Instinct MI300A", (9, 4), 228, (96, 160)),  # AMD Instinct MI300A datasheet
)


def identified_name(info: DeviceInfo) -> tuple[str, str] | None:
    """(product name, what decided it) for an unnamed device whose properties fit one part; None otherwise."""
    if info.name or info.compute_major is None or info.compute_minor is None or not info.sm_count:
        return None
    if not info.memory_bytes or info.warp_size not in (None, 64):  # AMD Instinct runs 64-wide wavefronts
        return None
    gib = info.memory_bytes / GIB
    gfx = (info.compute_major, info.compute_minor)
    for part in _AMD_PARTS:
        if part.gfx == gfx and part.compute_units == info.sm_count and part.memory_gib[0] <= gib < part.memory_gib[1]:
            evidence = (
                f"deviceProperties has no name; gfx {gfx[0]}.{gfx[1]}, {info.sm_count} compute units and "
                f"{gib:.0f} GiB fit only the {part.name}"
            )
            return part.name, evidence
    return None
