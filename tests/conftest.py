"""Shared fixtures. Real traces are shipped in tests/data/real (sources and licenses: its PROVENANCE.md).

A test that needs a file that is absent skips on a developer's machine but fails under CI (env CI set), so a
broken checkout can never pass by skipping.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

REAL_TRACES = ROOT / "tests" / "data" / "real"
# The on-disk trace cache of everything the tests run goes to a throwaway folder, not ~/.cache/stepscope.
os.environ.setdefault("STEPSCOPE_CACHE_DIR", tempfile.mkdtemp(prefix="stepscope-test-cache-"))


def missing(reason: str) -> None:
    """Skip locally; fail under CI, where nothing a test needs may be missing."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set: a missing test input is a failure)")
    pytest.skip(reason)


def real_trace(name: str) -> Path:
    path = REAL_TRACES / name
    if not path.exists():
        missing(f"{path} is not in this checkout")
    return path


@pytest.fixture
def real_traces_dir() -> Path:
    if not REAL_TRACES.is_dir():
        missing(f"{REAL_TRACES} is not in this checkout")
    return REAL_TRACES


@pytest.fixture(scope="module")
def browser():
    """Debian's headless Chromium (tests/test_browser.py's arguments), one per test module; never a browser that
    Playwright downloads."""
    from tests.test_browser import CHROMIUM, CHROMIUM_ARGS, _require_browser

    _require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()
