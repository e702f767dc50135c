"""The capture machine's own roofline figures for a CPU run, measured once at capture and stored in run.json.

A CPU has no datasheet: the roofline of a CPU run rests on its measured memory bandwidth and matmul throughput.
Measured later, on whatever machine opens the trace, they would be that machine's, and different in every process;
measured here, with torch (what the run computed with), they are the capture machine's and stored with the run
(run.json `machine`, read by analysis/roofline/machine.py). About half a second, CPU runs only.
"""

from __future__ import annotations

import socket
import time
from typing import Any

COPY_BYTES = 64 << 20  # well beyond the caches
MATMUL_N = 1024


def measure_cpu() -> dict[str, Any]:
    """run.json's `machine` object: bytes per second one copy moves (read + write) and float32 FLOP per second of a
    square matmul, each the best of a few runs."""
    import torch

    src = torch.ones(COPY_BYTES // 4, dtype=torch.float32)
    dst = torch.empty_like(src)
    dst.copy_(src)  # touch the pages
    copy_s = min(_timed(lambda: dst.copy_(src)) for _ in range(5))
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(MATMUL_N, MATMUL_N, generator=gen)
    b = torch.randn(MATMUL_N, MATMUL_N, generator=gen)
    out = torch.empty_like(a)
    torch.matmul(a, b, out=out)  # warm up the BLAS threads
    matmul_s = min(_timed(lambda: torch.matmul(a, b, out=out)) for _ in range(3))
    return {
        "memory_bytes_per_s": 2 * src.numel() * 4 / copy_s,
        "flops_per_s": 2 * MATMUL_N**3 / matmul_s,
        "host": socket.gethostname()[:100],
        "how": "measured at capture: torch copy of 64 MiB and float32 1024^3 matmul, best of runs",
    }


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return max(time.perf_counter() - start, 1e-9)
