"""How a CPU's roofline figures are measured: no table knows the machine a CPU run used.

Bandwidth: the best of a few copies of a 64 MiB float32 array (well beyond the caches), counting
the read and the write. Throughput: the best of a few float32 1024 x 1024 matmuls (what a
CPU run computes in; numpy's BLAS uses all cores as torch does). About half a second a round;
several rounds, measured once per machine and stored (machine.py, contracts/machine_figures.py), because two
measurements differ by 10-20%, and by far more while other work competes for the cores.
"""

from __future__ import annotations

import time

import numpy as np

from .hardware import Hardware

_COPY_BYTES = 64 << 20
_MATMUL_N = 1024


def calibrate_cpu(name: str = "CPU") -> Hardware:
    """This machine's measured memory bandwidth and float32 matmul throughput: measured the first time, then
    read back from the cache folder (machine.this_machine), so every process gives the same figures."""
    from .machine import this_machine

    return this_machine(name)


def measure_memory_bandwidth(repeats: int = 5) -> float:
    """Bytes per second one copy moves (read + write) at its best."""
    src = np.ones(_COPY_BYTES // 4, dtype=np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # touch the pages
    best = min(_timed(lambda: np.copyto(dst, src)) for _ in range(repeats))
    return 2 * src.nbytes / best


def measure_matmul_throughput(repeats: int = 3) -> float:
    """FLOP per second of a float32 square matmul at its best."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((_MATMUL_N, _MATMUL_N), dtype=np.float32)
    b = rng.standard_normal((_MATMUL_N, _MATMUL_N), dtype=np.float32)
    out = np.empty_like(a)
    np.matmul(a, b, out=out)  # warm up the BLAS threads
    best = min(_timed(lambda: np.matmul(a, b, out=out)) for _ in range(repeats))
    return 2 * _MATMUL_N**3 / best


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return max(time.perf_counter() - start, 1e-9)
