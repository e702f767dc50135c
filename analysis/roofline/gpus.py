"""Peak memory bandwidth and dense bf16/fp16 tensor throughput of common accelerators, and the
match from a trace's device name to a row.

Throughput is dense (without 2:4 sparsity), bf16 with fp32 accumulation where a sheet says so;
each row cites its sheet. These are peaks: real kernels reach perhaps 80-90 % of the bandwidth
and 60-80 % of the FLOPs (TYPICAL_FRACTIONS), which `Hardware.scaled` applies where wanted.
The seed's H100 figures, 3350 GB/s and 700 TFLOP/s, are the SXM's peak bandwidth and about
0.7 of its 989 TFLOP/s peak.
"""

from __future__ import annotations

import re

from .hardware import Hardware

GIB = 1 << 30
TYPICAL_FRACTIONS = {"memory": 0.8, "flops": 0.7}  # a starting point for the UI's editable fractions


def _gpu(name: str, gbps: float, tflops: float, source: str, memory: str = "HBM", gib: float | None = None) -> Hardware:
    """A row; `gib`: the memory size the sheet names (its "80GB" read as GiB, what the device reports to within
    a few percent), None where the row covers several sizes."""
    capacity = int(gib * GIB) if gib else None
    return Hardware(name, gbps * 1e9, tflops * 1e12, "gpu", memory, source, capacity)


GPUS: dict[str, Hardware] = {
    g.name: g
    for g in [
        # NVIDIA H100 Tensor Core GPU datasheet (2023): SXM 3.35 TB/s, BF16 1979 TFLOPS with sparsity.
        _gpu("H100 SXM", 3350, 989, "NVIDIA H100 datasheet, SXM5 80GB", gib=80),
        # same datasheet: PCIe 2 TB/s, BF16 1513 TFLOPS with sparsity.
        _gpu("H100 PCIe", 2000, 756, "NVIDIA H100 datasheet, PCIe 80GB", gib=80),
        # same datasheet: H100 NVL (94 GB) 3.9 TB/s, BF16 1671 TFLOPS with sparsity.
        _gpu("H100 NVL", 3900, 835, "NVIDIA H100 datasheet, NVL 94GB", gib=94),
        # NVIDIA H200 datasheet (2024): SXM 4.8 TB/s, BF16 1979 TFLOPS with sparsity.
        _gpu("H200", 4800, 989, "NVIDIA H200 datasheet, SXM 141GB", gib=141),
        # NVIDIA GH200 Grace Hopper datasheet: 96 GB HBM3 at 4 TB/s, Hopper BF16 1979 TFLOPS sparse.
        _gpu("GH200", 4000, 989, "NVIDIA GH200 datasheet, 96GB HBM3", gib=96),
        # NVIDIA A100 datasheet (2021): 40GB 1555 GB/s; BF16 312 TFLOPS dense (624 with sparsity).
        _gpu("A100 40GB", 1555, 312, "NVIDIA A100 datasheet, 40GB", gib=40),
        # same datasheet: 80GB SXM 2039 GB/s (80GB PCIe: 1935 GB/s); BF16 312 TFLOPS dense.
        _gpu("A100 80GB", 2039, 312, "NVIDIA A100 datasheet, 80GB SXM", gib=80),
        # NVIDIA B200 (HGX B200 datasheet, 2024): 8 TB/s per GPU, FP16/BF16 36 PFLOPS sparse per 8 GPUs; memory
        # size left unknown (180 or 192 GB depending on the system).
        _gpu("B200", 8000, 2250, "NVIDIA HGX B200 datasheet, per GPU"),
        # NVIDIA L4 datasheet: 300 GB/s GDDR6, BF16 242 TFLOPS with sparsity.
        _gpu("L4", 300, 121, "NVIDIA L4 datasheet", memory="GDDR6", gib=24),
        # NVIDIA L40S datasheet: 864 GB/s GDDR6, BF16 733 TFLOPS with sparsity (362 dense).
        _gpu("L40S", 864, 362, "NVIDIA L40S datasheet", memory="GDDR6", gib=48),
        # NVIDIA L40 datasheet: 864 GB/s GDDR6, BF16 362 TFLOPS with sparsity.
        _gpu("L40", 864, 181, "NVIDIA L40 datasheet", memory="GDDR6", gib=48),
        # NVIDIA A10 datasheet: 600 GB/s GDDR6, BF16 125 TFLOPS dense (250 sparse).
        _gpu("A10", 600, 125, "NVIDIA A10 datasheet", memory="GDDR6", gib=24),
        # AWS G5's A10G has no NVIDIA sheet; AWS lists 600 GB/s (24 GB GDDR6) and the A10's tensor
        # figure is the usual stand-in (the A10G has more SMs at lower clocks): treat as approximate.
        _gpu("A10G", 600, 125, "AWS G5 page + NVIDIA A10 datasheet (approximate)", memory="GDDR6", gib=24),
        # NVIDIA Ada Lovelace architecture whitepaper: RTX 4090 1008 GB/s GDDR6X, FP16/BF16 tensor with
        # FP32 accumulate 165.2 TFLOPS dense (330.4 with fp16 accumulate).
        _gpu("RTX 4090", 1008, 165.2, "NVIDIA Ada whitepaper, fp32 accumulate", memory="GDDR6X", gib=24),
        # AMD Instinct MI300X datasheet: 5.3 TB/s HBM3 (192 GB), BF16 1307.4 TFLOPS dense (2614.9 sparse).
        _gpu("MI300X", 5300, 1307.4, "AMD Instinct MI300X datasheet", gib=192),
        # AMD Instinct MI325X datasheet: 256 GB HBM3E at 6 TB/s, BF16 1307.4 TFLOPS dense (2614.9 sparse).
        _gpu("MI325X", 6000, 1307.4, "AMD Instinct MI325X datasheet", memory="HBM3E", gib=256),
        # AMD Instinct MI300A APU datasheet: 128 GB unified HBM3 at 5.3 TB/s, BF16 980.6 TFLOPS dense.
        _gpu("MI300A", 5300, 980.6, "AMD Instinct MI300A datasheet", gib=128),
        # NVIDIA H20 product brief: 96 GB HBM3 at 4.0 TB/s, BF16 148 TFLOPS dense.
        _gpu("H20", 4000, 148, "NVIDIA H20 product brief, 96GB", gib=96),
        # NVIDIA V100 datasheet: SXM2 900 GB/s, FP16 tensor 125 TFLOPS (no bf16: fp16 figure); 16 or 32 GB.
        _gpu("V100", 900, 125, "NVIDIA V100 datasheet, SXM2 (fp16)"),
        # same datasheet: PCIe 900 GB/s, FP16 tensor 112 TFLOPS.
        _gpu("V100 PCIe", 900, 112, "NVIDIA V100 datasheet, PCIe (fp16)"),
    ]
}

# (pattern on the lowercased device name, row); the first match wins, so specific names go first.
_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"gh200", "GH200"),
    (r"h200", "H200"),
    (r"\bh20\b", "H20"),
    (r"h100.*pcie", "H100 PCIe"),
    (r"h100.*nvl", "H100 NVL"),
    (r"h100", "H100 SXM"),
    (r"a100.*80\s*gb|a100.*-80g|pg509-210", "A100 80GB"),
    (r"a100.*40\s*gb|a100.*-40g|pg509-200", "A100 40GB"),
    (r"a100", "A100 80GB"),  # refined by memory size below
    (r"\bg?b200\b", "B200"),
    (r"l40s", "L40S"),
    (r"\bl40\b", "L40"),
    (r"\bl4\b", "L4"),
    (r"a10g", "A10G"),
    (r"\ba10\b", "A10"),
    (r"4090", "RTX 4090"),
    (r"mi300x", "MI300X"),
    (r"mi325x", "MI325X"),
    (r"mi300a", "MI300A"),
    (r"v100.*pcie", "V100 PCIe"),
    (r"v100", "V100"),
)


def match_gpu(device_name: str | None, memory_bytes: int | None = None) -> Hardware | None:
    """The table row for a trace's device name ("NVIDIA H100 80GB HBM3" -> H100 SXM), or None.

    `memory_bytes` (the trace's device properties) settles names that do not say the variant:
    an A100 with under 60 GiB is the 40 GB one, a bare "H100" with over 90 GiB is the NVL."""
    if not device_name or not device_name.strip():
        return None
    text = device_name.lower()
    for pattern, row in _PATTERNS:
        if re.search(pattern, text):
            if memory_bytes and pattern == "a100":
                row = "A100 40GB" if memory_bytes < 60 * GIB else "A100 80GB"
            if memory_bytes and row == "H100 SXM" and memory_bytes > 90 * GIB:
                row = "H100 NVL"
            return GPUS[row]
    return None


def gpu_by_name(name: str) -> Hardware:
    """A row by the user's name for it: a table key, or anything `match_gpu` understands ("h100")."""
    for key, row in GPUS.items():
        if key.lower() == name.strip().lower():
            return row
    row = match_gpu(name)
    if row is None:
        known = ", ".join(GPUS)
        raise ValueError(f"unknown GPU {name!r}; known: {known} (or give --hbm-gbps and --tflops)")
    return row
