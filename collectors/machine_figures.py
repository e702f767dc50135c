"""The capture machine's own roofline figures for a CPU run, measured at capture and stored in run.json.

A CPU has no datasheet: the roofline of a CPU run rests on its measured memory bandwidth and matmul throughput.
Measured later, on whatever machine opens the trace, they would be that machine's, and different in every process;
measured here, with torch (what the run computed with), they are the capture machine's and stored with the run
(run.json `machine`, read by analysis/roofline/machine.py). Several rounds, the best kept and the load noted
(contracts/machine_figures.py); a few seconds, CPU runs only, after the profile.
"""

from __future__ import annotations

import time
from typing import Any

from stepscope.contracts.machine_figures import measure

COPY_BYTES = 64 << 20  # well beyond the caches
MATMUL_N = 1024


def measure_cpu() -> dict[str, Any]:
    """run.json's `machine` object: bytes per second one copy moves (read + write) and float32 FLOP per second of a
    square matmul, each the best of several rounds, with the load average they were taken at."""
    import torch

    src = torch.ones(COPY_BYTES // 4, dtype=torch.float32)
    dst = torch.empty_like(src)
    dst.copy_(src)  # touch the pages
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(MATMUL_N, MATMUL_N, generator=gen)
    b = torch.randn(MATMUL_N, MATMUL_N, generator=gen)
    out = torch.empty_like(a)
    torch.matmul(a, b, out=out)  # warm up the BLAS threads

    def copy_rate() -> float:
        return 2 * src.numel() * 4 / min(_timed(lambda: dst.copy_(src)) for _ in range(5))

    def matmul_rate() -> float:
        return 2 * MATMUL_N**3 / min(_timed(lambda: torch.matmul(a, b, out=out)) for _ in range(3))

    return measure(copy_rate, matmul_rate, "measured at capture: torch copy of 64 MiB and float32 1024^3 matmul")


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return max(time.perf_counter() - start, 1e-9)
