"""Issue 39 item 3: the memory budget prices names' bytes. A read of long distinct names under a budget either stays
within the budget above the same read with short names (the largest reading process's peak RSS) or is refused in
one line naming STEPSCOPE_MEMORY_BUDGET_MB.

Writes two SYNTHETIC plain JSON traces into bench/out/ (deleted after): EVENTS duration events, each with a distinct
name of NAME_KB kilobytes, and the same events with short names; runs `analyze --json` on each under each budget
(GNU time's %M: the largest process's peak resident set) and prints, per budget, both outcomes and the margin.

    python bench/long_names_budget.py [--events 20000] [--name-kb 8] [--budgets 256 1536 4096]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_PEAK = re.compile(r"Maximum resident set size \(kbytes\): (\d+)")


def write_trace(path: Path, events: int, name_bytes: int) -> None:
    with open(path, "w") as out:
        out.write('{"traceEvents": [\n')
        for i in range(events):
            name = f"op {i} " + "x" * max(0, name_bytes - 12)
            event = {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": i * 10, "dur": 5}
            out.write(("," if i else "") + json.dumps(event) + "\n")
        out.write("]}\n")


def run(path: Path, budget_mb: int) -> tuple[int, int, str]:
    """(exit status, peak RSS in MB, the error line or '')."""
    with tempfile.TemporaryDirectory(prefix="stepscope-budget-") as cache:
        env = {**os.environ, "STEPSCOPE_CACHE_DIR": cache, "STEPSCOPE_MEMORY_BUDGET_MB": str(budget_mb)}
        done = subprocess.run(
            ["/usr/bin/time", "-v", sys.executable, "-m", "app.cli", "analyze", str(path), "--json"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    peak = _PEAK.search(done.stderr)
    error = next((line for line in done.stderr.splitlines() if line.startswith("error:")), "")
    return done.returncode, int(peak.group(1)) // 1024 if peak else -1, error


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=20_000)
    p.add_argument("--name-kb", type=int, default=8)
    p.add_argument("--budgets", type=int, nargs="+", default=[256, 1536, 4096])
    args = p.parse_args(argv)
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    long_path, short_path = out / "long-names.json", out / "short-names.json"
    try:
        write_trace(long_path, args.events, args.name_kb * 1024)
        write_trace(short_path, args.events, 16)
        print(f"{args.events:,} events: long names {long_path.stat().st_size / 2**20:.0f} MB, short ones "
              f"{short_path.stat().st_size / 2**20:.1f} MB")  # fmt: skip
        for budget in args.budgets:
            rc_short, peak_short, _ = run(short_path, budget)
            rc_long, peak_long, error = run(long_path, budget)
            if rc_long == 0:
                verdict = "within" if peak_long <= budget + peak_short else "OVER"
                said = f"read, peak {peak_long} MB: {verdict} the budget above the short names' read"
            else:
                names_it = "STEPSCOPE_MEMORY_BUDGET_MB" in error and error.count("\n") == 0
                said = f"refused (rc {rc_long}, peak {peak_long} MB, names the setting: {names_it}): {error[:160]}"
            print(f"budget {budget} MB: short names rc {rc_short}, peak {peak_short} MB; long names {said}")
    finally:
        for path in (long_path, short_path):
            path.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
