"""Issue 43, item 3, in a real browser (Debian's Chromium through Playwright): on every shipped sample and every
real trace in tests/data/real, the whole overview timeline is on the first screen at 1280x720 and at 1500 px wide,
under one row of cards and the top findings. Screenshots land in test-artifacts/first_screen/ (looked at by hand)."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.test_browser import PAGE_TIMEOUT_MS, REPO, _require_browser, _streamlit
from tests.test_browser_timeline import _open_from_logdir, _settled

pytestmark = pytest.mark.browser

REAL = REPO / "tests" / "data" / "real"
SAMPLES = REPO / "sample_traces"
ARTIFACTS = REPO / "test-artifacts" / "first_screen"
SCREENS = {"1280x720": {"width": 1280, "height": 720}, "1500x850": {"width": 1500, "height": 850}}
# a sample folder's trace keeps its run.json beside it (the model, the device): the cards it gives are the sample's
# a sample of several ranks is one entry for the run (its folder's name and a slash)
TRACES = [
    f"{p.name}/trace.json.gz" if (p / "trace.json.gz").is_file() else f"{p.name}/"
    for p in sorted(SAMPLES.iterdir())
    if p.is_dir()
] + [p.name for p in sorted(REAL.glob("*.json*"))]


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    _require_browser()
    pytest.importorskip("playwright.sync_api")
    root = tmp_path_factory.mktemp("first_screen")
    logs = root / "logs"
    logs.mkdir()
    for path in REAL.glob("*.json*"):
        shutil.copy(path, logs / path.name)
    for folder in SAMPLES.iterdir():
        if folder.is_dir():
            shutil.copytree(folder, logs / folder.name)
    env = dict(os.environ, STEPSCOPE_RUNS_DIR=str(root / "runs"), STEPSCOPE_CACHE_DIR=str(root / "cache"))
    with _streamlit(env, ("--logdir", str(logs))) as url:
        yield url


@pytest.mark.parametrize("screen", SCREENS)
def test_the_overview_is_on_the_first_screen_of_every_trace(browser, app, screen) -> None:
    size = SCREENS[screen]
    page = browser.new_page(viewport=size)
    page.goto(app, timeout=PAGE_TIMEOUT_MS)
    page.wait_for_selector(".stPlotlyChart .main-svg", timeout=PAGE_TIMEOUT_MS)
    _settled(page)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    below: dict[str, float] = {}
    for name in TRACES:
        _open_from_logdir(page, name)
        page.wait_for_function(
            "(n) => document.body.innerText.includes(n)", arg=name.split("/")[0].split(".")[0], timeout=PAGE_TIMEOUT_MS
        )
        page.evaluate("() => window.scrollTo(0, 0)")
        overview = page.locator(".stPlotlyChart").first.bounding_box()
        page.screenshot(path=str(ARTIFACTS / f"{screen}_{name.replace('/', '_')}.png"))
        if overview["y"] + overview["height"] > size["height"]:
            below[name] = overview["y"] + overview["height"]
    page.close()
    assert below == {}, f"the overview's bottom is below the fold ({size['height']} px) on: {below}"
