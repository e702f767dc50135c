"""Cold `analyze --json` in two checkouts, interleaved run by run on one trace: the speed of a change as a ratio
measured in one run (this project's VM is shared: absolute times move by a third within the hour).

Each round runs the command once in each checkout (order alternating), each with an empty STEPSCOPE_CACHE_DIR, under
GNU time (wall seconds, the largest process's peak RSS), and prints every run, the medians, their ratio and the load
average before and after. A checkout with a compiled scanner of its own (main before issue 47) should have it built
first (`python -m app.cli scanner` there), so that no run times its build.

    python bench/cold_pair.py TRACE --other /path/to/other/checkout [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_PEAK = re.compile(r"Maximum resident set size \(kbytes\): (\d+)")


def cold(checkout: Path, trace: str) -> tuple[float, int, int]:
    """(wall seconds, peak RSS in MB, exit status) of one cold analyze --json in `checkout`."""
    with tempfile.TemporaryDirectory(prefix="stepscope-pair-") as cache:
        start = time.perf_counter()
        done = subprocess.run(
            ["/usr/bin/time", "-v", sys.executable, "-m", "app.cli", "analyze", trace, "--json"],
            cwd=checkout,
            env={**os.environ, "STEPSCOPE_CACHE_DIR": cache},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
        wall = time.perf_counter() - start
    peak = _PEAK.search(done.stderr)
    return wall, int(peak.group(1)) // 1024 if peak else -1, done.returncode


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace")
    p.add_argument("--other", required=True, help="the checkout to compare with (main before the change)")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    trace = str(Path(args.trace).resolve())
    sides = {"this": ROOT, "other": Path(args.other).resolve()}
    walls: dict[str, list[float]] = {"this": [], "other": []}
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    for round_ in range(args.rounds):
        order = ["this", "other"] if round_ % 2 == 0 else ["other", "this"]
        for side in order:
            wall, peak, rc = cold(sides[side], trace)
            walls[side].append(wall)
            print(f"round {round_ + 1} {side:5s} {wall:6.2f} s  peak {peak} MB  rc {rc}", flush=True)
    this, other = statistics.median(walls["this"]), statistics.median(walls["other"])
    print(f"median: this {this:.2f} s, other {other:.2f} s; this / other {this / other:.2f}")
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
