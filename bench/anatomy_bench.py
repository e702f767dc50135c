"""Time analyze() with its anatomy (the default) against analyze() without it: `python bench/anatomy_bench.py [TRACE]`.

analyze() computes the anatomy (categories per step, layers) itself since issue 12's wiring;
`AnalysisOptions(anatomy=False)` gives the figure without it, so the difference is the anatomy's cost.

Default trace: /tmp/big_cpu.json (made by ../shared/bench/make_big_cpu_trace.py, 331k events)
when present, else the eager CPU sample.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stepscope.analysis import AnalysisOptions, analyze
from stepscope.parsers import load_trace

REPEATS = 5


def main() -> None:
    default = Path("/tmp/big_cpu.json")
    if not default.exists():
        default = Path(__file__).resolve().parents[1] / "sample_traces/cpu_tiny-llama_eager/trace.json.gz"
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else default
    timeline = load_trace(path)
    runs = []
    for _ in range(REPEATS):  # the machine is shared: report the median and the best of a few runs
        t0 = time.perf_counter()
        analyze(timeline, AnalysisOptions(anatomy=False))
        t1, c1 = time.perf_counter(), time.process_time()
        result = analyze(timeline)
        t2, c2 = time.perf_counter(), time.process_time()
        runs.append((t1 - t0, (t2 - t1) - (t1 - t0), t2 - t1, c2 - c1))
    med = [statistics.median(r[i] for r in runs) for i in range(4)]
    best = min(r[2] for r in runs)
    anat = result.anatomy
    print(
        f"{path}: {len(timeline)} events; median of {REPEATS}: analyze without anatomy {med[0]:.3f} s, "
        f"anatomy adds {med[1]:.3f} s; analyze() total {med[2]:.3f} s wall, {med[3]:.3f} s CPU "
        f"(best total {best:.3f} s wall)"
    )
    print(f"layers: {anat.layers.layers} ({anat.layers.evidence})")


if __name__ == "__main__":
    main()
