"""The log-directory picker: listing (newest first, size, format, rank), refresh, and no way out of the root.

Traces here are SYNTHETIC (built by tests/synthetic_traces.py) plus a copy of a shipped sample.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest
import streamlit as st

from stepscope.analysis.number_format import format_count
from stepscope.app import logdir
from stepscope.app.logdir import OutsideLogdirError, configured_logdir, list_folders, list_traces, resolve_within
from stepscope.app.logdir_panel import OPENED_KEY, open_trace, opened_sources
from stepscope.app.navigation import ANALYZE_KEY
from stepscope.parsers import load_trace
from tests.app_pages import page_test
from tests.synthetic_traces import doc, synthetic_generation

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "sample_traces" / "cpu_tiny-llama_eager"


def _put(path: Path, data: bytes, mtime: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, (mtime, mtime))
    return path


@pytest.fixture
def root(tmp_path) -> Path:
    base = tmp_path / "logs"
    trace = json.dumps(doc(synthetic_generation(decode_steps=3))).encode()
    ranked = json.dumps({"distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 4}, **doc([])}).encode()
    _put(base / "old.json", trace, 1_000_000)
    _put(base / "exp1" / "new.json.gz", gzip.compress(trace), 3_000_000)
    _put(base / "exp1" / "deeper" / "ranked.pt.trace.json", ranked, 2_000_000)
    _put(base / "exp2" / "worker_rank7.json", trace, 1_500_000)
    _put(base / "exp1" / "run.json", b'{"device": "cpu"}', 4_000_000)  # JSON, but not a trace
    _put(base / "exp1" / "notes.txt", b"hello", 4_000_000)
    _put(base / "exp1" / "fake.json", b"not json at all", 4_000_000)
    _put(base / "nsys.sqlite", b"SQLite format 3\x00" + bytes(100), 500_000)
    _put(base / ".hidden" / "secret.json", trace, 5_000_000)
    return base


def test_lists_traces_newest_first_with_size_format_and_rank(root):
    traces = list_traces(root)
    assert [t.rel_path for t in traces] == [
        "exp1/new.json.gz",
        "exp1/deeper/ranked.pt.trace.json",
        "exp2/worker_rank7.json",
        "old.json",
        "nsys.sqlite",
    ]
    by = {t.rel_path: t for t in traces}
    assert by["exp1/new.json.gz"].size_bytes == (root / "exp1" / "new.json.gz").stat().st_size
    assert by["exp1/new.json.gz"].format == "Kineto/Chrome JSON"  # sniffed inside the gzip
    assert by["nsys.sqlite"].format == "Nsight SQLite"
    assert by["exp1/deeper/ranked.pt.trace.json"].rank == 3  # from distributedInfo
    assert by["exp2/worker_rank7.json"].rank == 7  # from the name
    assert by["old.json"].rank is None


def test_folder_listing_includes_subfolders_only(root):
    assert list_folders(root) == ["", "exp1", "exp1/deeper", "exp2"]
    assert [t.rel_path for t in list_traces(root, "exp1")] == ["exp1/new.json.gz", "exp1/deeper/ranked.pt.trace.json"]


def test_a_new_trace_appears_on_the_next_listing(root):
    before = logdir.listing_stamp(root)
    _put(root / "exp2" / "fresh.json", json.dumps(doc(synthetic_generation(decode_steps=2))).encode(), 9_000_000)
    assert logdir.listing_stamp(root) != before
    assert list_traces(root)[0].rel_path == "exp2/fresh.json"


@pytest.mark.parametrize("bad", ["..", "../", "../logs2", "exp1/../../x", "/etc/passwd", "exp1/\x00", "/"])
def test_paths_outside_the_root_are_refused(root, bad):
    with pytest.raises(OutsideLogdirError):
        resolve_within(root, bad)
    with pytest.raises(OutsideLogdirError):
        list_traces(root, bad)


def test_inside_paths_resolve(root):
    assert resolve_within(root, "exp1/../exp2") == (root / "exp2").resolve()
    assert resolve_within(root, "") == root.resolve()


def test_symlinks_out_of_the_root_are_not_followed(root, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "leak.json").write_text(json.dumps(doc(synthetic_generation(decode_steps=2))))
    (root / "link_dir").symlink_to(outside, target_is_directory=True)
    (root / "link_file.json").symlink_to(outside / "leak.json")
    names = [t.rel_path for t in list_traces(root)]
    assert not any("leak" in n or "link" in n for n in names)
    assert "link_dir" not in list_folders(root)
    with pytest.raises(OutsideLogdirError):
        resolve_within(root, "link_dir/leak.json")
    with pytest.raises(OutsideLogdirError):
        open_trace({}, "link_file.json", root)


def test_open_trace_records_a_source_with_a_checked_path(root):
    state: dict = {}
    key = open_trace(state, "exp1/new.json.gz", root)
    assert state[ANALYZE_KEY] == key == "logdir:exp1/new.json.gz"
    (source,) = opened_sources(state, root)
    assert source.path == (root / "exp1" / "new.json.gz").resolve() and source.origin == "logdir"
    state[OPENED_KEY].append("../../etc/passwd")  # a tampered state entry is dropped, not opened
    assert len(opened_sources(state, root)) == 1


def test_logdir_from_argv_or_env(root, monkeypatch):
    assert configured_logdir(["--logdir", str(root)]) == root.resolve()
    assert configured_logdir([f"--logdir={root}"]) == root.resolve()
    monkeypatch.setenv("STEPSCOPE_LOGDIR", str(root))
    assert configured_logdir([]) == root.resolve()
    monkeypatch.setenv("STEPSCOPE_LOGDIR", str(root / "missing"))
    assert configured_logdir([]) is None


def test_analyze_page_opens_a_trace_from_the_logdir(tmp_path, monkeypatch):
    """AppTest: the picker lists the folder, Open analyses the file from disk (through the cache)."""
    if not SAMPLE.exists():
        pytest.skip("no shipped sample")
    logs = tmp_path / "logs"
    shutil.copytree(SAMPLE, logs / "eager")
    monkeypatch.setenv("STEPSCOPE_LOGDIR", str(logs))
    monkeypatch.setenv("STEPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    st.cache_data.clear()  # an earlier test may hold the same sample's Timeline in Streamlit's in-memory cache
    at = page_test("analyze", 120).run()
    assert not at.exception
    pick = at.selectbox(key="logdir_pick")
    assert pick.value == "eager/trace.json.gz"
    at.button(key="logdir_open").click().run()
    assert not at.exception
    assert at.session_state[ANALYZE_KEY] == "logdir:eager/trace.json.gz"
    (trace_box,) = [s for s in at.selectbox if s.label == "Trace"]
    assert trace_box.value == "logdir:eager/trace.json.gz"
    events = len(load_trace(logs / "eager" / "trace.json.gz").events)
    assert any(f"{format_count(events)} events" in c.value for c in at.caption)  # the header of the opened trace
    assert list((tmp_path / "cache" / "timelines").iterdir())  # read through the on-disk cache


def test_stepscope_app_passes_its_logdir_the_way_the_app_reads_it(tmp_path, monkeypatch):
    """`stepscope app --logdir DIR` starts `streamlit run app/streamlit_app.py ... -- --logdir DIR`."""
    import argparse

    from stepscope.app.cli.webapp import streamlit_command
    from stepscope.app.logdir import LOGDIR_ENV

    monkeypatch.delenv(LOGDIR_ENV, raising=False)
    (tmp_path / "logs").mkdir()
    command = streamlit_command(argparse.Namespace(logdir=str(tmp_path / "logs"), port=8600, headless=True))
    script_args = command[command.index("--") + 1 :]  # what the script sees as sys.argv[1:]
    assert script_args == ["--logdir", str((tmp_path / "logs").resolve())]
    assert command.index("--server.port") < command.index("--")  # Streamlit's own options stay before the script's
    assert configured_logdir(script_args) == (tmp_path / "logs").resolve()


def test_landing_page_shows_the_timeline_frame_until_a_trace_is_opened(tmp_path, monkeypatch):
    """AppTest: with nothing open, Analyze draws the empty timeline frame (a real Plotly chart, so the browser
    loads Plotly's code before the click); opening a trace replaces it with the trace's overview."""
    from stepscope.exporters.figures.timeline import EMPTY_TITLE, OVERVIEW_TITLE

    logs, empty = tmp_path / "logs", tmp_path / "empty"
    (logs / "run").mkdir(parents=True)
    empty.mkdir()
    (logs / "run" / "trace.json").write_text(json.dumps(doc(synthetic_generation(decode_steps=4))))
    for name, value in (
        ("STEPSCOPE_LOGDIR", logs),
        ("STEPSCOPE_CACHE_DIR", tmp_path / "cache"),
        ("STEPSCOPE_SAMPLES_DIR", empty),
        ("STEPSCOPE_RUNS_DIR", empty),
    ):
        monkeypatch.setenv(name, str(value))
    st.cache_data.clear()

    def charts(at) -> list[dict]:
        return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]

    at = page_test("analyze", 120).run()
    assert not at.exception
    (frame,) = charts(at)
    assert frame["layout"]["title"]["text"].startswith(EMPTY_TITLE)
    (message,) = frame["data"]  # no data: one line of text saying what to do
    assert message["mode"] == "text" and "Open a trace" in message["text"][0]
    assert any("open one from the log directory in the sidebar" in info.value for info in at.info)
    at.button(key="logdir_open").click().run()
    assert not at.exception
    titles = [chart["layout"]["title"]["text"] for chart in charts(at)]
    assert not any(t.startswith(EMPTY_TITLE) for t in titles)
    (overview,) = [c for c in charts(at) if c["layout"]["title"]["text"].startswith(OVERVIEW_TITLE)]
    assert overview["data"] and all(trace["type"] == "scatter" for trace in overview["data"])  # SVG, no WebGL
