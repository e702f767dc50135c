"""Benchmark (issue 30): how fast the HTML report opens in a real browser, offline.

    python bench/report_open_bench.py [--trace TRACE] [--vs OTHER] [--rounds 3]

Builds the report with the command line (`python -m app.cli report TRACE [--vs OTHER] -o FILE`, the CPU sample by
default), then opens FILE in headless Chromium (/usr/bin/chromium, --no-sandbox --disable-gpu) `--rounds` times,
each in a fresh page, and prints the medians of:

- first paint: the browser's first-contentful-paint (when the page's text and cards are on screen);
- load: the page's load event (every inline script has run; plotly.js, packed, is unpacked after it);
- figures drawn: every `.plotly-graph-div` holds its drawn `.main-svg`.

The figures depend on the machine's load: it is printed, as the other benches do.
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
SAMPLE = ROOT / "sample_traces" / "cpu_tiny-llama_eager" / "trace.json.gz"
ALL_DRAWN = "[...document.querySelectorAll('.plotly-graph-div')].every(d => d.querySelector('.main-svg'))"


def _open_once(browser, path: Path) -> tuple[float, float, float]:
    page = browser.new_page(viewport={"width": 1500, "height": 900})
    start = time.perf_counter()
    page.goto(path.as_uri(), wait_until="load")
    load = time.perf_counter() - start
    page.wait_for_function(ALL_DRAWN, timeout=60_000)
    drawn = time.perf_counter() - start
    paint = page.evaluate("(performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime")
    page.close()
    return (paint or float("nan")) / 1000, load, drawn


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=SAMPLE)
    parser.add_argument("--vs", type=Path, default=None)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="stepscope-report-bench-") as tmp:
        report = Path(tmp) / "report.html"
        command = [sys.executable, "-m", "app.cli", "report", str(args.trace), "-o", str(report)]
        if args.vs is not None:
            command += ["--vs", str(args.vs)]
        subprocess.run(command, cwd=ROOT, check=True, capture_output=True)
        before = os.getloadavg()[0]
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"]
            )
            rounds = [_open_once(browser, report) for _ in range(args.rounds)]
            browser.close()
        for i, (paint, load, drawn) in enumerate(rounds, 1):
            print(f"round {i}: first paint {paint:.2f} s, load {load:.2f} s, figures drawn {drawn:.2f} s")
        paint, load, drawn = (statistics.median(column) for column in zip(*rounds, strict=True))
        size = report.stat().st_size / 1e6
        print(f"report of {args.trace.name} ({size:.1f} MB), median of {args.rounds}:")
        print(f"  first paint    {paint:.2f} s")
        print(f"  load           {load:.2f} s")
        print(f"  figures drawn  {drawn:.2f} s")
        print(f"load average before {before:.1f} / after {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
