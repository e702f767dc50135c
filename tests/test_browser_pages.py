"""What an expert sees first, in a real browser: every page at 1500 px wide (full page) and at 1280x720 (the first
screen), on the shipped samples and on two real GPU traces opened from `--logdir` (tests/data/real).

Screenshots land in test-artifacts/pages/ (README's docs/screenshots are copied from them by hand). Over the text
of every page: no number with more than 4 significant digits and no raw "None" or "nan"; the CPU sample's cards
say nothing of a GPU; Compare lists a trace opened from the log directory. Uses /usr/bin/chromium through
Playwright (never a downloaded browser), as tests/test_browser.py does.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.test_browser import PAGE_TIMEOUT_MS, REPO, _require_browser, _streamlit

pytestmark = pytest.mark.browser

REAL = REPO / "tests" / "data" / "real"
REAL_TRACES = (
    "tracelens_vllm_gptoss_decode_fullgraph_rocm.json.gz",
    "tracelens_hf_qwen1.5-0.5b_forward_h100.json.gz",
)
ARTIFACTS = REPO / "test-artifacts" / "pages"
WIDE = {"width": 1500, "height": 1000}
SMALL = {"width": 1280, "height": 720}
MAX_SHOT_PX = 16_000
# a number as a person reads it: digits with optional thousands commas and decimals, not part of a word, a name
# (qwen1.5-0.5b, rank-0, sm90), a tile (128x128), a date (2026-12-01) or a time of day (18:34)
# an identifier after its noun (thread 20463, pid 4711) is a name too, not a quantity
NUMBER = re.compile(r"(?<![\w.\-/:#])(?<!thread )(?<!pid )(\d[\d,]*(?:\.\d+)?)(?![\w\-/:]|\.\d)")
RAW_MISSING = re.compile(r"(?<![\w-])(None|nan|NaN)(?![\w-])")


def significant_digits(number: str) -> int:
    """Significant digits of a number as written: 0.00123 -> 3, 1,674 -> 4, 3367344000 -> 7, 12.50 -> 4."""
    digits = number.replace(",", "")
    if "." in digits:
        return len(digits.replace(".", "").lstrip("0"))
    return len(digits.lstrip("0").rstrip("0")) or 1


def too_precise(text: str, limit: int = 4) -> list[str]:
    return [m for m in NUMBER.findall(text) if significant_digits(m) > limit]


def test_the_number_check_itself():
    assert too_precise("ITL 7.6494 ms, 463951.544 us, span_ns 3367344000") == ["7.6494", "463951.544", "3367344000"]
    assert too_precise("1.67k tok/s · 6.22 ms · 1,674 · 68.4% · qwen1.5-0.5b · 128x128 · 2026-12-01 18:34") == []
    assert too_precise("host ops (thread 20463) · 181130.0 tok/s") == ["181130.0"]
    assert RAW_MISSING.findall("ITL None ms, nan us; Nonexistent, none") == ["None", "nan"]


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    _require_browser()
    pytest.importorskip("playwright.sync_api")
    root = tmp_path_factory.mktemp("pages")
    samples, logs, fleet, runs = root / "samples", root / "logs", root / "fleet", root / "runs"
    shutil.copytree(REPO / "sample_traces", samples, ignore=shutil.ignore_patterns("README.md"))
    logs.mkdir()
    for name in REAL_TRACES:
        shutil.copy(REAL / name, logs / name)
    runs.mkdir()
    env = dict(
        os.environ,
        STEPSCOPE_SAMPLES_DIR=str(samples),
        STEPSCOPE_RUNS_DIR=str(runs),
        STEPSCOPE_FLEET_ROOT=str(fleet),
        STEPSCOPE_CACHE_DIR=str(root / "cache"),
    )
    batch_in = root / "batch_in"
    shutil.copytree(samples, batch_in)
    for name in REAL_TRACES:
        shutil.copy(REAL / name, batch_in / name)
    subprocess.run(
        [sys.executable, "-m", "app.cli", "batch", str(batch_in), "--out", str(fleet / "batch_samples_and_real")],
        cwd=REPO,
        env=env,
        check=True,
        capture_output=True,
        timeout=600,
    )
    with _streamlit(env, ("--logdir", str(logs))) as url:
        yield url


def _settled(page) -> None:
    """Wait until Streamlit has finished the script run and Plotly has drawn."""
    page.wait_for_selector("[data-testid='stApp']", timeout=PAGE_TIMEOUT_MS)
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=PAGE_TIMEOUT_MS * 3
    )
    page.wait_for_timeout(2500)


def _shoot(page, name: str) -> str:
    """Full page at 1500 px, then the first screen at 1280x720; returns the page's text."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size(WIDE)
    page.wait_for_timeout(1000)
    # Streamlit scrolls its main block, not the document: the window is made as tall as the content instead
    height = page.evaluate("document.querySelector(\"[data-testid='stMain']\").scrollHeight")
    page.set_viewport_size({"width": WIDE["width"], "height": min(max(int(height), 720), MAX_SHOT_PX)})
    page.wait_for_timeout(1500)
    page.screenshot(path=str(ARTIFACTS / f"{name}_1500.png"))
    text = page.inner_text("body")
    page.set_viewport_size(SMALL)
    page.wait_for_timeout(1500)
    page.evaluate("document.querySelector(\"[data-testid='stMain']\").scrollTo(0, 0)")
    page.screenshot(path=str(ARTIFACTS / f"{name}_1280x720.png"))
    page.set_viewport_size(WIDE)
    return text


def _check_text(text: str, where: str) -> None:
    assert not too_precise(text), f"{where}: numbers with more than 4 significant digits: {too_precise(text)[:10]}"
    assert not RAW_MISSING.findall(text), f"{where}: raw missing values: {RAW_MISSING.findall(text)[:10]}"


def _pick(page, label: str, option: str) -> None:
    """Choose the option containing `option` in the selectbox labelled `label` (again when a rerun of the page, or
    of the log directory's self-refreshing listing, closed the list before the click)."""
    box = page.locator("[data-testid='stSelectbox']").filter(has_text=label).first
    for attempt in range(4):
        box.click()
        choice = page.get_by_role("option").filter(has_text=option).first
        try:
            choice.wait_for(timeout=5000)
            choice.click(timeout=5000)
            break
        except Exception:  # playwright's TimeoutError: the list closed; open it again
            if attempt == 3:
                raise
            page.keyboard.press("Escape")
    _settled(page)


def _options(page, label: str) -> list[str]:
    """The options of the selectbox labelled `label` (its list opened, read, closed again)."""
    page.locator("[data-testid='stSelectbox']").filter(has_text=label).first.click()
    page.get_by_role("option").first.wait_for(timeout=10_000)
    texts = page.get_by_role("option").all_inner_texts()
    page.keyboard.press("Escape")
    return texts


def _go(page, title: str) -> None:
    """Switch page through the sidebar (the same session: a new URL would start a new one)."""
    page.get_by_role("link", name=title).first.click()
    _settled(page)


def _open_from_logdir(page, name: str) -> None:
    _pick(page, "Trace (newest first)", name)
    page.get_by_role("button", name="Open from disk", exact=True).click()
    _settled(page)
    page.wait_for_selector("[data-testid='stMetric']", timeout=PAGE_TIMEOUT_MS)
    _settled(page)


def _cards_text(page) -> str:
    return " ".join(page.locator("[data-testid='stMetric']").all_inner_texts())


def test_every_page_as_an_expert_sees_it(browser, app):
    page = browser.new_page(viewport=WIDE)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(app, timeout=PAGE_TIMEOUT_MS)
    page.wait_for_selector("[data-testid='stMetric']", timeout=PAGE_TIMEOUT_MS)
    _settled(page)
    problems: list[str] = []

    def check(name: str) -> str:
        text = _shoot(page, name)
        try:
            _check_text(text, name)
        except AssertionError as exc:
            problems.append(str(exc))
        return text

    check("analyze_sample")
    cards = _cards_text(page)
    if "GPU" in cards:
        problems.append(f"the CPU sample's cards mention a GPU: {cards}")
    _open_from_logdir(page, "vllm_gptoss")
    check("analyze_vllm_gptoss")
    _open_from_logdir(page, "hf_qwen")
    check("analyze_hf_qwen")
    _go(page, "Compare")
    check("compare_sample")
    _pick(page, "Baseline (A)", "vllm_gptoss")
    _pick(page, "Changed (B)", "hf_qwen")
    check("compare_real")
    listed = _options(page, "Baseline (A)")
    if not any("vllm_gptoss" in o and "(log directory)" in o for o in listed):
        problems.append(f"Compare does not list the traces opened from the log directory: {listed}")
    _go(page, "Ranks")
    check("ranks")
    _go(page, "Fleet")
    check("fleet")
    _go(page, "Run")
    page.get_by_role("button", name="Run", exact=True).first.wait_for(timeout=PAGE_TIMEOUT_MS * 3)  # torch imported
    _settled(page)
    check("run")
    assert not dialogs
    assert not problems, "\n".join(problems)
    page.close()
