"""Issue 43 in a real browser (Debian's Chromium through Playwright, as tests/test_browser_timeline.py): on a real
vLLM full-graph trace (tests/data/real), the first screen at 1280x720 shows the whole overview; clicking the graph
launch on the kernel detail says what it replays (its kernel count and span, the API's kernels_of) and offers it as
a selection; clicking one of its kernels shows its launch link with the latency (launch_of); a finding's Zoom
outlines its evidence and shows the brush. Screenshots land in test-artifacts/timeline/ (looked at by hand)."""

from __future__ import annotations

import os
import shutil

import pytest

import stepscope
from stepscope.analysis.number_format import format_value
from tests.test_browser import PAGE_TIMEOUT_MS, REPO, _require_browser, _streamlit
from tests.test_browser_timeline import ARTIFACTS, DETAIL, SHOWN, SMALL, _find, _open_from_logdir, _settled

pytestmark = pytest.mark.browser

REAL = REPO / "tests" / "data" / "real"
GRAPH_TRACE = "tracelens_vllm_gptoss_decode_fullgraph_rocm.json.gz"
CHOSEN = "[class*='st-key-chosen_event_']"
README_SHOTS = REPO / "docs" / "screenshots"  # with STEPSCOPE_UPDATE_SCREENSHOTS=1, README's copies are refreshed


def _shot(page, name: str, full_page: bool = False) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=full_page)
    if os.environ.get("STEPSCOPE_UPDATE_SCREENSHOTS"):
        page.screenshot(path=str(README_SHOTS / f"{name}.png"), full_page=full_page)


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    _require_browser()
    pytest.importorskip("playwright.sync_api")
    root = tmp_path_factory.mktemp("launch")
    logs = root / "logs"
    logs.mkdir()
    shutil.copy(REAL / GRAPH_TRACE, logs / GRAPH_TRACE)
    shutil.copytree(REPO / "sample_traces", root / "samples", ignore=shutil.ignore_patterns("README.md"))
    env = dict(
        os.environ,
        STEPSCOPE_SAMPLES_DIR=str(root / "samples"),
        STEPSCOPE_RUNS_DIR=str(root / "runs"),
        STEPSCOPE_CACHE_DIR=str(root / "cache"),
    )
    with _streamlit(env, ("--logdir", str(logs))) as url:
        yield url


def _click_event(page, row: int) -> None:
    """Click the detail's segment of event `row` (the customdata of its hover point)."""
    page.locator(DETAIL).filter(visible=True).scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    where = page.evaluate(
        """([s, row]) => {
            const gd = """
        + SHOWN
        + """, L = gd._fullLayout;
            for (const d of gd._fullData) {
                const i = (d.customdata || []).indexOf(row);
                if (i < 0) continue;
                const box = gd.getBoundingClientRect();
                return {x: box.left + L._size.l + L.xaxis.l2p(d.x[i]), y: box.top + L._size.t + L.yaxis.l2p(d.y[i])};
            }
            return null;
        }""",
        [DETAIL, row],
    )
    assert where is not None, f"event {row} is not drawn on the detail"
    page.mouse.move(where["x"], where["y"])
    page.wait_for_timeout(300)
    page.mouse.click(where["x"], where["y"])
    page.wait_for_timeout(500)
    page.wait_for_selector(CHOSEN, timeout=PAGE_TIMEOUT_MS)
    _settled(page)


def test_launch_links_zoom_and_first_screen(browser, app) -> None:
    page = browser.new_page(viewport=SMALL)
    page.goto(app, timeout=PAGE_TIMEOUT_MS)
    page.wait_for_selector(f"{DETAIL} .main-svg", timeout=PAGE_TIMEOUT_MS)
    _settled(page)
    _open_from_logdir(page, GRAPH_TRACE)
    page.wait_for_function(
        "(n) => document.body.innerText.includes(n)", arg=GRAPH_TRACE.split(".")[0], timeout=PAGE_TIMEOUT_MS
    )
    _settled(page, 2000)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    overview = page.locator(".stPlotlyChart").first.bounding_box()
    _shot(page, "first_screen_1280x720_graph")
    assert overview["y"] + overview["height"] <= SMALL["height"], overview  # the whole overview above the fold

    trace = stepscope.load(REAL / GRAPH_TRACE)
    launch_row = int(trace.find("hipGraphLaunch")["row"].iloc[0])
    replayed = trace.kernels_of(launch_row)
    _find(page, "hipGraphLaunch")
    page.get_by_role("button", name="Next").click()
    _settled(page)
    _click_event(page, launch_row)
    text = page.locator(CHOSEN).inner_text()
    span = format_value(replayed.attrs["span_us"], "us")
    assert f"covers {len(replayed):,} kernels, {span}" in text, text
    assert "replays a graph" in text
    _shot(page, "graph_launch_1280x720", full_page=True)
    page.get_by_role("button", name="Select what it launched").click()
    page.wait_for_selector("[class*='st-key-selection_answer_']", timeout=PAGE_TIMEOUT_MS)
    _settled(page)
    assert "kernels hipGraphLaunch launched" in page.locator("[class*='st-key-selection_answer_']").inner_text()

    box = page.get_by_role("textbox", name="Find in event names")  # the find off: the detail shows the whole step
    box.fill("")
    box.press("Enter")
    _settled(page)
    kernel_row = int(replayed["row"].iloc[len(replayed) // 2])  # its neighbours are the graph's too: one latency
    _click_event(page, kernel_row)
    link = trace.launch_of(kernel_row)
    text = page.locator(CHOSEN).inner_text()
    assert f"launch latency {format_value(link['latency_us'], 'us')}" in text, text
    annotations = page.evaluate(f"(s) => ({SHOWN}).layout.annotations.map(a => a.text)", DETAIL)
    assert any(a.startswith("launch latency") for a in annotations), annotations

    page.get_by_role("button", name="Zoom").first.click()
    _settled(page, 2000)
    layout = page.evaluate("() => document.querySelector('.stPlotlyChart .js-plotly-plot').layout")
    assert layout["xaxis"]["rangeslider"]["visible"]
    assert any(s.get("type") == "rect" for s in layout.get("shapes", []))
    page.mouse.move(5, SMALL["height"] - 5)  # no tooltip over the cards
    page.wait_for_timeout(500)
    _shot(page, "zoom_evidence_1280x720")
    page.close()
