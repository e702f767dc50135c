"""Benchmark (issue 42): the time from an action on the Analyze page's timeline tools to its answer on the page.

What it does: a log directory holding only the trace, `streamlit run app/streamlit_app.py -- --logdir DIR` with
STEPSCOPE_TIMING_LOG set (the app logs when its timeline fragment starts, has built its figure and ends:
app/timeline_detail.py), headless Chromium (/usr/bin/chromium through Playwright) opens the trace from disk and
waits for the kernel detail. Then, each action several times (`--rounds`):

- find: type a name into Find and press Enter; "answer" is when the count line ("N matches in M steps") shows the
  count the API gives for the same query (`stepscope.load(path).find(text)`, read in this process: a mismatch is
  an error), "drawn" when the kernel detail has been drawn again (with the matches in its range marked);
- select (drag): Select mode on, a drag across the middle third of the detail; "answer" is when the Selection
  panel shows the dragged range;
- select (typed): a start and an end typed, Select range clicked; "answer" is when the panel shows that range;
- select (step): one step picked, Select steps clicked (traces with steps); "answer" when the panel shows it.

"server" is the fragments' run on the server (their first timing mark after the action to their last; a typed
range or a step pick reruns the panel's fragment alone), "figure" the detail figure's part of it (kept figures are
not built again). The page is polled every 20 ms. It prints each action's median over the rounds,
the machine's load (`uptime`) before and after: on a machine other work shares, read the load with the figures.

    python bench/timeline_tools_bench.py --trace bench/out/big_gpu.json [--rounds 3] [--queries gemm Memcpy]
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
from pathlib import Path

from browser_open_bench import CHROMIUM, CHROMIUM_ARGS, _browser_cpu_s, _place, _start_server

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_MS = 600_000
POLL_MS = 20
DETAIL = ".st-key-detail_timeline .js-plotly-plot"
GOAL_S = 1.0  # "they should feel immediate: a second or so on this machine"
BIG_GOAL_S = 3.0  # the 1.27 GB trace: a find and a selection answer within 3 s

# True (and notes the time once) when the element matching `sel` holds `text` and, with `changed`, no longer holds
# what it held before the action.
_ANSWERED = """
({sel, text, before}) => {
  const el = document.querySelector(sel);
  const now = el ? el.textContent : '';
  if (!now.includes(text) || (before !== null && now === before)) return false;
  if (window.__answer === null) window.__answer = performance.now();
  return true;
}
"""
# True (and notes the time two animation frames later) once the detail has been drawn again: a find changes the figure,
# which Streamlit draws in a new chart element or plots again in the same one (window.__gd0, from before the action).
_DRAWN = """
({sel}) => {
  if (window.__drawn !== null) return true;
  const gd = document.querySelector(sel);
  const fresh = gd && gd !== window.__gd0 && gd._fullData && gd.querySelector('.main-svg');
  if (!fresh && !(gd === window.__gd0 && window.__plotted)) return false;
  if (!window.__drawnAsked) {
    window.__drawnAsked = true;
    requestAnimationFrame(() => requestAnimationFrame(() => { window.__drawn = performance.now(); }));
  }
  return false;
}
"""


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def _server_split(timing_log: Path, since: float) -> tuple[float, float]:
    """(the server's run of the fragments, the detail figure's part of it) in s: from the first timing mark of the
    timeline fragments after `since` (time.time()) to their last."""
    starts, ends, figure = [], [], float("nan")
    for line in timing_log.read_text().splitlines() if timing_log.exists() else []:
        rec = json.loads(line)
        if rec["start"] < since or not rec["stage"].startswith(("workbench", "selection panel")):
            continue
        (ends if rec["stage"].endswith("end") else starts).append(rec["start"])
        if rec["stage"] == "workbench figure built" and starts:
            figure = rec["start"] - min(starts)
    if not starts or not ends:
        return float("nan"), float("nan")
    return max(ends) - min(starts), figure


class Page:
    """The Analyze page with the trace open, and one timed action at a time."""

    def __init__(self, page, timing_log: Path):
        self.page = page
        self.timing_log = timing_log

    def _start(self) -> tuple[float, float, float]:
        self.page.evaluate(
            f"window.__answer = null; window.__drawn = null; window.__drawnAsked = false; window.__plotted = false;"
            f" const gd0 = window.__gd0 = document.querySelector('{DETAIL}');"
            " if (gd0 && gd0.on) gd0.on('plotly_afterplot', () => { window.__plotted = true; });"
        )
        return time.time(), self.page.evaluate("performance.now()"), _browser_cpu_s()

    def _answered(self, sel: str, text: str, before: str | None = None) -> None:
        self.page.wait_for_function(
            _ANSWERED, arg={"sel": sel, "text": text, "before": before}, timeout=TIMEOUT_MS, polling=POLL_MS
        )

    def _result(self, started, drawn: bool) -> dict:
        wall, clicked, cpu = started
        if drawn:
            self.page.wait_for_function("() => window.__drawn !== null", timeout=TIMEOUT_MS, polling=POLL_MS)
        times = self.page.evaluate("[window.__answer, window.__drawn]")
        time.sleep(0.3)  # the timing log's last line
        server, figure = _server_split(self.timing_log, wall)
        out = {"answer_s": round((times[0] - clicked) / 1000, 3), "server_s": round(server, 3)}
        out["figure_s"] = round(figure, 3)
        if drawn:
            out["drawn_s"] = round((times[1] - clicked) / 1000, 3)
        out["browser_cpu_s"] = round(_browser_cpu_s() - cpu, 3)
        return out

    def find(self, text: str, expected: int) -> dict:
        box = self.page.get_by_role("textbox", name="Find in event names")
        box.wait_for(timeout=TIMEOUT_MS)  # on a loaded machine the page may still be drawing
        box.fill(text)
        started = self._start()
        self.page.evaluate(_DRAWN_LOOP, {"sel": DETAIL})
        box.press("Enter")
        word = "match" if expected == 1 else "matches"
        self._answered("[class*='st-key-find_row_']", f"{expected:,} {word} in" if expected else "no match")
        return self._result(started, drawn=True)

    def drag_select(self, index: int) -> dict:
        self._settled()
        select = self.page.get_by_role("radio", name="Select", exact=True)  # the segmented control's option
        if select.get_attribute("aria-checked") != "true":
            select.click()
            self._settled()
        self.page.wait_for_selector(f"{DETAIL} .nsewdrag", state="visible", timeout=TIMEOUT_MS)  # drawn again
        drag = self.page.locator(f"{DETAIL} .nsewdrag").first.bounding_box()
        before = self._panel_text()
        x0 = drag["x"] + drag["width"] * (0.30 + 0.02 * index)
        x1 = drag["x"] + drag["width"] * (0.62 + 0.02 * index)
        y = drag["y"] + drag["height"] * 0.5
        self.page.mouse.move(x0, y)
        self.page.mouse.down()
        self.page.mouse.move(x1, y, steps=8)
        started = self._start()
        self.page.mouse.up()
        self._answered("[class*='st-key-selection_answer_']", "(dragged)", before)
        return self._result(started, drawn=False)

    def typed_range(self, lo_ms: float, hi_ms: float) -> dict:
        self._settled()
        self.page.get_by_label("start (ms)").fill(f"{lo_ms:.3f}")
        self.page.get_by_label("end (ms)").fill(f"{hi_ms:.3f}")
        started = self._start()
        self.page.get_by_role("button", name="Select range").click()
        self._answered("[class*='st-key-selection_answer_']", f"{lo_ms:,.3f} to {hi_ms:,.3f} ms")
        return self._result(started, drawn=False)

    def one_step(self, step: int, kind: str) -> dict:
        self._settled()
        self.page.get_by_label("step", exact=True).fill(str(step))
        self.page.keyboard.press("Tab")
        self._settled()
        started = self._start()
        self.page.get_by_role("button", name="Select steps").click()
        self._answered("[class*='st-key-selection_answer_']", f"step {step} ({kind})")
        return self._result(started, drawn=False)

    def _panel_text(self) -> str | None:
        panel = "document.querySelector(\"[class*='st-key-selection_answer_']\")"
        return self.page.evaluate(f"{panel}?.textContent ?? null")

    def _settled(self) -> None:
        self.page.wait_for_selector(
            "[data-testid='stApp'][data-test-script-state='notRunning']", timeout=TIMEOUT_MS, state="attached"
        )
        self.page.wait_for_timeout(500)


_DRAWN_LOOP = (
    "(arg) => {\n  const check = "
    + _DRAWN.strip()
    + f";\n  const tick = () => {{ if (!check(arg)) setTimeout(tick, {POLL_MS}); }};\n  tick();\n}}"
)


def _expected(trace: Path, queries: list[str]) -> tuple[dict, list, float]:
    """The API's answers: each query's match count, the steps (row, kind) and the run's span in ms; prints how long
    the API's find and window take on this trace (in this process, the trace mapped from the cache)."""
    sys.path.insert(0, str(ROOT))
    import stepscope

    opened = stepscope.load(trace)
    opened.window(0, 1)  # the work index, built once per trace
    counts, took = {}, []
    for q in queries:
        start = time.perf_counter()
        counts[q] = len(opened.find(q))
        took.append(f"find {q!r} {time.perf_counter() - start:.3f} s")
    steps = [(i, str(k)) for i, k in enumerate(opened.steps["kind"])]
    ts = opened.timeline.events["ts"].to_numpy()
    span_ms = float((ts[-1] - opened.analysis.time_origin_ns) / 1e6)
    for lo, hi in ((0.0, span_ms / 100), (0.0, span_ms)):
        start = time.perf_counter()
        opened.window(lo, hi)
        took.append(f"window 0-{hi:,.0f} ms {time.perf_counter() - start:.3f} s")
    if steps:
        start = time.perf_counter()
        opened.window(steps=range(len(steps)))
        took.append(f"window of all {len(steps):,} steps {time.perf_counter() - start:.3f} s")
    print(f"API, {len(opened.timeline.events):,} events: " + "; ".join(took), flush=True)
    return counts, steps, span_ms


def run(browser, trace: Path, rounds: int, queries: list[str], cache: Path) -> dict:
    counts, steps, span_ms = _expected(trace, queries)
    work = Path(tempfile.mkdtemp(prefix="stepscope-tools-bench-"))
    results: dict[str, list[dict]] = {}
    try:
        logdir, empty = work / "logs", work / "empty"
        logdir.mkdir()
        empty.mkdir()
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
            raw = browser.new_page(viewport={"width": 1500, "height": 1400})
            raw.goto(url, timeout=TIMEOUT_MS)
            raw.get_by_role("button", name="Open from disk", exact=True).click(timeout=TIMEOUT_MS)
            raw.wait_for_selector(f"{DETAIL} .main-svg", timeout=TIMEOUT_MS)
            page = Page(raw, timing_log)
            page._settled()
            for r in range(rounds):
                for q in queries:
                    results.setdefault(f"find {q!r} ({counts[q]:,} matches)", []).append(page.find(q, counts[q]))
                    page.find("zzz-no-such-name", 0)  # back to no match, so the next find marks afresh
                results.setdefault("select (drag)", []).append(page.drag_select(r))
                lo = span_ms * (0.2 + 0.1 * r)
                results.setdefault("select (typed range)", []).append(page.typed_range(lo, lo + span_ms * 0.05))
                if steps:
                    step, kind = steps[min(len(steps) - 1, r * max(len(steps) // rounds, 1))]
                    results.setdefault("select (one step)", []).append(page.one_step(step, kind))
            raw.close()
        finally:
            server.terminate()
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", default=str(ROOT / "bench" / "out" / "big_gpu.json"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", nargs="+", default=["gemm", "Memcpy"])
    parser.add_argument("--goal-s", type=float, default=GOAL_S)
    args = parser.parse_args(argv)
    trace = Path(args.trace).resolve()
    if not trace.exists():
        print(f"error: {trace} not found (bench/README.md says how to make it)", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    cache = ROOT / "bench" / "out" / "tools_bench_cache"  # kept: the trace is read once, then mapped
    print(f"before: {_uptime()}", flush=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            results = run(browser, trace, args.rounds, args.queries, cache)
        finally:
            browser.close()
    print(f"after:  {_uptime()}")
    print(f"trace {trace.name} ({trace.stat().st_size / 1e9:.2f} GB), {args.rounds} rounds, median per action:")
    summary = {}
    for action, rows in results.items():
        median = {k: round(statistics.median(r[k] for r in rows), 3) for k in rows[0]}
        summary[action] = {"median": median, "rounds": rows}
        verdict = "MET" if median["answer_s"] <= args.goal_s else "NOT MET"
        extra = f", drawn {median['drawn_s']:.2f} s" if "drawn_s" in median else ""
        print(
            f"  {action:38s} answer {median['answer_s']:.2f} s{extra} (server {median['server_s']:.2f} s, figure "
            f"{median['figure_s']:.2f} s, browser CPU {median['browser_cpu_s']:.2f} s; goal {args.goal_s:g} s: "
            f"{verdict}); rounds: {', '.join(str(r['answer_s']) for r in rows)}"
        )
    out = ROOT / "bench" / "out" / f"timeline_tools_bench_{trace.stem}.json"
    out.write_text(json.dumps({"trace": str(trace), "actions": summary}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
