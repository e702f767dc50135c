"""Draw time of the requests view's lanes (issue 41) for a SYNTHETIC served run of many requests: the figure built in
Python (exporters/figures/request_lanes.py), its size, and Plotly drawing it in headless Chromium (/usr/bin/chromium
through Playwright, --no-sandbox --disable-gpu), packed (every request, as few lanes as they fit in) and one page of
requests one a lane. Prints figures; asserts nothing (tests check behaviour, not timings).

    python bench/request_lanes_bench.py [--requests 1000] [--rounds 3]

The synthetic run is made here by code (synthetic_served_run): steps of 5 ms, requests arriving every 3-7 ms with a
prompt of one to four chunks and 20 to 80 tokens to decode, at most 64 in the batch.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stepscope.exporters.figures.request_lanes import PAGE, request_lanes_figure  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
STEP_NS = 5_000_000


def synthetic_served_run(requests: int, seed: int = 0):
    """A SYNTHETIC served run: (an object with the analysis's `steps` and `time_origin_ns`, the request table)."""
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.integers(3_000_000, 7_000_000, requests))  # ~200 a second: the batch keeps up
    chunks, decode = rng.integers(1, 5, requests), rng.integers(20, 81, requests)
    running: list[int] = []
    t, step, nxt = 0, 0, 0
    first = np.full(requests, -1)
    first_token = np.full(requests, -1)
    last = np.full(requests, -1)
    steps_of: list[list[int]] = [[] for _ in range(requests)]
    left = (chunks + decode).astype(int)
    while nxt < requests or running:
        while nxt < requests and arrival[nxt] <= t and len(running) < 64:
            running.append(nxt)
            first[nxt] = step
            nxt += 1
        for r in running:
            steps_of[r].append(step)
            left[r] -= 1
            if first_token[r] < 0 and left[r] <= decode[r]:
                first_token[r] = step
            if left[r] == 0:
                last[r] = step
        running = [r for r in running if left[r] > 0]
        t += STEP_NS
        step += 1
    starts = np.arange(step, dtype=np.int64) * STEP_NS
    steps = pd.DataFrame(
        {"kind": np.where(np.arange(step) % 3 == 0, "mixed", "decode"), "start_ns": starts, "end_ns": starts + STEP_NS}
    )
    steps["token_ns"] = steps["end_ns"]
    table = pd.DataFrame(
        {
            "request": np.arange(requests),
            "arrival_ns": arrival,
            "first_step": first,
            "first_token_step": first_token,
            "last_step": last,
            "steps": steps_of,
        }
    )
    return SimpleNamespace(steps=steps, time_origin_ns=0), table


def draw_ms(page, figure_json: str) -> float:
    """Plotly.newPlot of the figure in a fresh div, until the browser has painted it (two animation frames)."""
    return page.evaluate(
        """async (fig) => {
            const div = document.createElement('div'); document.body.innerHTML = ''; document.body.appendChild(div);
            const f = JSON.parse(fig); const t0 = performance.now();
            await Plotly.newPlot(div, f.data, f.layout);
            await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
            return performance.now() - t0; }""",
        figure_json,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    analysis, table = synthetic_served_run(args.requests)
    print(f"load: {os.getloadavg()[0]:.1f} (1 min), {len(analysis.steps):,} steps, {len(table):,} requests (SYNTHETIC)")
    layouts = {"packed, every request": (table, True), f"one page ({PAGE}) one a lane": (table.iloc[:PAGE], False)}
    built = {}
    for name, (rows, packed) in layouts.items():
        times = []
        for _ in range(args.rounds):
            start = time.perf_counter()
            figure = request_lanes_figure(analysis, rows, packed=packed)
            text = figure.to_json()
            times.append(time.perf_counter() - start)
        built[name] = text
        lanes = int(-figure.layout.yaxis.range[0] + 0.4)  # the lanes drawn, the steps lane included
        print(
            f"{name}: built in Python {statistics.median(times) * 1e3:.0f} ms (median of {args.rounds}), "
            f"{len(text) / 1e6:.2f} MB of figure JSON, {lanes} lanes"
        )
    import plotly
    from playwright.sync_api import sync_playwright

    plotly_js = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_text()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"], headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.set_content("<html><body></body></html>")
        page.add_script_tag(content=plotly_js)
        for _ in range(args.rounds):  # interleaved rounds: both layouts see the same load
            for name, text in built.items():
                built_ms = draw_ms(page, text)
                print(f"  draw in Chromium, {name}: {built_ms:.0f} ms")
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
