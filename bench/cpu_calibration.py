"""Print this machine's measured CPU roofline figures and how long measuring them takes.

python bench/cpu_calibration.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stepscope.analysis.roofline.cpu_calibration import measure_matmul_throughput, measure_memory_bandwidth


def main() -> None:
    for _ in range(3):  # repeated: the spread shows how noisy the machine is right now
        started = time.perf_counter()
        bandwidth = measure_memory_bandwidth()
        flops = measure_matmul_throughput()
        took = time.perf_counter() - started
        print(f"memory {bandwidth / 1e9:6.1f} GB/s   matmul fp32 {flops / 1e9:7.1f} GFLOP/s   in {took:.2f} s")


if __name__ == "__main__":
    main()
