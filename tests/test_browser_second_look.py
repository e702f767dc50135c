"""Issue 44 in a real browser (Debian's Chromium through Playwright, as tests/test_browser.py): what AppTest cannot
see. No Deploy button in the toolbar on any page; a speculative capture's cards show ranges and its timeline both
shades of its step kinds; a trace that does not say its batch reads "unknown" with what would make it known; a
trace without steps (a SYNTHETIC Nsight export opened from --logdir) gets time-based cards and a utilisation line;
Compare on an unlike pair shows no green verdict, one line and a "why" expander.

Screenshots land in test-artifacts/second_look/; with STEPSCOPE_UPDATE_SCREENSHOTS=1 the speculative and no-steps
pages also refresh docs/screenshots/ (README shows them).
"""

from __future__ import annotations

import os
import re
import shutil

import pytest

from tests.synthetic_idle_nsys import write_idle_capture
from tests.test_browser import PAGE_TIMEOUT_MS, REPO, _require_browser, _streamlit
from tests.test_browser_pages import _go, _open_from_logdir, _pick, _settled

pytestmark = pytest.mark.browser

CAPTURES = REPO / "tests" / "data" / "captures"
ARTIFACTS = REPO / "test-artifacts" / "second_look"
README_SHOTS = REPO / "docs" / "screenshots"
VERIFY_SHADES = ("rgb(12, 166, 120)", "rgb(99, 230, 190)")  # exporters/figures/palette.py VERIFY, VERIFY_ODD


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    _require_browser()
    pytest.importorskip("playwright.sync_api")
    root = tmp_path_factory.mktemp("second_look")
    samples, logs = root / "samples", root / "logs"
    shutil.copytree(REPO / "sample_traces", samples, ignore=shutil.ignore_patterns("README.md"))
    for folder, capture in (
        ("speculative_verify_only", "speculative_verify_only"),
        ("no_shapes", "two_requests_stack"),
    ):
        (samples / folder).mkdir()
        shutil.copy(CAPTURES / f"{capture}.json.gz", samples / folder / "trace.json.gz")
    logs.mkdir()
    write_idle_capture(logs / "synthetic_idle_capture.sqlite")
    env = dict(
        os.environ,
        STEPSCOPE_SAMPLES_DIR=str(samples),
        STEPSCOPE_RUNS_DIR=str(root / "runs"),
        STEPSCOPE_CACHE_DIR=str(root / "cache"),
    )
    with _streamlit(env, ("--logdir", str(logs))) as url:
        yield url


def _shot(page, name: str, readme: bool = False) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.evaluate("document.querySelector(\"[data-testid='stMain']\").scrollTo(0, 0)")
    page.wait_for_timeout(1000)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))
    if readme and os.environ.get("STEPSCOPE_UPDATE_SCREENSHOTS"):
        page.screenshot(path=str(README_SHOTS / f"{name}.png"))


def _no_deploy_button(page, where: str) -> None:
    assert page.locator("[data-testid='stAppDeployButton']").count() == 0, where
    assert page.get_by_role("button", name="Deploy").count() == 0, where


# the page's main part (not the sidebar's picker) names the trace: it is open
MAIN_SAYS = "(n) => document.querySelector(\"[data-testid='stMain']\")?.innerText.includes(n)"


def _cards(page) -> dict[str, str]:
    """The summary cards: label -> value, as the browser shows them, the first row's and those behind "More
    figures" (issue 43's first screen), in that order."""
    more = page.get_by_role("button", name=re.compile(r"^More figures"))
    if more.count():
        more.first.click()
        page.locator("[data-testid='stPopoverBody'] [data-testid='stMetric']").first.wait_for(timeout=PAGE_TIMEOUT_MS)
    out = {}
    for card in page.locator("[data-testid='stMetric']").all():
        label = card.locator("[data-testid='stMetricLabel']").inner_text().strip()
        out[label] = card.locator("[data-testid='stMetricValue']").inner_text().strip()
    if more.count():
        page.keyboard.press("Escape")
        page.evaluate("() => document.activeElement?.blur()")  # no focus ring left on the button in a screenshot
        page.wait_for_timeout(300)
    return out


def _choose_trace(page, name: str) -> None:
    """Pick a trace in Analyze's sidebar, again while the page still shows another (a rerun of the log directory's
    self-refreshing listing can swallow a pick)."""
    box = page.locator("[data-testid='stSidebar'] [data-testid='stSelectbox']").filter(has_text="Trace").first
    for _ in range(4):
        if name in box.locator("input").input_value():
            return
        _pick(page, "Trace", name)
        page.wait_for_timeout(2000)
    assert name in box.locator("input").input_value()


def _overview_fills(page) -> set[str]:
    return set(
        page.evaluate("""() => Array.from(
            document.querySelectorAll('.st-key-overview_timeline .js-plotly-plot path.js-fill'))
            .map(p => getComputedStyle(p).fill)""")
    )


def test_what_an_expert_sees_first_round_two(browser, app):
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(app, timeout=PAGE_TIMEOUT_MS)
    page.wait_for_selector("[data-testid='stMetric']", timeout=PAGE_TIMEOUT_MS * 3)
    _settled(page)
    _no_deploy_button(page, "Analyze")

    _choose_trace(page, "speculative_verify_only")
    page.wait_for_function(MAIN_SAYS, arg="speculative_verify_only", timeout=PAGE_TIMEOUT_MS * 3)
    _settled(page)
    cards = _cards(page)
    assert "–" in cards["ITL p50"] and "–" in cards["Verify tokens/s"], cards
    assert set(VERIFY_SHADES) <= _overview_fills(page), _overview_fills(page)
    body = page.inner_text("body")
    assert "Decode-dominated" not in body and "Context: Verify-dominated" in body
    _shot(page, "analyze_speculative", readme=True)

    _choose_trace(page, "no_shapes")
    page.wait_for_function(MAIN_SAYS, arg="no_shapes", timeout=PAGE_TIMEOUT_MS * 3)
    _settled(page)
    cards = _cards(page)
    assert cards["Tokens / decode step"] == "unknown" and cards["Decode tokens/s"] == "unknown", cards
    page.get_by_role("button", name=re.compile(r"^More figures")).first.click()  # the lines that say why
    more = page.locator("[data-testid='stPopoverBody']").first
    more.wait_for(timeout=PAGE_TIMEOUT_MS)
    assert "Tokens per step unknown" in more.inner_text() and "record_shapes=True" in more.inner_text()
    page.keyboard.press("Escape")

    _open_from_logdir(page, "synthetic_idle_capture")
    page.wait_for_function("document.body.innerText.includes('GPU busy (capture)')", timeout=PAGE_TIMEOUT_MS * 3)
    _settled(page)
    cards = _cards(page)
    assert list(cards)[:4] == ["GPU busy (capture)", "Kernels / s", "Longest idle gap", "Top kernel"], cards
    assert "The GPU is idle" in page.inner_text("body")
    legend = page.evaluate("""() => document.querySelector('.st-key-overview_timeline .js-plotly-plot')
        ._fullData.map(d => d.name)""")
    assert any("share of time" in (name or "") for name in legend), legend
    _shot(page, "analyze_no_steps", readme=True)

    _go(page, "Compare")
    _no_deploy_button(page, "Compare")
    _pick(page, "Baseline (A)", "cpu_tiny-llama_eager")
    _pick(page, "Changed (B)", "speculative_verify_only")
    page.get_by_text("Why not like for like").first.wait_for(timeout=PAGE_TIMEOUT_MS)
    assert page.locator("[data-testid='stAlertContentSuccess']").count() == 0  # no green verdict
    banner = page.locator("[data-testid='stAlertContentWarning']").first.inner_text()
    lines = [line for line in banner.splitlines() if line.strip() and line.strip() != "warning"]  # less its icon
    assert len(lines) == 1 and lines[0].startswith("Not like for like"), banner
    sentence = page.locator("[data-testid='stAlertContentInfo']").first.inner_text()
    assert "Side by side" in sentence and "faster" not in sentence and "mostly" not in sentence, sentence
    _shot(page, "compare_unlike")
    for title in ("Ranks", "Fleet"):
        _go(page, title)
        _no_deploy_button(page, title)
    page.close()
