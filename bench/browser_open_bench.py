"""Benchmark (issue 17): the browser's time to the first timeline for a big trace opened from --logdir, cold.

What it does, per round:
1. a log directory holding only the trace (a hard link, or a copy across file systems), an EMPTY
   STEPSCOPE_CACHE_DIR, no samples and no past runs (so the page has no timeline before the click);
2. `streamlit run app/streamlit_app.py -- --logdir DIR` with STEPSCOPE_TIMING_LOG set (the app then
   logs when its script starts and when its digest, parse, analysis and overview-figure stages start and end:
   app/stage_timing.py);
3. headless Chromium (/usr/bin/chromium through Playwright) opens the page and waits until the landing page is
   drawn as a user sees it before clicking: the logdir picker's Open button, and the empty timeline frame Analyze
   shows before a trace is open (a Plotly chart, so the browser has loaded Streamlit's Plotly code by then; the
   time from navigation to that is printed as "landing"). It clicks Open and waits until the TRACE's overview
   timeline is drawn: the .js-plotly-plot inside the element keyed "overview_timeline" (Streamlit gives it the
   class st-key-overview_timeline; the landing frame is keyed "empty_timeline" and never counts) whose
   'plotly_afterplot' has fired (or that holds its drawn traces), plus two animation frames: the second runs after
   the frame showing the chart has been committed (the first alone misses the rasterising of a WebGL canvas, which
   without a GPU happens in that commit and took seconds).

It prints, median over the rounds, click -> first timeline drawn, and its breakdown, all from the same run:
  rerun     click -> the Analyze script starts again (the button's fragment run, its st.rerun, the new run);
  digest    the stat-index lookups only. A file never seen before is not hashed on its own: its hash is taken
            from the bytes the parse reads, so that time is inside "parse";
  parse     read + hash + parse + the on-disk cache entry written (trace_cache.open_trace_cached);
  analysis, figure (the overview built, serialised and queued for the browser) from the app's timing log;
  other_server  the rest of the server's time up to the figure: page pieces above the timeline, Streamlit's caches;
  transfer  figure queued -> the websocket message carrying it reaches the page (seen by a WebSocket wrapper
            installed before the page's scripts, which looks for the overview's title in large messages; it can come
            out a little below zero: the message may leave before the figure stage's end is logged);
  render    that message -> the chart drawn (Streamlit's React, Plotly; the overview is SVG, the kernel detail WebGL).
browser_cpu is the CPU time every Chromium process on this machine used from the click to the chart drawn (from
/proc: run no other browser meanwhile): while the trace is read, it is taken from the two decoding processes.
page_done is when the page script ends (everything below the timeline, drawn after it). The overview figure's
JSON size is printed too (it is bounded: exporters/figures/timeline.py budgets).

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

try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
except ImportError:  # main() says so when it needs it
    PlaywrightTimeout = TimeoutError

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
TIMEOUT_MS = 600_000
LANDING_WAIT_MS = 60_000
PAGE_DONE_WAIT_S = 60.0
GOAL_S = 5.0

OVERVIEW_KEY = "overview_timeline"  # views/analyze.py: st.plotly_chart(..., key=...) of the trace's overview
LANDING_KEY = "empty_timeline"  # views/analyze.py: the frame shown before any trace is open
OVERVIEW_MARKER = "Whole run: steps, idle gaps and busy time"  # exporters/figures/timeline.py OVERVIEW_TITLE

# Installed before the page's own scripts: notes when the websocket message carrying the overview figure arrives.
_WS_WATCH = """
(() => {
  window.__benchMsg = null;
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      this.addEventListener('message', (event) => {
        const data = event.data;
        if (window.__benchMsg !== null || !(data instanceof ArrayBuffer) || data.byteLength < 100000) return;
        if (new TextDecoder().decode(data).includes(MARKER)) window.__benchMsg = performance.now();
      });
    }
  };
})();
""".replace("MARKER", json.dumps(OVERVIEW_MARKER))

# Runs in the page before the click: notes when the overview's plot element appears and when Plotly has drawn it.
_WATCH = """
(selector) => {
  window.__bench = {dom: null, drawn: null};
  const hook = (gd) => {
    if (window.__bench.dom === null) window.__bench.dom = performance.now();
    // two frames: the callback of the first runs before that frame is committed (without a GPU, a WebGL canvas is
    // rasterised and read back during the commit, which took seconds); the second runs once it has been.
    const done = () => requestAnimationFrame(() => requestAnimationFrame(() => {
      if (window.__bench.drawn === null) window.__bench.drawn = performance.now();
    }));
    if (gd.on) { gd.on('plotly_afterplot', done); }
    const poll = () => {
      if (window.__bench.drawn !== null) return;
      if (gd.querySelector('.main-svg') && (gd.querySelector('canvas') || gd.querySelector('.scatterlayer .trace')))
        done(); else setTimeout(poll, 10);
    };
    poll();
  };
  new MutationObserver(() => {
    const gd = document.querySelector(selector);
    if (gd && window.__bench.dom === null) hook(gd);
  }).observe(document.body, {childList: true, subtree: true});
}
"""


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _browser_cpu_s() -> float:
    """User + system CPU seconds of every Chromium process now running (utime and stime of /proc/PID/stat)."""
    ticks = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as comm:
                if not comm.read().startswith(("chrom", "headless")):
                    continue
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


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
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            "app/streamlit_app.py",
            "--server.headless",
            "true",
            "--server.port",
            str(port),
            "--server.address",
            "127.0.0.1",
            "--browser.gatherUsageStats",
            "false",
            "--",
            "--logdir",
            str(logdir),
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
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
        env = dict(
            os.environ,
            STEPSCOPE_CACHE_DIR=str(cache),
            STEPSCOPE_SAMPLES_DIR=str(empty),
            STEPSCOPE_RUNS_DIR=str(empty),
            STEPSCOPE_TIMING_LOG=str(timing_log),
        )
        server, url = _start_server(logdir, env)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1800})
            page.add_init_script(_WS_WATCH)
            page.goto(url, timeout=TIMEOUT_MS)
            open_button = page.get_by_role("button", name="Open from disk", exact=True)
            open_button.wait_for(timeout=TIMEOUT_MS)
            landing = None  # navigation -> the landing page's timeline frame drawn (None: the app shows none)
            try:
                page.wait_for_selector(f".st-key-{LANDING_KEY} .js-plotly-plot .main-svg", timeout=LANDING_WAIT_MS)
                landing = page.evaluate("performance.now()") / 1000
            except PlaywrightTimeout:
                pass
            page.evaluate(_WATCH, f".st-key-{OVERVIEW_KEY} .js-plotly-plot")
            clicked_wall = time.time()
            clicked = page.evaluate("performance.now()")
            browser_cpu = _browser_cpu_s()
            open_button.click()
            page.wait_for_function("window.__bench.drawn !== null", timeout=TIMEOUT_MS, polling=20)
            browser_cpu = _browser_cpu_s() - browser_cpu
            marks = page.evaluate("window.__bench")
            arrived = page.evaluate("window.__benchMsg")
            plotly_code = page.evaluate(  # when Streamlit's Plotly chunk finished loading, ms from navigation
                "performance.getEntriesByType('resource').filter(e => /PlotlyChart[.].*js$/.test(e.name))"
                ".map(e => e.responseEnd)"
            )
            deadline = time.monotonic() + PAGE_DONE_WAIT_S  # the page script's end, for page_done (not the total)
            while time.monotonic() < deadline and '"below the timeline"' not in _read(timing_log):
                time.sleep(0.05)
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
            if rec["start"] >= clicked_wall:  # the same clock: only what the click caused
                stages.setdefault(rec["stage"], rec)
        total = (marks["drawn"] - clicked) / 1000

        def took(name: str) -> float:
            return stages[name]["end"] - stages[name]["start"] if name in stages else float("nan")

        def since_click(name: str, end: str = "end") -> float:
            return stages[name][end] - clicked_wall if name in stages else float("nan")

        figure_done = since_click("figure")
        measured = sum(took(k) for k in ("digest", "parse", "analysis", "figure") if k in stages)
        rerun = since_click("analyze script start", "start")
        to_message = (arrived - clicked) / 1000 if arrived is not None else float("nan")
        return {
            "total_s": round(total, 3),
            "rerun_s": round(rerun, 3),
            "digest_s": round(took("digest"), 3),
            "parse_s": round(took("parse"), 3),
            "analysis_s": round(took("analysis"), 3),
            "figure_s": round(took("figure"), 3),
            "other_server_s": round(figure_done - rerun - measured, 3),  # page pieces, Streamlit's caches
            "transfer_s": round(to_message - figure_done, 3),  # figure queued -> its message in the page
            "render_s": round(total - to_message, 3),  # message -> drawn: React, Plotly, WebGL
            "browser_cpu_s": round(browser_cpu, 3),  # click -> drawn, every Chromium process
            "page_done_s": round(since_click("below the timeline"), 3)
            if "below the timeline" in stages
            else None,  # the script's end: the rest of the page, after the click
            "landing_s": round(landing, 3) if landing is not None else None,
            "plotly_code_before_click": bool(plotly_code) and max(plotly_code) < clicked,
            "cache_entries": sorted(p.parent.name for p in cache.rglob("*") if p.is_file()),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def figure_json_mb(trace: Path) -> float:
    """Size of the overview figure's JSON for this trace (what the page sends), from an in-process build."""
    sys.path.insert(0, str(ROOT))
    from stepscope.analysis import analyze
    from stepscope.exporters.figures.timeline import overview_figure
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
                print(
                    f"round {i + 1}: "
                    + ", ".join(f"{k} {v}" for k, v in result.items() if k != "cache_entries")
                    + f" (cache afterwards: {', '.join(sorted(set(result['cache_entries'])))})",
                    flush=True,
                )
        finally:
            browser.close()
    keys = (
        "total_s",
        "rerun_s",
        "digest_s",
        "parse_s",
        "analysis_s",
        "figure_s",
        "other_server_s",
        "transfer_s",
        "render_s",
        "browser_cpu_s",
        "page_done_s",
    )
    median = {
        k: round(statistics.median(r[k] for r in rounds if r[k] is not None), 2)
        for k in keys
        if any(r[k] is not None for r in rounds)
    }
    size_mb = figure_json_mb(trace)
    print()
    print(
        f"trace {trace.name}: {trace.stat().st_size / 2**20:.0f} MB, cold cache, opened from --logdir, "
        f"median of {len(rounds)}"
    )
    print(
        f"click -> first timeline drawn: {median['total_s']:.2f} s  (goal <= {GOAL_S:g} s: "
        f"{'MET' if median['total_s'] <= GOAL_S else 'NOT MET'})"
    )
    notes = {
        "digest_s": "(stat index only; a new file's hash is taken inside parse, while its pieces decode)",
        "page_done_s": "(the page script's end: everything below the timeline)",
        "browser_cpu_s": "(CPU of every Chromium process, click -> drawn: taken from the decoding meanwhile)",
    }
    for k in keys[1:]:
        if k in median:
            print(f"  {k[:-2]:12s} {median[k]:6.2f} s  {notes.get(k, '')}")
    landings = [r["landing_s"] for r in rounds if r["landing_s"] is not None]
    print(
        "landing page drawn (navigation -> timeline frame, before the click): "
        + (f"{statistics.median(landings):.2f} s" if landings else "no frame on this version of the app")
        + f"; Plotly's code loaded before the click in {sum(r['plotly_code_before_click'] for r in rounds)}"
        f" of {len(rounds)} rounds"
    )
    print(f"overview figure JSON: {size_mb} MB")
    print(f"load average before {load_before:.1f} / after {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    out = ROOT / "bench" / "out" / "browser_open_bench.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps({"trace": str(trace), "rounds": rounds, "median": median, "figure_json_mb": size_mb}, indent=1)
        + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
