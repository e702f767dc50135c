"""Real-browser test: start `streamlit run`, open it in Debian's Chromium through Playwright.

Checks the Analyze page shows the summary numbers and the Plotly timeline, that a
kernel named like an XSS probe shows as text and fires nothing, and Compare
renders; saves screenshots to docs/screenshots/. Never lets Playwright download
a browser: it uses /usr/bin/chromium (apt-get install chromium).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.app_samples import FIXTURE_SAMPLES, synthetic_trace, write_synthetic_trace

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
# Screenshots land in test-artifacts/ (ignored by git); STEPSCOPE_UPDATE_SCREENSHOTS=1 refreshes README's.
SCREENSHOTS = REPO / ("docs/screenshots" if os.environ.get("STEPSCOPE_UPDATE_SCREENSHOTS") else "test-artifacts")
PAGE_TIMEOUT_MS = 60_000
MEMORY_CAPTURE = REPO / "tests" / "data" / "captures" / "memory_fp32_b1_two_requests_kept.json.gz"
MEMORY_SAMPLE = "memory_capture"


def _require_browser() -> None:
    if CHROMIUM.exists():
        return
    if os.environ.get("CI"):
        pytest.fail("CI is set but /usr/bin/chromium is missing: .ci/run must `apt-get install -y chromium`")
    pytest.skip("/usr/bin/chromium is missing (apt-get install -y chromium); CI installs it and runs this test")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    _require_browser()
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("CI is set but playwright is not installed (requirements-dev.txt)")
        pytest.skip("playwright is not installed (pip install -r requirements-dev.txt)")
    samples = tmp_path_factory.mktemp("samples")
    # the shipped samples (real CPU captures), so the screenshots show what a newcomer sees
    shipped = REPO / "sample_traces"
    for folder in (shipped if any(shipped.glob("*/trace.json.gz")) else FIXTURE_SAMPLES).iterdir():
        if folder.is_dir():
            shutil.copytree(folder, samples / folder.name)
    write_synthetic_trace(samples, "synthetic")
    # a real multi-rank folder without steps (HTA, MIT: 2 of 128 ranks, NCCL send/recv), for the Ranks page
    shutil.copytree(REPO / "tests" / "data" / "real" / "hta_sampled_2rank", samples / "hta_sampled_2rank")
    (samples / MEMORY_SAMPLE).mkdir()  # a real capture with profile_memory (tests/data/captures)
    shutil.copy(MEMORY_CAPTURE, samples / MEMORY_SAMPLE / "trace.json.gz")
    env = dict(os.environ, STEPSCOPE_SAMPLES_DIR=str(samples), STEPSCOPE_RUNS_DIR=str(samples / "runs"))
    with _streamlit(env) as url:
        yield url


@contextlib.contextmanager
def _streamlit(env: dict, script_args: tuple[str, ...] = ()):
    """`streamlit run app/streamlit_app.py [-- script_args]` on a free port; yields its URL, stops it after."""
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
            *(("--", *script_args) if script_args else ()),
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    break
        except OSError:
            time.sleep(0.5)
    else:
        server.kill()
        pytest.fail(f"streamlit did not start: {server.stdout.read().decode(errors='replace')[-2000:]}")
    try:
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()


def _open(browser, url: str):
    page = browser.new_page(viewport={"width": 1500, "height": 2200})
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(url, timeout=PAGE_TIMEOUT_MS)
    return page, dialogs


def _hover_overview(page, attempts: int = 6) -> tuple[str, list[str]]:
    """The hover label the overview shows with the mouse on the middle of a lane's first rectangle (its hover
    point, in page pixels from Plotly's axes), and the figure's own hover texts.

    Plotly draws a label on a mouse move only. On a loaded machine the page can still move after the point is
    measured (the rest of the page drawn below, a rerun), leaving the mouse still, off any point: so wait for the
    script to finish, then measure and move again until the label shows, a bounded number of times."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for _ in range(attempts):
        page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", timeout=PAGE_TIMEOUT_MS)
        point = page.evaluate("""() => {
            const gd = document.querySelector('.st-key-overview_timeline .js-plotly-plot');
            const fl = gd._fullLayout, box = gd.getBoundingClientRect();
            const hovers = gd._fullData.filter(d => d.hoverinfo === 'text' && d.mode === 'none');
            const t = hovers[0];
            return {x: box.left + fl._size.l + fl.xaxis.l2p(t.x[0]), y: box.top + fl._size.t + fl.yaxis.l2p(t.y[0]),
                    texts: hovers.flatMap(d => Array.from(d.hovertext))};
        }""")
        page.mouse.move(0, 0)
        page.mouse.move(point["x"] - 3, point["y"] - 3)
        page.mouse.move(point["x"], point["y"], steps=3)
        try:
            label = page.wait_for_selector(".st-key-overview_timeline .hovertext", timeout=5_000)
        except PlaywrightTimeout:
            continue
        return label.text_content().replace(" ", ""), point["texts"]
    pytest.fail(f"no hover label on the overview after {attempts} tries with the mouse on a hover point")


def _wait_for_analysis(page) -> None:
    page.wait_for_selector("[data-testid='stMetric']", timeout=PAGE_TIMEOUT_MS)
    page.wait_for_selector(".js-plotly-plot", timeout=PAGE_TIMEOUT_MS)
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 2", timeout=PAGE_TIMEOUT_MS)
    page.wait_for_timeout(1500)  # let WebGL traces paint before the screenshot


def test_analyze_page_shows_summary_and_timeline(browser, app_url):
    page, dialogs = _open(browser, app_url)
    _wait_for_analysis(page)
    metrics = page.locator("[data-testid='stMetric']")
    text = " ".join(metrics.all_inner_texts())
    for label in ("TTFT", "ITL p50", "ITL p90", "Step time (decode)"):  # the first row (issue 43)
        assert label in text
    from tests.test_browser_second_look import _cards

    cards = _cards(page)  # the first row's and those behind "More figures"
    for label in ("Decode tokens/s", "Host busy"):  # the CPU sample: host wording
        assert label in cards
    text = " ".join(f"{label} {value}" for label, value in cards.items())
    assert "GPU" not in text
    assert "ms" in text and any(ch.isdigit() for ch in text)
    assert page.locator(".js-plotly-plot .scatterlayer, .js-plotly-plot canvas").count() > 0
    page.get_by_text("Expected vs measured (roofline)").wait_for(timeout=PAGE_TIMEOUT_MS)
    page.wait_for_function("document.body.innerText.includes('% of roofline')", timeout=PAGE_TIMEOUT_MS)
    page.wait_for_function("document.body.innerText.includes('Roofline per category')", timeout=PAGE_TIMEOUT_MS)
    body = page.inner_text("body")
    assert "Decode at" in body and "Prepare for Perfetto" in body
    # issue 12's views: categories and layers of the median decode step, the per-category roofline
    assert "Inside a step: categories and layers" in body and "Layers" in body
    assert "Top host ops per phase" in body  # a CPU trace says host ops, not kernels
    assert page.locator(".js-plotly-plot").count() >= 6  # overview, detail, 3 per-step, categories, gaps
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "analyze.png"), full_page=True)
    assert "cpu_tiny-llama_eager" in page.locator("[data-testid='stSelectbox'] input").first.input_value()
    assert not dialogs
    page.close()


def test_perfetto_export_appears_on_request(browser, app_url):
    page, dialogs = _open(browser, app_url)
    _wait_for_analysis(page)
    page.get_by_role("button", name="Prepare for Perfetto").click()
    download = page.get_by_role("button", name="Download for Perfetto (.pftrace)")
    download.wait_for(timeout=PAGE_TIMEOUT_MS)
    frame = page.frame_locator("iframe").last
    frame.get_by_role("button", name="Open in Perfetto UI").wait_for(timeout=PAGE_TIMEOUT_MS)
    download.scroll_into_view_if_needed()
    page.wait_for_timeout(500)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    assert page.get_by_role("button", name="Prepare for Perfetto").count() == 0
    page.screenshot(path=str(SCREENSHOTS / "analyze_roofline_downloads.png"))
    assert not dialogs
    page.close()


def test_trace_text_is_escaped(browser, app_url):
    page, dialogs = _open(browser, app_url)
    _wait_for_analysis(page)
    page.locator("[data-testid='stSelectbox']").first.click()
    page.get_by_role("option", name="synthetic").click()
    page.wait_for_function("document.body.innerText.includes('Synthetic GPU')", timeout=PAGE_TIMEOUT_MS)
    # the kernel table is a data grid drawn on a canvas: the name is pixels there, never markup
    page.get_by_text("Top kernels per phase").wait_for(timeout=PAGE_TIMEOUT_MS)
    page.wait_for_function(
        "document.querySelectorAll(\"[data-testid='stDataFrame']\").length >= 3", timeout=PAGE_TIMEOUT_MS
    )
    page.wait_for_timeout(1500)
    assert page.locator("img[src='x']").count() == 0
    assert not dialogs
    page.close()


def test_memory_lane_is_drawn_under_the_timeline(browser, app_url):
    """A capture with memory events: the memory lane's traces (allocated per device, the step boundaries) are on
    the page under the timeline, and the memory figures and the finding on the kept cache are shown."""
    page, dialogs = _open(browser, app_url)
    _wait_for_analysis(page)
    page.locator("[data-testid='stSelectbox']").first.click()
    page.get_by_role("option", name=MEMORY_SAMPLE).click()
    page.wait_for_selector(
        ".st-key-memory_lane .js-plotly-plot .scatterlayer .trace", state="attached", timeout=PAGE_TIMEOUT_MS
    )
    lane = page.evaluate("""() => {
        const gd = document.querySelector('.st-key-memory_lane .js-plotly-plot');
        return {names: gd._fullData.map(d => d.name), points: gd._fullData.map(d => d.x.length),
                top: gd.getBoundingClientRect().top,
                timeline: document.querySelector('.st-key-overview_timeline').getBoundingClientRect().top};
    }""")
    assert "allocated · cpu" in lane["names"] and "step boundaries" in lane["names"]
    assert lane["points"][lane["names"].index("allocated · cpu")] > 100  # the series itself, not an empty trace
    assert lane["top"] > lane["timeline"]  # under the timeline
    body = page.inner_text("body")
    assert "Memory over the run" in body and "KV growth / decode step (cpu)" in body
    assert "Memory not returned after 2 request(s)" in body
    page.locator(".st-key-memory_lane").scroll_into_view_if_needed()
    page.wait_for_timeout(1000)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "analyze_memory.png"))
    assert not dialogs
    page.close()


def test_compare_page_renders(browser, app_url):
    page, dialogs = _open(browser, f"{app_url}/compare")
    page.wait_for_selector("[data-testid='stAlertContentSuccess'], [data-testid='stAlert']", timeout=PAGE_TIMEOUT_MS)
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 3", timeout=PAGE_TIMEOUT_MS)
    page.wait_for_timeout(1500)
    page.get_by_text("Inside the median decode step").first.wait_for(timeout=PAGE_TIMEOUT_MS)
    body = page.inner_text("body")
    assert "faster" in body or "slower" in body
    assert "Layers." in body and "4 layers" in body  # tiny-llama, both sides
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "compare.png"), full_page=True)
    assert not dialogs
    page.close()


def test_run_page_runs_a_generation_and_opens_it(browser, app_url):
    page, dialogs = _open(browser, f"{app_url}/run")
    run_button = page.get_by_role("button", name="Run", exact=True)
    run_button.wait_for(timeout=PAGE_TIMEOUT_MS)
    run_button.click()
    # the default preset on the CPU: the run lands in Analyze with the new run selected
    page.wait_for_selector("[data-testid='stMetric']", timeout=240_000)
    _wait_for_analysis(page)
    assert "past run" in page.locator("[data-testid='stSelectbox'] input").first.input_value()
    assert "stepscope-markers" in page.inner_text("body")
    assert page.get_by_role("link", name="Compare").count() == 1  # st.navigation's menu survived the switch
    assert not dialogs
    page.close()


def _time_to_answer(browser, url: str) -> tuple[float, float]:
    """Seconds from opening Analyze in a new session to its cards, and to its first two figures."""
    started = time.monotonic()
    page, _ = _open(browser, url)
    page.wait_for_selector("[data-testid='stMetric']", timeout=PAGE_TIMEOUT_MS)
    cards = time.monotonic() - started
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 2", timeout=PAGE_TIMEOUT_MS)
    figures = time.monotonic() - started
    page.close()
    return cards, figures


def test_a_second_session_is_answered_while_a_first_runs_a_generation(browser, app_url):
    """Issue 39: a profiled generation runs in a child process (collectors.child), so the server answers another
    session while it works; the first session's Stop then ends it. (The seconds the second session waited, beside
    the same open with no run going, are printed, not judged: `pytest -s` shows them.)"""
    _time_to_answer(browser, app_url)  # the sample's answer in the server's cache, as for any later session
    idle = _time_to_answer(browser, app_url)
    runner, dialogs = _open(browser, f"{app_url}/run")
    runner.get_by_label("New tokens").fill("1024")  # the bound's default: a run of tens of seconds on this CPU
    runner.get_by_label("Batch").fill("4")
    runner.get_by_role("button", name="Run", exact=True).click()
    stop = runner.locator(".st-key-run_stop").get_by_role("button", name="Stop")  # not the header's own Stop
    stop.wait_for(timeout=PAGE_TIMEOUT_MS)
    busy = _time_to_answer(browser, app_url)
    assert stop.is_visible() and "Running 1 profiled generation" in runner.inner_text("body")  # still running
    print(
        f"second session while a generation ran: cards in {busy[0]:.1f} s, figures in {busy[1]:.1f} s "
        f"(no run going: {idle[0]:.1f} s and {idle[1]:.1f} s)"
    )
    stop.click()
    runner.get_by_text("Run stopped: its process was ended.").wait_for(timeout=PAGE_TIMEOUT_MS)
    assert not dialogs
    runner.close()


def test_run_page_sweeps_prefill_and_plots_it(browser, app_url):
    page, dialogs = _open(browser, f"{app_url}/run")
    page.get_by_text("Run a prefill sweep").wait_for(timeout=PAGE_TIMEOUT_MS)
    page.get_by_label("Max prompt tokens").fill("64")
    page.get_by_label("Points (log-spaced)").fill("3")
    page.get_by_label("Timed repeats per point (fastest kept)").fill("1")
    page.get_by_role("button", name="Run sweep").click()
    page.wait_for_function("document.body.innerText.includes('Sweep done')", timeout=240_000)
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 1", timeout=PAGE_TIMEOUT_MS)
    page.wait_for_timeout(1500)
    body = page.inner_text("body")
    assert "measured prefill" in body and "one decode step" in body
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "sweep.png"), full_page=True)
    assert not dialogs
    page.close()


def test_ranks_page_shows_the_tp2_run(browser, app_url):
    page, dialogs = _open(browser, f"{app_url}/ranks")
    page.wait_for_selector("[data-testid='stMetric']", timeout=PAGE_TIMEOUT_MS)
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 3", timeout=PAGE_TIMEOUT_MS)
    page.wait_for_timeout(1500)  # let the heatmap and WebGL lanes paint before the screenshot
    text = " ".join(page.locator("[data-testid='stMetric']").all_inner_texts())
    assert "Ranks" in text and "Communication" in text and "Slowest rank" in text
    body = page.inner_text("body")
    assert "rank-0.trace.json.gz" in body and "rank-1.trace.json.gz" in body
    assert page.locator(".js-plotly-plot .heatmaplayer, .js-plotly-plot .hm").count() > 0
    assert "cpu_tiny-llama_tp2_eager" in page.locator("[data-testid='stSelectbox'] input").first.input_value()
    _assert_ranks_stacked(page)
    assert "Arrivals at collectives" in body and "n/a" not in body
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "ranks.png"), full_page=True)
    assert page.get_by_role("link", name="Fleet").count() == 1
    assert not dialogs
    page.close()


def _assert_ranks_stacked(page) -> None:
    """Issue 45: both ranks' lanes in one figure, and the window slider's two thumbs apart (one iteration)."""
    ticks = page.evaluate(
        "[...document.querySelectorAll('.js-plotly-plot')].map(p => [...p.querySelectorAll('.ytick text')]"
        ".map(t => t.textContent))"
    )
    assert any(any(t.startswith("rank 0:") for t in f) and any(t.startswith("rank 1:") for t in f) for f in ticks)
    thumbs = page.locator("[data-testid='stSlider'] [data-testid='stSliderThumbValue']")
    xs = [thumbs.nth(k).bounding_box()["x"] for k in range(thumbs.count())]
    assert len(xs) == 2 and abs(xs[1] - xs[0]) > 100, xs


def test_ranks_page_stacks_the_hta_ranks_and_checks_the_clock(browser, app_url):
    page, dialogs = _open(browser, f"{app_url}/ranks")
    page.wait_for_selector("[data-testid='stMetric']", timeout=PAGE_TIMEOUT_MS)
    page.locator("[data-testid='stSelectbox']").first.click()
    page.get_by_role("option", name="hta_sampled_2rank (sample)").click()
    page.wait_for_function("document.body.innerText.includes('sampled_rank-1.json.gz')", timeout=PAGE_TIMEOUT_MS)
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 1", timeout=PAGE_TIMEOUT_MS)
    page.wait_for_timeout(1500)
    body = page.inner_text("body")
    assert "Clock: checked: the ends of 5 collectives" in body and "n/a" not in body
    _assert_ranks_stacked(page)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "ranks_hta.png"), full_page=True)
    assert not dialogs
    page.close()


def test_landing_frame_loads_plotly_before_the_click_and_gives_way_to_the_trace(browser, tmp_path):
    """--logdir, no samples: Analyze's landing page draws the empty timeline frame (so Plotly's code is loaded
    before the user clicks); Open replaces it with the trace's overview, drawn as SVG."""
    logs, empty = tmp_path / "logs", tmp_path / "empty"
    (logs / "run").mkdir(parents=True)
    empty.mkdir()
    (logs / "run" / "trace.json").write_text(json.dumps(synthetic_trace()))
    env = dict(
        os.environ,
        STEPSCOPE_SAMPLES_DIR=str(empty),
        STEPSCOPE_RUNS_DIR=str(empty),
        STEPSCOPE_CACHE_DIR=str(tmp_path / "cache"),
    )
    with _streamlit(env, ("--logdir", str(logs))) as url:
        page, dialogs = _open(browser, url)
        page.wait_for_selector(".st-key-empty_timeline .js-plotly-plot .main-svg", timeout=PAGE_TIMEOUT_MS)
        assert "Open a trace: its timeline is drawn here" in page.inner_text(".st-key-empty_timeline")
        plotly_code = "performance.getEntriesByType('resource').filter(e => /PlotlyChart[.].*js$/.test(e.name)).length"
        assert page.evaluate(plotly_code) == 1  # fetched for the frame, before any trace is open
        page.get_by_role("button", name="Open from disk", exact=True).click()
        page.wait_for_selector(
            ".st-key-overview_timeline .js-plotly-plot .scatterlayer .trace", state="attached", timeout=PAGE_TIMEOUT_MS
        )
        page.wait_for_selector(".st-key-empty_timeline", state="detached", timeout=PAGE_TIMEOUT_MS)
        overview = page.locator(".st-key-overview_timeline")
        assert "Whole run: steps, idle gaps and busy time" in overview.inner_text()
        assert overview.locator("canvas").count() == 0  # the overview is SVG, drawn without WebGL
        overview.scroll_into_view_if_needed()
        shown, texts = _hover_overview(page)
        # the label of a drawn rectangle (the one under the mouse, or a neighbour Plotly found closer when the
        # page moved a pixel between measuring and hovering): text from the figure's own hover points
        assert shown in {re.sub(r"<[^>]+>", "", t).replace(" ", "") for t in texts}, shown  # no tags
        assert page.evaluate(plotly_code) == 1
        assert not dialogs
        page.close()
