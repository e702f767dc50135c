"""Benchmark (issue 17): the browser's time to the first timeline for a big trace opened from --logdir, cold.

What it does, per round:
1. a log directory holding only the trace (a hard link, or a copy across file systems), an EMPTY
   STEPSCOPE_CACHE_DIR, no samples and no past runs (so the page has no timeline before the click);
2. `streamlit run app/streamlit_app.py -- --logdir DIR` with STEPSCOPE_TIMING_LOG set (the app then
   logs when its parse, analysis and overview-figure stages start and end: app/stage_timing.py);
3. headless Chromium (/usr/bin/chromium through Playwright) opens the page, waits for the logdir
   picker, clicks Open, and waits until the overview timeline is drawn: a .js-plotly-plot whose
   'plotly_afterplot' has fired (or that holds its WebGL canvas), plus one animation frame.

It prints, median over the rounds, click -> first timeline drawn, and its breakdown, all from the same
run: hash (the file's content hash, through the cache's stat index), parse, analysis, figure build
(built and serialised), from the app's timing log; other server time (the click's rerun reaching the
page, the page pieces above the timeline, Streamlit's caches); transfer (figure sent -> the chart
element exists in the page: websocket and React); render (chart element -> drawn). The overview
figure's JSON size is printed too (it is bounded: app/figures/timeline.py budgets).

    python bench/browser_open_bench.py [--trace /tmp/big_gpu.json] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run", "--disable-sync"]
TIMEOUT_MS = 600_000
GOAL_S = 5.0

# Runs in the page before the click: notes when the first plot element appears and when Plotly has drawn it.
_WATCH = """
() => {
  window.__bench = {dom: null, drawn: null};
  const hook = (gd) => {
    if (window.__bench.dom === null) window.__bench.dom = performance.now();
    const done = () => requestAnimationFrame(() => {
      if (window.__bench.drawn === null) window.__bench.drawn = performance.now();
    });
    if (gd.on) { gd.on('plotly_afterplot', done); }
    const poll = () => {
      if (window.__bench.drawn !== null) return;
      if (gd.querySelector('.main-svg') && (gd.querySelector('canvas') || gd.querySelector('.scatterlayer .trace')))
        done(); else setTimeout(poll, 10);
    };
    poll();
  };
  new MutationObserver(() => {
    const gd = document.querySelector('.js-plotly-plot');
    if (gd && window.__bench.dom === null) hook(gd);
  }).observe(document.body, {childList: true, subtree: true});
}
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _place(trace: Path, folder: Path) -> Path:
    target = folder / trace.name
    try:
        os.link(trace, target)
    except OSError:
        shutil.copyfile(trace, target)
    return target


def _start_server(logdir: Path, env: dict) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app/streamlit_app.py", "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
         "--", "--logdir", str(logdir)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return server, url
        except OSError:
            time.sleep(0.3)
    server.kill()
    raise RuntimeError("streamlit did not start")


def one_round(browser, trace: Path) -> dict:
    work = Path(tempfile.mkdtemp(prefix="stepscope-browser-bench-"))
    try:
        logdir, cache, empty = work / "logs", work / "cache", work / "empty"
        for folder in (logdir, cache, empty):
            folder.mkdir()
        _place(trace, logdir)
        timing_log = work / "timing.jsonl"
        env = dict(os.environ, STEPSCOPE_CACHE_DIR=str(cache), STEPSCOPE_SAMPLES_DIR=str(empty),
                   STEPSCOPE_RUNS_DIR=str(empty), STEPSCOPE_TIMING_LOG=str(timing_log))
        server, url = _start_server(logdir, env)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1800})
            page.goto(url, timeout=TIMEOUT_MS)
            open_button = page.get_by_role("button", name="Open from disk", exact=True)
            open_button.wait_for(timeout=TIMEOUT_MS)
            page.evaluate(_WATCH)
            clicked_wall = time.time()
            clicked = page.evaluate("performance.now()")
            open_button.click()
            page.wait_for_function("window.__bench.drawn !== null", timeout=TIMEOUT_MS, polling=20)
            marks = page.evaluate("window.__bench")
            page.close()
        finally:
            server.terminate()
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()
        stages = {}
        for line in timing_log.read_text().splitlines() if timing_log.exists() else []:
            rec = json.loads(line)
            if rec["start"] >= clicked_wall - 0.5:
                stages.setdefault(rec["stage"], rec)
        total = (marks["drawn"] - clicked) / 1000
        to_dom = (marks["dom"] - clicked) / 1000

        def took(name: str) -> float:
            return stages[name]["end"] - stages[name]["start"] if name in stages else float("nan")

        figure_done = stages["figure"]["end"] - clicked_wall if "figure" in stages else float("nan")
        measured = sum(took(k) for k in ("digest", "parse", "analysis", "figure") if k in stages)
        return {
            "total_s": round(total, 3),
            "hash_s": round(took("digest"), 3),
            "parse_s": round(took("parse"), 3),
            "analysis_s": round(took("analysis"), 3),
            "figure_s": round(took("figure"), 3),
            "other_server_s": round(figure_done - measured, 3),  # rerun start, page pieces, Streamlit's caches
            "transfer_s": round(to_dom - figure_done, 3),  # figure sent -> chart element in the page
            "render_s": round(total - to_dom, 3),
            "page_done_s": round(stages["below the timeline"]["end"] - clicked_wall, 3)
            if "below the timeline" in stages else None,  # the script's end: the rest of the page, after the click
            "cache_entries": sorted(p.parent.name for p in cache.rglob("*") if p.is_file()),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def figure_json_mb(trace: Path) -> float:
    """Size of the overview figure's JSON for this trace (what the page sends), from an in-process build."""
    sys.path.insert(0, str(ROOT))
    from stepscope.analysis import analyze
    from stepscope.app.figures.timeline import overview_figure
    from stepscope.parsers import load_trace

    figure, _ = overview_figure(analyze(load_trace(trace)))
    return round(len(figure.to_json()) / 1e6, 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", default="/tmp/big_gpu.json")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    trace = Path(args.trace).resolve()
    if not trace.exists():
        print(f"error: {trace} not found (make it with ../shared/bench/tile_trace.py)", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    load_before = os.getloadavg()[0]
    rounds = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            for i in range(args.rounds):
                result = one_round(browser, trace)
                rounds.append(result)
                print(f"round {i + 1}: " + ", ".join(f"{k} {v}" for k, v in result.items() if k != "cache_entries")
                      + f" (cache afterwards: {', '.join(sorted(set(result['cache_entries'])))})", flush=True)
        finally:
            browser.close()
    keys = ("total_s", "hash_s", "parse_s", "analysis_s", "figure_s", "other_server_s", "transfer_s", "render_s")
    median = {k: round(statistics.median(r[k] for r in rounds), 2) for k in keys}
    size_mb = figure_json_mb(trace)
    print()
    print(f"trace {trace.name}: {trace.stat().st_size / 2**20:.0f} MB, cold cache, opened from --logdir, "
          f"median of {len(rounds)}")
    print(f"click -> first timeline drawn: {median['total_s']:.2f} s  (goal <= {GOAL_S:g} s: "
          f"{'MET' if median['total_s'] <= GOAL_S else 'NOT MET'})")
    for k in keys[1:]:
        print(f"  {k[:-2]:9s} {median[k]:6.2f} s")
    print(f"overview figure JSON: {size_mb} MB")
    print(f"load average before {load_before:.1f} / after {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    out = ROOT / "bench" / "out" / "browser_open_bench.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"trace": str(trace), "rounds": rounds, "median": median,
                               "figure_json_mb": size_mb}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
