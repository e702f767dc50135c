"""Where a cold `analyze --json` process's time goes: start-up, imports, reading, analysis (README "Speed and memory").

Each round runs, one after the other, whole processes (medians over the rounds):
- `python -c pass` (the interpreter's start), `import numpy`, `import numpy, pandas`, and the CLI's own first
  imports (`import stepscope.app.cli.main`);
- a cold read alone (`parsers.load_trace`, no cache, the process's imports included), and a cold read with the
  analysis (`analyze TRACE --json` with an empty STEPSCOPE_CACHE_DIR).
The differences are the stages: reading = read - imports of numpy and pandas (the reader imports them while the
other process decodes), analysis = analyze - read.

    python bench/cold_anatomy.py TRACE [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _timed(args: list[str], env: dict) -> float:
    start = time.perf_counter()
    subprocess.run(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    trace = str(Path(args.trace).resolve())
    py = sys.executable
    stages = {
        "start-up (python -c pass)": [py, "-c", "pass"],
        "import numpy": [py, "-c", "import numpy"],
        "import numpy, pandas": [py, "-c", "import numpy, pandas"],
        "the CLI's first imports": [py, "-c", "import stepscope.app.cli.main"],
        "read (load_trace, no cache)": [py, "-c", f"from stepscope.parsers import load_trace; load_trace({trace!r})"],
        "analyze --json, cold": [py, "-m", "app.cli", "analyze", trace, "--json"],
    }
    times: dict[str, list[float]] = {name: [] for name in stages}
    for _ in range(args.rounds):
        for name, command in stages.items():
            with tempfile.TemporaryDirectory(prefix="stepscope-cold-") as cache:
                times[name].append(_timed(command, {**os.environ, "STEPSCOPE_CACHE_DIR": cache}))
    print(f"load average {os.getloadavg()[0]:.1f}; medians of {args.rounds} rounds, whole processes:")
    med = {name: statistics.median(values) for name, values in times.items()}
    for name, value in med.items():
        print(f"  {name:32s} {value:6.2f} s  ({', '.join(f'{v:.2f}' for v in times[name])})")
    reading = med["read (load_trace, no cache)"] - med["import numpy, pandas"]
    analysis = med["analyze --json, cold"] - med["read (load_trace, no cache)"]
    print(f"  reading beyond those imports    {reading:6.2f} s; analysis, cache entry and answer {analysis:6.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
