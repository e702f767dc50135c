"""Time the analysis alone (Timeline -> steps, gaps, summary, findings) on a large trace.

Issue 3's target: a 1M-event trace analysed in at most 1 s on a 2-core machine. Parsing is
timed too, separately, so the two costs are not confused. Uses the traces parse_bench.py caches.

    python bench/analysis_bench.py [TRACE ...] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stepscope.analysis import analyze  # noqa: E402
from stepscope.analysis.step_finding import find_steps  # noqa: E402
from stepscope.parsers import load_trace  # noqa: E402

DEFAULT_TRACES = [ROOT / "bench/out/gpu/gpu_trace.json", ROOT / "bench/out/cpu/cpu_trace.json"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", type=Path, default=DEFAULT_TRACES)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    missing = [p for p in args.traces if not p.exists()]
    if missing:
        print(f"missing {', '.join(map(str, missing))}: run python bench/parse_bench.py --skip-hta first")
        return 1
    print(
        f"{'trace':<28} {'events':>10} {'parse s':>8} {'analyze s (median)':>19} {'find steps s':>12} {'steps':>6} "
        f"{'gaps':>7}  method"
    )
    for path in args.traces:
        t0 = time.perf_counter()
        timeline = load_trace(path)
        parse_s = time.perf_counter() - t0
        times, finding = [], []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            result = analyze(timeline)
            times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            find_steps(timeline)  # the step finder alone (its strategies), inside the figure before
            finding.append(time.perf_counter() - t0)
        print(
            f"{path.name:<28} {len(timeline.events):>10,} {parse_s:>8.2f} {statistics.median(times):>19.3f} "
            f"{statistics.median(finding):>12.3f} {len(result.steps):>6} {len(result.gaps):>7,}  "
            f"{result.segmentation.method}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
