"""Benchmark (issue 39): how fast the app answers a new session while another session's profiled generation runs.

The app serves the shipped samples (`streamlit run app/streamlit_app.py`, STEPSCOPE_TIMING_LOG set); headless
Chromium opens Analyze in a new browser context (a new user: nothing cached) --rounds times with no run going, then
starts a generation on the Run page (New tokens 1024, batch 4: tens of seconds on this CPU) and opens Analyze
--rounds times more while it runs. For each open it prints, in seconds from the navigation:

  request   the page's first message on its websocket (Streamlit's frontend loaded and asking for the script);
  server    that message -> the last message of the script's answer reaching the page: the server's answer (its
            script start and end, from the app's timing log, are inside this);
  title     the page's title in its DOM, the script's first element (a MutationObserver installed before the page's
            scripts): the first sign of the server's answer on the page;
  cards     the summary cards in the page's DOM;
  figures   the first Plotly chart in the page's DOM.

Request and the time from server to cards are the browser's: loading and evaluating Streamlit's frontend modules
(the Plotly chart module alone is about 4.7 MB) on this machine's two cores. The run's child process works at nice
10 (collectors/child.py); the server answers from its own threads.

    python bench/second_session_bench.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEEN = """window.__seen = {};
const wanted = {title: 'h1', cards: "[data-testid='stMetric']", figures: '.js-plotly-plot'};
new MutationObserver(() => { for (const [k, s] of Object.entries(wanted))
  if (!(k in window.__seen) && document.querySelector(s)) window.__seen[k] = performance.now() / 1000; })
  .observe(document, {subtree: true, childList: true});"""
DONE = "[data-testid='stApp'][data-test-script-state='notRunning']"
TIMEOUT_MS = 180_000


def _serve(env: dict) -> tuple[subprocess.Popen, str]:
    sys.path.insert(0, str(ROOT))
    from bench.browser_open_bench import _free_port

    port = _free_port()
    args = [sys.executable, "-m", "streamlit", "run", "app/streamlit_app.py", "--server.port", str(port)]
    server = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(240):
        try:
            urllib.request.urlopen(f"{url}/_stcore/health", timeout=2)
            return server, url
        except OSError:
            time.sleep(0.5)
    server.kill()
    raise SystemExit("error: the app did not start in 120 s")


def open_once(browser, url: str) -> dict[str, float]:
    """One new session's Analyze page, timed (seconds from its navigation)."""
    sent: list[float] = []
    received: list[float] = []
    page = browser.new_page(viewport={"width": 1500, "height": 2200})
    page.add_init_script(SEEN)
    start = time.monotonic()

    def watch(ws) -> None:
        ws.on("framesent", lambda _: sent.append(time.monotonic() - start))
        ws.on("framereceived", lambda _: received.append(time.monotonic() - start))

    page.on("websocket", watch)
    page.goto(url, timeout=TIMEOUT_MS)
    page.wait_for_selector("[data-testid='stMetric']", timeout=TIMEOUT_MS)
    page.wait_for_selector(".js-plotly-plot", timeout=TIMEOUT_MS)
    page.wait_for_selector(DONE, timeout=TIMEOUT_MS)
    done = time.monotonic() - start
    seen = page.evaluate("window.__seen")
    page.close()
    answered = max(t for t in received if t <= done)
    return {"request": sent[0], "server": answered - sent[0], **{k: seen[k] for k in ("title", "cards", "figures")}}


def _show(label: str, rows: list[dict]) -> None:
    for row in rows:
        print(f"  {label:<8}" + "".join(f" {k} {v:5.2f}" for k, v in row.items()))
    medians = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    print(f"  {label + ' median':<8}" + "".join(f" {k} {v:5.2f}" for k, v in medians.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix="stepscope-second-session-"))
    for folder in (ROOT / "sample_traces").iterdir():
        if folder.is_dir():
            shutil.copytree(folder, work / "samples" / folder.name)
    env = dict(os.environ, STEPSCOPE_SAMPLES_DIR=str(work / "samples"), STEPSCOPE_RUNS_DIR=str(work / "runs"))
    env["STEPSCOPE_CACHE_DIR"] = str(work / "cache")
    server, url = _serve(env)
    print(f"load before: {os.getloadavg()[0]:.2f}")
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
            open_once(browser, url)  # the sample's answer into the server's cache, as for any later session
            _show("idle", [open_once(browser, url) for _ in range(args.rounds)])
            runner = browser.new_page()
            runner.goto(f"{url}/run", timeout=TIMEOUT_MS)
            runner.get_by_label("New tokens").fill("1024")
            runner.get_by_label("Batch").fill("4")
            runner.get_by_role("button", name="Run", exact=True).click()
            stop = runner.locator(".st-key-run_stop").get_by_role("button", name="Stop")
            stop.wait_for(timeout=TIMEOUT_MS)
            busy = [open_once(browser, url) for _ in range(args.rounds)]
            running = "Running 1 profiled generation" in runner.inner_text("body")
            _show("busy", busy)
            print(f"the generation still running after the last open: {running}; load after: {os.getloadavg()[0]:.2f}")
            stop.click()
            browser.close()
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:  # Streamlit does not always end on SIGTERM
            server.kill()
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"note": "seconds from each open's navigation; server = first request -> last answer message"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
