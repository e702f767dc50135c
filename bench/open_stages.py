"""The stage messages a user sees while a big trace opens from --logdir (issue 43): each distinct progress line the
page shows, with the seconds since the click, and a screenshot of the first analysis stage caught (README's).

    python bench/open_stages.py [--trace /tmp/big_gpu.json] [--shot docs/screenshots/opening_stages_1280x720.png]

Without --trace it tiles the real A100 trace ten times (bench/parse_bench.py's 219 MB bench trace, 1.09M events).
The cache folder is empty, so the trace is read cold. The page is polled every 20 ms: a stage shorter than that may
not be printed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

LINES_JS = (
    "() => [...document.querySelectorAll('[data-testid=stProgress], [data-testid=stCaptionContainer]')]"
    ".map(e => e.innerText)"
)
OPENED_JS = (
    "(n) => document.querySelector(\"[data-testid='stMain']\")?.innerText.includes(n) && "
    "!!document.querySelector('.st-key-overview_timeline .main-svg') && "
    "!!document.querySelector(\"[data-testid='stApp'][data-test-script-state='notRunning']\")"
)


def watch(url: str, name: str, shot: Path | None, limit_s: float = 600.0) -> list[tuple[float, str]]:
    from playwright.sync_api import sync_playwright

    from tests.test_browser import CHROMIUM, CHROMIUM_ARGS

    seen: list[tuple[float, str]] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        page.goto(url, timeout=120_000)
        button = page.get_by_role("button", name="Open from disk", exact=True)
        button.wait_for(timeout=120_000)
        page.wait_for_timeout(3000)
        button.click()
        start = time.monotonic()
        while time.monotonic() - start < limit_s:
            for line in page.evaluate(LINES_JS):
                staged = "…" in line or line.startswith("Reading the trace")
                if staged and line not in [s for _, s in seen]:
                    seen.append((time.monotonic() - start, line))
                    if shot is not None and not line.startswith("Reading") and not shot.exists():
                        page.screenshot(path=str(shot))
            if time.monotonic() - start > 2 and page.evaluate(OPENED_JS, name):
                seen.append((time.monotonic() - start, "overview drawn"))
                break
            time.sleep(0.02)
        browser.close()
    return seen


def main(argv: list[str] | None = None) -> int:
    from parse_bench import build_gpu_trace

    from tests.test_browser import _streamlit

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=None)
    parser.add_argument("--shot", type=Path, default=None, help="where the screenshot goes (replaced)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        logs = work / "logs"
        logs.mkdir()
        if args.trace is None:
            print(f"built the bench trace: {build_gpu_trace(logs / 'big_gpu.json'):,} events", flush=True)
            name = "big_gpu.json"
        else:
            name = args.trace.name
            try:  # a hard link (the picker does not follow links); a copy across file systems
                os.link(args.trace, logs / name)
            except OSError:
                shutil.copy(args.trace, logs / name)
        if args.shot is not None:
            args.shot.unlink(missing_ok=True)
        env = dict(os.environ, STEPSCOPE_CACHE_DIR=str(work / "cache"), STEPSCOPE_RUNS_DIR=str(work / "runs"))
        with _streamlit(env, ("--logdir", str(logs))) as url:
            for seconds, line in watch(url, name, args.shot):
                print(f"{seconds:6.2f} s  {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
