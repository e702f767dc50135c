"""A SYNTHETIC Nsight Systems export of a program whose GPU is idle most of the capture (no generation in it).

Built with the SQLite tables `nsys export --type sqlite` writes (tests/test_nsys_reader.py's SyntheticNsysExport):
a host thread that, every 40 ms over 1.2 s, launches a short burst of kernels (a random mix of a GEMM, an
elementwise and a reduction kernel, so that no repeating sequence reads as a step), then waits. What the right
answer is follows from the rows written here (IdleCapture), never from Stepscope.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from tests.test_nsys_reader import SyntheticNsysExport

KERNELS = {  # name -> duration (ns)
    "ampere_sgemm_128x64_tn": 500_000,
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>": 40_000,
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>": 150_000,
}
WINDOW_NS = 1_200_000_000
BURST_EVERY_NS = 40_000_000
LAUNCH_NS = 6_000  # host time of one cudaLaunchKernel
START_NS = 1_000_000_000  # the capture's first event (nsys times are from its session start)


@dataclass
class IdleCapture:
    """What was written: the kernels (name, start, end) and the capture's first and last moment."""

    path: Path
    kernels: list[tuple[str, int, int]] = field(default_factory=list)
    first_ns: int = START_NS
    last_ns: int = START_NS + WINDOW_NS

    @property
    def busy_ns(self) -> int:
        return sum(end - start for _, start, end in self.kernels)  # one stream, one after another: no overlap


def write_idle_capture(path: Path, seed: int = 7) -> IdleCapture:
    """The SYNTHETIC idle-dominated export at `path` (a .sqlite file) and what it holds."""
    rng = random.Random(seed)
    export = SyntheticNsysExport(path)
    capture = IdleCapture(path)
    export.runtime("cudaGetDeviceCount", START_NS, START_NS + 2_000, 0)  # the capture opens on the host
    corr = 1
    for burst_at in range(START_NS + BURST_EVERY_NS, START_NS + WINDOW_NS - BURST_EVERY_NS, BURST_EVERY_NS):
        host, device = burst_at, burst_at
        for _ in range(rng.randint(3, 9)):
            name = rng.choice(list(KERNELS))
            export.runtime("cudaLaunchKernel", host, host + LAUNCH_NS, corr)
            start = max(device, host + LAUNCH_NS + 2_000)
            end = start + KERNELS[name]
            export.kernel(name, start, end, corr)
            capture.kernels.append((name, start, end))
            host, device, corr = host + LAUNCH_NS + rng.randint(1_000, 40_000), end, corr + 1
    export.runtime("cudaDeviceSynchronize", capture.last_ns - 3_000, capture.last_ns, 0)  # and closes on it
    export.save()
    return capture
