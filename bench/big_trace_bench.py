"""Benchmark (issue 27): a trace of several GB opened within the memory budget, cold and warm.

What it does:
1. builds the trace with bench/make_big_serving_trace.py (a real vLLM serving trace tiled end to end, written as a
   stream: the generator holds only the source) at about --target-gb GB, unless --trace names one already built;
2. runs `python -m app.cli analyze TRACE --json` under GNU time with an empty STEPSCOPE_CACHE_DIR (cold), then
   again with the same folder (warm: the Arrow entry mapped, the answer from the result cache), then once more
   with the answer cache removed (warm entry: the Timeline mapped from the entry written while the trace was read,
   the analysis run again);
3. prints each run's wall time and peak memory (GNU time's %M: the largest process's resident set, mapped file
   pages included) beside the memory budget in force (STEPSCOPE_MEMORY_BUDGET_MB, default a quarter of RAM), and
   the steps found against the truth (copies x the source's steps);
4. with --browser, bench/browser_open_bench.py's click -> first timeline drawn on the same file (one round);
5. deletes the trace it built and the cache folder (--keep leaves them).

    python bench/big_trace_bench.py [--target-gb 6] [--dir /tmp] [--trace FILE --copies N] [--browser] [--keep]

It needs free disk for the trace and its cache entry (about 1.4x the trace): it checks before building.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from make_big_serving_trace import SOURCE, build, copies_for  # noqa: E402

from stepscope.parsers.memory_budget import memory_budget_bytes  # noqa: E402

_PEAK = re.compile(r"Maximum resident set size \(kbytes\): (\d+)")
_SOURCE_STEPS = 1  # the source trace's steps (make_big_serving_trace's docstring: its one vLLM step annotation)


def _timed_cli(trace: Path, cache: Path, env: dict) -> dict:
    """One analyze --json under GNU time: wall seconds, peak resident MB, the steps it found."""
    fd, out_name = tempfile.mkstemp(suffix=".json")
    cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "app.cli", "analyze", str(trace), "--json"]
    start = time.perf_counter()
    with open(fd, "wb") as stdout:
        done = subprocess.run(
            cmd,
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**env, "STEPSCOPE_CACHE_DIR": str(cache)},
        )
    wall = time.perf_counter() - start
    peak = _PEAK.search(done.stderr)
    result = {"rc": done.returncode, "wall_s": round(wall, 2), "peak_mb": int(peak.group(1)) // 1024 if peak else None}
    if done.returncode == 0:
        report = json.loads(Path(out_name).read_text())
        summary = report["summary"]
        result.update(events=report["events"], steps=len(report["steps"]), prefill=summary["prefill_steps"])
        result.update(decode=summary["decode_steps"], mixed=summary.get("mixed_steps"))
    else:
        result["error"] = done.stderr.strip().splitlines()[:1]
    os.unlink(out_name)
    return result


def _browser(trace: Path) -> str:
    done = subprocess.run(
        [sys.executable, "bench/browser_open_bench.py", "--trace", str(trace), "--rounds", "1"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    lines = [line for line in done.stdout.splitlines() if "first timeline drawn" in line]
    return lines[0].strip() if lines else f"browser bench failed: {(done.stderr or done.stdout).strip()[-300:]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target-gb", type=float, default=6.0)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--trace", type=Path, default=None, help="a trace already built (not deleted)")
    parser.add_argument("--copies", type=int, default=None, help="with --trace: its copies, for the step truth")
    parser.add_argument("--browser", action="store_true")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args(argv)

    built = args.trace is None
    if built:
        copies = copies_for(int(args.target_gb * 1e9), SOURCE)
        need = int(args.target_gb * 1e9 * 1.4)
        free = shutil.disk_usage(args.dir).free
        if free < need:
            print(f"not run: {args.dir} has {free / 1e9:.1f} GB free, the trace and its cache need {need / 1e9:.1f}")
            return 1
        trace = args.dir / f"stepscope_big_{args.target_gb:g}gb.json"
        start = time.perf_counter()
        info = build(trace, copies)
        print(f"built {trace} in {time.perf_counter() - start:.0f} s: {json.dumps(info)}")
    else:
        trace, copies = args.trace, args.copies
    budget_mb = memory_budget_bytes() >> 20
    cache = Path(tempfile.mkdtemp(prefix="stepscope-big-cache-", dir=args.dir))
    env = dict(os.environ)
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "?"
    print(f"trace {trace.stat().st_size / 1e9:.2f} GB, memory budget {budget_mb:,} MB, load average {load}")
    try:
        runs = {"cold": _timed_cli(trace, cache, env)}
        runs["warm"] = _timed_cli(trace, cache, env)
        shutil.rmtree(cache / "results", ignore_errors=True)
        runs["warm entry, analysis again"] = _timed_cli(trace, cache, env)
        for name, run in runs.items():
            within = "within" if run["peak_mb"] is not None and run["peak_mb"] <= budget_mb else "OVER"
            print(f"{name:28s} {json.dumps(run)}  peak {within} the {budget_mb:,} MB budget")
        if copies is not None and runs["cold"]["rc"] == 0:
            expected = copies * _SOURCE_STEPS
            found = runs["cold"]["steps"]
            verdict = "ok" if found == expected else "WRONG"
            print(f"steps found {found:,}, expected {expected:,} (copies x the source's steps): {verdict}")
        if args.browser:
            print(_browser(trace))
    finally:
        if not args.keep:
            shutil.rmtree(cache, ignore_errors=True)
            if built:
                trace.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
