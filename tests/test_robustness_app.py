"""The app's exposure and upload path (issue 16, class 13 and "who can reach it"), through AppTest.

Listening address comes from Streamlit's config (.streamlit/config.toml pins 127.0.0.1); tests set
server.address to 0.0.0.0 to play an app started with an explicit --server.address.
"""

from __future__ import annotations

import gzip
import json
import tomllib
from pathlib import Path

import pytest
from streamlit import config as st_config
from streamlit.testing.v1 import AppTest

from stepscope.app import exposure
from stepscope.app.navigation import ANALYZE_KEY
from stepscope.app.uploads import UPLOADS_KEY, register_upload
from tests.app_pages import page_test
from tests.app_samples import sample_folder, synthetic_trace

REPO = Path(__file__).resolve().parents[1]
TIMEOUT_S = 90


@pytest.fixture
def samples(tmp_path, monkeypatch) -> Path:
    folder = sample_folder(tmp_path, monkeypatch)
    monkeypatch.delenv(exposure.ALLOW_REMOTE_ENV, raising=False)
    return folder


@pytest.fixture
def listening_everywhere():
    before = st_config.get_option("server.address")
    st_config.set_option("server.address", "0.0.0.0")
    exposure._warned = False
    yield
    st_config.set_option("server.address", before)


def _trace_box(at):
    """Analyze's trace picker (in the sidebar since issue 30)."""
    return next(s for s in at.selectbox if s.label == "Trace")


def test_the_app_listens_on_localhost_by_default():
    settings = tomllib.loads((REPO / ".streamlit" / "config.toml").read_text())
    assert settings["server"]["address"] == "127.0.0.1"
    assert exposure.reachable_beyond_localhost() is False  # pytest runs from the repo: that config is read


# --- class 13: any reader failure is one line and the open trace stays open


@pytest.mark.parametrize(
    "error",
    [
        ValueError("could not convert string to float: 'x'"),
        OverflowError("big"),
        TypeError("'<' not supported"),
        KeyError("deviceId"),
    ],
)
def test_upload_handler_turns_any_reader_failure_into_one_line(samples, monkeypatch, error):
    def broken(*args, **kwargs):
        raise error

    monkeypatch.setattr("stepscope.app.uploads.load_bytes", broken)
    result = register_upload({}, "bad.json", b'{"traceEvents": []}')
    assert result.key is None and "\n" not in result.error
    assert result.error.startswith("bad.json: could not be read (" + type(error).__name__)


def test_a_failed_upload_keeps_the_previous_trace_open(samples, monkeypatch):
    state: dict = {}
    good = register_upload(state, "mine.json.gz", gzip.compress(json.dumps(synthetic_trace()).encode())).key
    at = page_test("analyze", TIMEOUT_S)
    at.session_state[UPLOADS_KEY] = state[UPLOADS_KEY]
    at.session_state[ANALYZE_KEY] = good
    at.run()
    assert not at.exception and _trace_box(at).value == good

    with monkeypatch.context() as patch:
        patch.setattr("stepscope.app.uploads.load_bytes", lambda *a, **k: (_ for _ in ()).throw(ValueError("bad")))
        failed = register_upload(state, "other.json", b"{}")  # what the page's uploader handler calls
    assert failed.key is None and failed.error.startswith("other.json: could not be read (ValueError: bad)")
    at.session_state[UPLOADS_KEY] = state[UPLOADS_KEY]
    at.run()
    assert not at.exception
    assert at.session_state[ANALYZE_KEY] == good and _trace_box(at).value == good
    assert len(at.session_state[UPLOADS_KEY]) == 1


# --- who can reach it


def test_beyond_localhost_the_run_page_is_gone_and_a_warning_shows(samples, listening_everywhere, capsys):
    at = AppTest.from_file(str(REPO / "app" / "streamlit_app.py"), default_timeout=TIMEOUT_S).run()
    assert not at.exception
    assert any("listens on 0.0.0.0" in w.value for w in at.sidebar.warning)
    assert "warning: Stepscope listens on 0.0.0.0" in capsys.readouterr().err
    run = page_test("run", TIMEOUT_S).run()
    assert not run.exception
    assert run.error and "Runs are off" in run.error[0].value
    assert not [b for b in run.button if b.label == "Run"]
    assert not run.text_input  # no path input at all


def test_beyond_localhost_the_operator_can_turn_runs_on(samples, listening_everywhere, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setenv(exposure.ALLOW_REMOTE_ENV, "1")
    run = page_test("run", TIMEOUT_S).run()
    assert not run.exception and not run.error
    assert [b for b in run.button if b.label == "Run"]


def test_on_localhost_the_run_page_is_there(samples):
    at = AppTest.from_file(str(REPO / "app" / "streamlit_app.py"), default_timeout=TIMEOUT_S).run()
    assert not at.exception and not at.sidebar.warning


def test_a_model_folder_outside_the_roots_is_refused(samples, tmp_path, monkeypatch):
    pytest.importorskip("torch")
    root = tmp_path / "models"
    (root / "m").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (root / "escape").symlink_to(tmp_path / "elsewhere")
    monkeypatch.setenv(exposure.MODELS_DIR_ENV, str(root))
    assert exposure.inside_roots(root / "m", exposure.model_roots())
    assert not exposure.inside_roots(root / "m" / ".." / ".." / "elsewhere", exposure.model_roots())
    assert not exposure.inside_roots(root / "escape", exposure.model_roots())  # a symlink out is out
    at = page_test("run", TIMEOUT_S).run()
    next(r for r in at.radio if r.label == "Model").set_value("local model")
    next(t for t in at.text_input if t.label == "Local model folder").set_value("/etc")
    next(b for b in at.button if b.label == "Run").click().run()
    assert not at.exception
    assert at.error and "Run refused: the model folder must be inside" in at.error[0].value.replace("\\", "")


def test_runs_are_bounded(samples, monkeypatch):
    pytest.importorskip("torch")
    monkeypatch.setenv("STEPSCOPE_MAX_BATCH", "4")
    at = page_test("run", TIMEOUT_S).run()
    batch = next(n for n in at.number_input if n.label == "Batch")
    new_tokens = next(n for n in at.number_input if n.label == "New tokens")
    assert batch.max == 4 and new_tokens.max == 1024
    assert exposure.run_spec_problem(16, 5, 16, None).startswith("batch must be 1..4")
    assert exposure.run_spec_problem(16, 4, 16, None) is None
