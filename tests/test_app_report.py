"""Analyze and Compare offer the HTML report as a download, built only when asked (AppTest, headless)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.app_pages import page_test

REPO = Path(__file__).resolve().parents[1]
PAGES = REPO / "app" / "views"
SAMPLES = REPO / "sample_traces"


@pytest.fixture
def samples(tmp_path, monkeypatch) -> Path:
    if not any(SAMPLES.glob("*/trace.json.gz")):
        pytest.skip("sample traces are not here")
    folder = tmp_path / "samples"
    for sample in SAMPLES.iterdir():
        if sample.is_dir():
            shutil.copytree(sample, folder / sample.name)
    monkeypatch.setenv("STEPSCOPE_SAMPLES_DIR", str(folder))
    monkeypatch.setenv("STEPSCOPE_RUNS_DIR", str(tmp_path / "runs"))
    return folder


def _download_labels(at: AppTest) -> list[str]:
    return [b.label for b in at.get("download_button")]


@pytest.mark.parametrize(("page", "what"), [("analyze.py", "this trace"), ("compare.py", "this comparison")])
def test_report_is_made_on_request(samples, page, what):
    at = page_test(page, 120).run()
    assert not at.exception
    assert not any(label.startswith("Download HTML report") for label in _download_labels(at))  # not before asked
    prepare = next(b for b in at.button if b.label == f"Prepare HTML report of {what}")
    prepare.click().run()
    assert not at.exception
    report = [label for label in _download_labels(at) if label.startswith("Download HTML report")]
    assert len(report) == 1
    size_mb = float(report[0].split("(")[1].split(" MB")[0])
    assert 0.5 < size_mb <= (1.5 if page == "analyze.py" else 3.0)  # plotly.js inside (packed), within the bound
    assert not any(b.label.startswith("Prepare HTML report") for b in at.button)
