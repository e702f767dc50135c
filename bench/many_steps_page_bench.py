"""Benchmark: how long the Analyze page takes to draw everything for a trace of many steps, in a real browser.

Why: the per-step charts drew a bar per step; at 8,500 steps the four charts were 77k SVG shapes and headless
Chromium spent 45 s drawing them after the server had finished (exporters/figures/step_charts.py,
LINES_ABOVE_STEPS). This bench opens one SYNTHETIC trace of --steps decode steps (tests/synthetic_traces.py,
generated here, never shipped) from --logdir with an empty cache and prints click -> the page's last line
(the Downloads' content hash) shown, median over the rounds, each on a fresh page of the same server.

    python bench/many_steps_page_bench.py [--steps 9000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.synthetic_traces import synthetic_generation, write  # noqa: E402
from tests.test_browser import CHROMIUM, CHROMIUM_ARGS, _streamlit  # noqa: E402
from tests.test_browser_sessions import _CAPTION, _pick_folder  # noqa: E402

TIMEOUT_MS = 180_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=9000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as work_dir:
        work = Path(work_dir)
        logs, empty = work / "logs", work / "empty"
        empty.mkdir()
        (logs / "synthetic").mkdir(parents=True)
        write(logs / "synthetic" / "trace.json", synthetic_generation(decode_steps=args.steps))
        times = []
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
            for _ in range(args.rounds):
                cache = Path(tempfile.mkdtemp(dir=work))  # an empty cache each round
                env = dict(os.environ, STEPSCOPE_SAMPLES_DIR=str(empty), STEPSCOPE_RUNS_DIR=str(empty))
                env["STEPSCOPE_CACHE_DIR"] = str(cache)
                with _streamlit(env, ("--logdir", str(logs))) as url:
                    page = browser.new_page(viewport={"width": 1500, "height": 2200})
                    page.goto(url, timeout=TIMEOUT_MS)
                    page.get_by_role("button", name="Open from disk", exact=True).wait_for(timeout=TIMEOUT_MS)
                    _pick_folder(page, "synthetic")
                    start = time.perf_counter()
                    page.get_by_role("button", name="Open from disk", exact=True).click()
                    page.wait_for_function(_CAPTION, timeout=TIMEOUT_MS)
                    times.append(time.perf_counter() - start)
                    print(f"round {len(times)}: click -> whole page drawn {times[-1]:.1f} s", flush=True)
                    page.close()
            browser.close()
    median = statistics.median(times)
    print(f"{args.steps} decode steps, median of {len(times)}: click -> whole page drawn {median:.1f} s")


if __name__ == "__main__":
    main()
