"""Real-browser test: two sessions (two pages) on one Streamlit server open two different big traces from --logdir at
once, and each page shows its own trace (its event count and content hash).

Before, a module-level list of "while decoding" callbacks made one session's decode run the other's hash and
"already cached" signal: the session opening a new trace could show the other's Timeline, when the other's content
was cached under a stat the index did not know (here: a `touch` after caching it). See tests/test_concurrent_open.py
for the same below the app. Traces here are SYNTHETIC, each over parsers.split_decode.MIN_SPLIT_BYTES.
"""

from __future__ import annotations

import os

import pytest

from stepscope.analysis.number_format import format_count
from stepscope.parsers import load_trace
from stepscope.parsers.kineto import pieces as split_decode
from stepscope.trace_cache import keys, timelines
from stepscope.trace_cache.store import CacheStore
from tests.synthetic_traces import synthetic_generation, write
from tests.test_browser import CHROMIUM, CHROMIUM_ARGS, PAGE_TIMEOUT_MS, _require_browser, _streamlit

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def chromium():
    _require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


ROUNDS = 2  # the old code showed the wrong trace in about two rounds of three
# The trace's caption above its summary (app/components.py header): "... 123,456 events · ... · content b3-..."
# the header's event count and the Downloads' content line (the hash left the header line in issue 30)
_CAPTION = (
    r"() => { const t = document.body.innerText; const e = t.match(/[\d.,]+k? events · /);"
    r" const c = t.match(/content \S+ \(sha256/); return e && c ? e[0] + c[0] : null; }"
)


def _pick_folder(page, folder: str) -> None:
    page.locator("[data-testid='stSelectbox']").filter(has_text="Folder").click()
    page.get_by_role("option", name=folder, exact=True).click()
    page.wait_for_function(
        "(name) => [...document.querySelectorAll(\"[data-testid='stSelectbox'] input\")].some(e => e.value === name)",
        arg=folder,
        timeout=PAGE_TIMEOUT_MS,
    )


def _traces(logs, cache) -> dict[str, tuple[int, str]]:
    """Per round, two different big traces (new content each round): "cached" (its content in the cache, under a
    stat since gone: a `touch`) and "new"; each one's event count and digest, by folder."""
    expected = {}
    for round_ in range(ROUNDS):
        for name, steps in (("cached", 8500), ("new", 9000)):
            folder = logs / f"r{round_}" / name
            folder.mkdir(parents=True)
            path = write(folder / "trace.json", synthetic_generation(decode_steps=steps + 10 * round_))
            assert path.stat().st_size > split_decode.MIN_SPLIT_BYTES
            expected[f"r{round_}/{name}"] = (len(load_trace(path).events), keys.hash_bytes(path.read_bytes()))
            if name == "cached":
                timelines.open_trace_cached(path, store=CacheStore(cache))
                st_ = path.stat()
                os.utime(path, ns=(st_.st_atime_ns, st_.st_mtime_ns + 1_000_000_000))
    return expected


def test_two_pages_open_two_big_traces_at_once_and_each_shows_its_own(chromium, tmp_path):
    logs, empty, cache = tmp_path / "logs", tmp_path / "empty", tmp_path / "cache"
    empty.mkdir()
    expected = _traces(logs, cache)
    env = dict(os.environ, STEPSCOPE_SAMPLES_DIR=str(empty), STEPSCOPE_RUNS_DIR=str(empty))
    env["STEPSCOPE_CACHE_DIR"] = str(cache)
    with _streamlit(env, ("--logdir", str(logs))) as url:
        for round_ in range(ROUNDS):
            pages = {}
            for name in (f"r{round_}/cached", f"r{round_}/new"):
                page = chromium.new_page(viewport={"width": 1500, "height": 2200})
                page.goto(url, timeout=PAGE_TIMEOUT_MS)
                page.get_by_role("button", name="Open from disk", exact=True).wait_for(timeout=PAGE_TIMEOUT_MS)
                _pick_folder(page, name)
                pages[name] = page
            for page in pages.values():  # both clicks at once: the two opens run side by side on the server
                page.get_by_role("button", name="Open from disk", exact=True).click()
            for name, page in pages.items():
                caption = page.wait_for_function(_CAPTION, timeout=PAGE_TIMEOUT_MS).json_value()
                events, digest = expected[name]
                shown = f"{format_count(events)} events"
                assert shown in caption and f"content {digest[:15]}" in caption, (name, caption)
                page.close()
    for name, (_, digest) in expected.items():
        assert keys.known_digest(CacheStore(cache), logs / name / "trace.json") == digest, name
