"""Time analyze() plus anatomy() on a trace: `python bench/anatomy_bench.py [TRACE]`.

Default trace: /tmp/big_cpu.json (made by ../shared/bench/make_big_cpu_trace.py, 331k events)
when present, else the eager CPU sample.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis import analyze
from analysis.anatomy import anatomy
from parsers import load_trace

REPEATS = 5


def main() -> None:
    default = Path("/tmp/big_cpu.json")
    if not default.exists():
        default = Path(__file__).resolve().parents[1] / "sample_traces/cpu_tiny-llama_eager/trace.json.gz"
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else default
    timeline = load_trace(path)
    runs = []
    for _ in range(REPEATS):  # the machine is shared: report the median and the best of a few runs
        t0, c0 = time.perf_counter(), time.process_time()
        result = analyze(timeline)
        t1 = time.perf_counter()
        anat = anatomy(timeline, result)
        t2, c2 = time.perf_counter(), time.process_time()
        runs.append((t1 - t0, t2 - t1, t2 - t0, c2 - c0))
    med = [statistics.median(r[i] for r in runs) for i in range(4)]
    best = min(r[2] for r in runs)
    print(
        f"{path}: {len(timeline)} events; median of {REPEATS}: analyze {med[0]:.3f} s, anatomy {med[1]:.3f} s, "
        f"total {med[2]:.3f} s wall, {med[3]:.3f} s CPU (best total {best:.3f} s wall)"
    )
    print(f"layers: {anat.layers.layers} ({anat.layers.evidence})")


if __name__ == "__main__":
    main()
