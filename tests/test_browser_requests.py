"""Real browser (Debian's Chromium through Playwright, as tests/test_browser.py): a vLLM profile folder opened from
the log directory shows the serving cards with the requests' distributions, the requests view (lanes, table), the
request chosen in the table outlined on the timeline, and a step's requests; a capture without its API server's
trace says its request count is unknown, and why (issue 41). On real vLLM captures (tests/data/captures/vllm).
Saves docs/screenshots/requests_view.png with STEPSCOPE_UPDATE_SCREENSHOTS=1 (README shows it)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.test_browser import PAGE_TIMEOUT_MS, SCREENSHOTS, _require_browser, _streamlit

pytestmark = pytest.mark.browser

CAPTURES = Path(__file__).resolve().parent / "data" / "captures" / "vllm"
RUN = "saturated_shapes_stacks"  # seven requests against four sequence slots, the API server's trace beside


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    _require_browser()
    pytest.importorskip("playwright.sync_api")
    logs = tmp_path_factory.mktemp("logs")
    shutil.copytree(CAPTURES / RUN, logs / RUN)
    shutil.copytree(CAPTURES / "no_front_end", logs / "no_front_end")
    cache = tmp_path_factory.mktemp("cache")
    env = dict(os.environ, STEPSCOPE_CACHE_DIR=str(cache), STEPSCOPE_SAMPLES_DIR=str(tmp_path_factory.mktemp("none")))
    with _streamlit(env, ("--logdir", str(logs))) as url:
        yield url


def _idle(page) -> None:
    page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", timeout=PAGE_TIMEOUT_MS)


def _open_from_logdir(page, url: str, starts: str) -> None:
    page.goto(url, timeout=PAGE_TIMEOUT_MS)
    page.get_by_text("Trace (newest first)").wait_for(timeout=PAGE_TIMEOUT_MS)
    _idle(page)
    page.locator(".st-key-logdir_pick").click()
    page.get_by_role("option").filter(has_text=starts).first.click()
    _idle(page)
    page.get_by_role("button", name="Open from disk").click()
    page.wait_for_selector("[data-testid='stMetric']", timeout=PAGE_TIMEOUT_MS * 3)
    _idle(page)


def _cards(page) -> dict[str, str]:
    from tests.test_browser_second_look import _cards as cards

    return cards(page)


def _legend(page, key: str) -> list[str]:
    return page.evaluate(f"() => document.querySelector('.st-key-{key} .js-plotly-plot')._fullData.map(d => d.name)")


def test_a_serving_folder_shows_its_requests(browser, app_url):
    page = browser.new_page(viewport={"width": 1500, "height": 1400})
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    _open_from_logdir(page, app_url, f"{RUN}/")
    first_row = " ".join(page.locator("[data-testid='stMetric']").all_inner_texts())
    for label in ("Requests", "TTFT p50", "TTFT p90", "ITL p50", "ITL p90"):  # the first row (issue 43)
        assert label in first_row
    assert "Tokens/s (run)" in _cards(page)  # behind "More figures"
    assert "\n7\n" in "\n" + "\n".join(page.locator("[data-testid='stMetric']").first.inner_text().split("\n")) + "\n"
    heading = page.get_by_role("heading", name="Requests (7)")
    heading.wait_for(timeout=PAGE_TIMEOUT_MS)
    # the distributions of the cards' figures: each request's TTFT and ITL
    dists = [
        k
        for k in page.evaluate(
            "() => [...document.querySelectorAll('[class*=st-key-request_dists]')].map(e => e.className)"
        )
    ]
    assert dists
    lanes_key = page.evaluate(
        "() => [...document.querySelector('[class*=st-key-request_lanes]').classList]"
        ".find(c => c.startsWith('st-key-request_lanes')).slice(7)"
    )
    lanes = page.evaluate(
        f"() => document.querySelector('.st-key-{lanes_key} .js-plotly-plot')._fullLayout.yaxis.ticktext"
    )
    assert lanes == ["steps", *(f"request {r}" for r in range(7))]
    assert "queued (arrival to its first step)" in _legend(page, lanes_key)
    # the table: seven rows; choosing the fifth (request 4) outlines its steps on the timeline
    grid = page.locator("[data-testid='stDataFrame']").filter(has=page.locator("canvas")).first
    grid.scroll_into_view_if_needed()
    page.wait_for_timeout(800)
    box = grid.bounding_box()
    page.mouse.click(box["x"] + 14, box["y"] + 35 + 35 * 4 + 17)  # the row marker of the fifth row
    page.wait_for_function(
        "() => document.querySelector('.st-key-overview_timeline .js-plotly-plot')._fullData"
        '.some(d => d.name === "request 4\'s steps")',
        timeout=PAGE_TIMEOUT_MS,
    )
    _idle(page)
    # a step's requests: step 4 served requests 0-3 (vLLM's scheduler says so: the truth file)
    step = page.locator("[class*=st-key-requests_step_] input")
    step.fill("4")
    step.press("Enter")
    page.get_by_text("Requests in it: 0, 1, 2, 3").wait_for(timeout=PAGE_TIMEOUT_MS)
    page.evaluate("() => document.querySelector('[class*=st-key-request_dists]').scrollIntoView({block: 'start'})")
    page.wait_for_timeout(1200)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "requests_view.png"))
    assert not dialogs
    page.close()


def test_a_capture_without_its_front_end_says_why_its_requests_are_unknown(browser, app_url):
    page = browser.new_page(viewport={"width": 1500, "height": 1400})
    _open_from_logdir(page, app_url, "no_front_end/")
    first = page.locator("[data-testid='stMetric']").first.inner_text()
    assert "Requests" in first and "unknown" in first
    reason = page.get_by_text("Requests unknown:").first
    reason.wait_for(timeout=PAGE_TIMEOUT_MS)
    assert "API server's trace" in reason.inner_text()  # what to record next time
    page.close()
