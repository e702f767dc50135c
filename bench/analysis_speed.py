"""analyze() time as the CLI sees it: the first call in a fresh process, trace already loaded.

A warm second call is much faster (pyarrow kernels initialised, freed pages reused, lazy imports done), so a
median of repeated calls in one process understates what `python -m app.cli analyze` pays. Each repeat here is
a new process that loads the trace, then times its first analyze() (AnalysisOptions(), anatomy included) and a
second, warm one; wall and CPU (process) time, medians over the repeats. The machine is shared: CPU time is the
steadier figure.

    python bench/analysis_speed.py /tmp/big_gpu.json /tmp/big_cpu.json --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import json, sys, time
from stepscope.analysis import AnalysisOptions, analyze
from stepscope.parsers.load import load_trace
timeline = load_trace(sys.argv[1])
out = {}
for call in ("cold", "warm"):
    t0, c0 = time.perf_counter(), time.process_time()
    analyze(timeline, AnalysisOptions())
    out[call] = (time.perf_counter() - t0, time.process_time() - c0)
print(json.dumps(out))
"""


def one_run(path: Path) -> dict[str, tuple[float, float]]:
    """(wall s, CPU s) of the first and second analyze() in a fresh process."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", CHILD, str(path)], env=env, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="+", type=Path)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    head = f"{'trace':<20} {'cold wall s':>11} {'cold CPU s':>10} {'warm wall s':>11} {'warm CPU s':>10}"
    print(f"{head}  (medians of {args.repeat})")
    for path in args.traces:
        runs = [one_run(path) for _ in range(args.repeat)]
        med = {k: [statistics.median(r[k][i] for r in runs) for i in (0, 1)] for k in ("cold", "warm")}
        cold, warm = med["cold"], med["warm"]
        print(f"{path.name:<20} {cold[0]:>11.3f} {cold[1]:>10.3f} {warm[0]:>11.3f} {warm[1]:>10.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
