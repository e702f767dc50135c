"""Each Streamlit page run headless through streamlit.testing's AppTest.

Samples come from a temporary folder (STEPSCOPE_SAMPLES_DIR): the CPU tiny-llama
eager/compile fixtures, a synthetic GPU trace with a kernel named like an XSS
probe, and an unreadable one.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.navigation import ANALYZE_KEY, COMPARE_KEYS
from app.uploads import UPLOADS_KEY, register_upload, size_limit_text
from tests.test_app_fixtures import FIXTURE_SAMPLES, XSS_KERNEL, synthetic_trace, write_synthetic_trace

REPO = Path(__file__).resolve().parents[1]
PAGES = REPO / "app" / "views"
TIMEOUT_S = 90


@pytest.fixture
def samples(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "samples"
    folder.mkdir()
    for sample in FIXTURE_SAMPLES.iterdir():
        shutil.copytree(sample, folder / sample.name)
    write_synthetic_trace(folder, "synthetic")
    bad = folder / "zz_broken"
    bad.mkdir()
    (bad / "trace.json.gz").write_bytes(gzip.compress(b"this is not a trace"))
    monkeypatch.setenv("STEPSCOPE_SAMPLES_DIR", str(folder))
    monkeypatch.setenv("STEPSCOPE_RUNS_DIR", str(tmp_path / "runs"))
    return folder


def _page(name: str) -> AppTest:
    return AppTest.from_file(str(PAGES / name), default_timeout=TIMEOUT_S)


def _metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def _plotly_specs(at: AppTest) -> list[str]:
    return [chart.proto.spec for chart in at.get("plotly_chart")]


def test_analyze_opens_on_the_eager_sample(samples):
    at = _page("analyze.py").run()
    assert not at.exception
    assert at.session_state[ANALYZE_KEY] == "sample:cpu_tiny-llama_eager"
    metrics = _metrics(at)
    for label in ("TTFT", "ITL p50", "ITL p90", "Decode tokens/s", "Decode steps", "Kernels / decode step",
                  "Launches / decode step", "GPU busy", "GPU idle / decode step"):
        assert label in metrics
    assert metrics["Decode steps"] == "7"
    assert metrics["TTFT"].endswith("ms")
    assert len(_plotly_specs(at)) >= 5  # overview, detail, three per-step charts, gap histogram
    assert any("stepscope-markers" in s.value.replace("\\", "") for s in at.success)
    assert [b.label for b in at.get("download_button")] == ["Steps (CSV)", "Gaps (CSV)", "Summary (JSON)"]


def test_streamlit_app_defaults_to_analyze(samples):
    at = AppTest.from_file(str(REPO / "app" / "streamlit_app.py"), default_timeout=TIMEOUT_S).run()
    assert not at.exception
    assert "TTFT" in _metrics(at)


def test_trace_strings_are_escaped(samples):
    at = _page("analyze.py")
    at.session_state[ANALYZE_KEY] = "sample:synthetic"
    at.run()
    assert not at.exception
    assert _metrics(at)["Launches / decode step"] == "5"
    specs = "".join(_plotly_specs(at))
    assert "&lt;img src=x onerror=alert(1)&gt;" in specs
    assert XSS_KERNEL not in specs
    for element in list(at.markdown) + list(at.caption) + list(at.warning) + list(at.info) + list(at.error):
        assert "<img" not in element.value.replace("\\<img", "")
    tables = [t.value for t in at.table]
    assert any(XSS_KERNEL in table.index for table in tables)  # st.table shows it as plain text


def test_unreadable_sample_shows_an_error_and_the_page_keeps_working(samples):
    at = _page("analyze.py")
    at.session_state[ANALYZE_KEY] = "sample:zz_broken"
    at.run()
    assert not at.exception
    assert at.error and "zz" in at.error[0].value
    assert at.selectbox[0].value == "sample:zz_broken"
    at.selectbox[0].set_value("sample:cpu_tiny-llama_compile").run()
    assert not at.exception and not at.error
    assert "TTFT" in _metrics(at)


def test_upload_handler_accepts_a_trace_and_rejects_a_bad_file(samples):
    state: dict = {}
    bad = register_upload(state, "notes.json", b"hello, not json")
    assert bad.key is None and bad.error.startswith("notes.json: ")
    assert "\n" not in bad.error
    truncated = register_upload(state, "cut.json.gz", gzip.compress(b'{"traceEvents": []}')[:-8])
    assert truncated.key is None and "gzip" in truncated.error
    data = gzip.compress(json.dumps(synthetic_trace()).encode())
    good = register_upload(state, "mine.json.gz", data)
    assert good.error is None and good.key.startswith("upload:")
    assert len(state[UPLOADS_KEY]) == 1
    assert "MB per file" in size_limit_text()


def test_an_upload_opens_in_analyze(samples):
    data = gzip.compress(json.dumps(synthetic_trace()).encode())
    state: dict = {}
    key = register_upload(state, "mine.json.gz", data).key
    at = _page("analyze.py")
    at.session_state[UPLOADS_KEY] = state[UPLOADS_KEY]
    at.session_state[ANALYZE_KEY] = key
    at.run()
    assert not at.exception
    assert at.selectbox[0].value == key
    assert _metrics(at)["Decode steps"] == "6"


def test_compare_defaults_to_eager_vs_compile(samples):
    at = _page("compare.py").run()
    assert not at.exception
    assert at.session_state[COMPARE_KEYS] == ("sample:cpu_tiny-llama_eager", "sample:cpu_tiny-llama_compile")
    sentence = at.success[0].value.replace("\\", "")
    assert sentence.startswith("torch.compile cut ITL p50 from")
    assert "x faster" in sentence
    assert len(_plotly_specs(at)) == 3
    assert len(at.dataframe[0].value) == 9


def test_compare_a_broken_trace_shows_an_error(samples):
    at = _page("compare.py")
    at.session_state[COMPARE_KEYS] = ("sample:cpu_tiny-llama_eager", "sample:zz_broken")
    at.run()
    assert not at.exception
    assert at.error


def test_run_page_shows_the_form_and_a_collector_error(samples):
    pytest.importorskip("torch")
    at = _page("run.py").run()
    assert not at.exception
    assert {b.label for b in at.button} >= {"Run"}
    device = next(s for s in at.selectbox if s.label == "Device")
    mode = next(s for s in at.selectbox if s.label == "Mode")
    device.set_value("cpu")
    mode.set_value("cuda-graph")
    next(b for b in at.button if b.label == "Run").click().run()
    assert not at.exception
    assert at.error and "cuda-graph needs a CUDA GPU" in at.error[0].value.replace("\\", "")
