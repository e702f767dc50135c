"""A serving engine's profile folder through every door (issue 41): `analyze DIR`, the log directory's picker, an
upload of the folder's files together, Compare, batch and the HTML report give one answer, the one the front door
gives the folder (analysis.front_door.open_folder). On real vLLM captures (tests/data/captures/vllm, README there)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from stepscope.analysis.front_door import TraceBytes, open_folder
from stepscope.app.logdir import RunFolder, scan_traces
from stepscope.app.logdir_panel import open_trace, opened_sources
from stepscope.app.source_loading import load_source
from stepscope.app.trace_sources import all_sources
from stepscope.app.uploads import RUN_PREFIX, register_upload_run, upload_run_names

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = ROOT / "tests" / "data" / "captures" / "vllm"
SERVED = CAPTURES / "long_defaults_detailed"  # one worker and its API server's trace (with its request frames)
NO_FRONT_END = CAPTURES / "no_front_end"


def _plain(obj) -> dict:
    return json.loads(json.dumps(obj))


def _cli(*args) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "app.cli", *map(str, args), "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def cli_answer() -> dict:
    return _cli("analyze", SERVED)


@pytest.fixture()
def logs(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "logs"
    shutil.copytree(SERVED, root / "served")
    shutil.copytree(NO_FRONT_END, root / "alone")
    monkeypatch.setenv("STEPSCOPE_LOGDIR", str(root))
    monkeypatch.setenv("STEPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    return root


def test_analyze_dir_reads_the_worker_with_its_front_end(cli_answer):
    assert cli_answer["front_end"] is not None and cli_answer["requests"] == 3
    assert cli_answer["summary"]["served"] is True and cli_answer["summary"]["requests"] == cli_answer["requests"]


def test_the_log_directory_lists_the_folder_as_one_run_and_opens_it_as_analyze_dir_does(logs, cli_answer):
    entries = scan_traces(logs).entries
    runs = [e for e in entries if isinstance(e, RunFolder)]
    assert [r.rel_path for r in runs] == ["served"]  # its worker and API server's files: one entry
    assert runs[0].workers == 1 and len(runs[0].files) == 2
    assert not any(getattr(e, "rel_path", "").startswith("served/") for e in entries if e not in runs)
    assert [e.rel_path for e in entries if e not in runs] == [
        p.relative_to(logs).as_posix() for p in logs.glob("alone/*")
    ]
    state: dict = {}
    open_trace(state, "served/", logs)
    (source,) = opened_sources(state, logs)
    assert source.path == (logs / "served").resolve()
    loaded = load_source(source, state)
    assert _plain(loaded.report) == cli_answer


def test_files_uploaded_together_open_as_one_run_as_analyze_dir_does(cli_answer):
    state: dict = {}
    files = [(p.name, p.read_bytes()) for p in sorted(SERVED.iterdir())]
    result = register_upload_run(state, files)
    assert result.error is None and result.key.startswith(RUN_PREFIX)
    (source,) = [s for s in all_sources({}, upload_run_names(state)) if s.key == result.key]
    assert _plain(load_source(source, state).report) == cli_answer
    # one file of the pair is a trace of its own (no front end), as before
    alone = open_folder([TraceBytes(files[0][0], files[0][1])])
    assert alone.report["front_end"] is None


def test_compare_takes_two_serving_folders_and_reads_each_as_analyze_dir_does(tmp_path, cli_answer):
    out = _cli("compare", SERVED, CAPTURES / "saturated_shapes_stacks")
    assert _plain(out["a"]) == cli_answer["summary"]
    keys = {m["key"] for m in out["metrics"]}
    assert {"requests", "ttft_p90_ms", "run_tokens_per_s"} <= keys  # the request figures side by side
    requests = next(m for m in out["metrics"] if m["key"] == "requests")
    assert (requests["a"], requests["b"]) == (3, 7)


def test_batch_takes_the_folder_as_one_input_with_its_request_figures(tmp_path, cli_answer):
    from stepscope.batch.inputs import discover, keyed_inputs
    from stepscope.batch.work import analyze_one

    source = tmp_path / "runs"
    shutil.copytree(SERVED, source / "served")
    inputs, unreadable = keyed_inputs(discover(str(source)))
    assert not unreadable and [Path(i.path).name for i in inputs] == ["served"]
    result = analyze_one(inputs[0].key, inputs[0].path, inputs[0].size_bytes)
    (row,) = result["traces"]
    assert row["status"] == "ok"
    summary = cli_answer["summary"]
    assert row["requests"] == cli_answer["requests"]
    assert row["ttft_ms"] == pytest.approx(summary["ttft_ms"])
    assert row["ttft_p90_ms"] == pytest.approx(summary["ttft_ms_dist"]["p90"])
    assert row["itl_p50_ms"] == pytest.approx(summary["itl_ms"]["p50"])
    assert row["run_tokens_per_s"] == pytest.approx(summary["run_tokens_per_s"])
    assert len(result["steps"]["step"]) == len(cli_answer["steps"])


def test_the_html_report_has_a_requests_section(tmp_path, cli_answer):
    out = tmp_path / "served.html"
    subprocess.run(
        [sys.executable, "-m", "app.cli", "report", str(SERVED), "-o", str(out)],
        cwd=ROOT,
        check=True,
        timeout=600,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    text = out.read_text()
    assert f"Requests ({cli_answer['requests']})" in text
    assert "TTFT from" in text and "arrival (API server)" in text  # the table, and where each TTFT is measured from
    assert "a_request_lanes" in text and "a_request_dists" in text  # the lanes and the distributions


def test_the_compare_page_offers_each_serving_folder_as_one_run(logs, cli_answer):
    """Compare's pickers list the log directory's runs as one entry each, opened as analyze DIR opens them."""
    from stepscope.analysis.compare import compare
    from stepscope.app.views.compare import session_sources

    state: dict = {}
    runs = [s for s in session_sources(state) if s.origin == "logdir" and s.path.is_dir()]
    assert [s.label for s in runs] == ["served/"]
    loaded = load_source(runs[0], state)
    assert _plain(loaded.report) == cli_answer
    other = load_source(next(s for s in session_sources(state) if s.label.startswith("alone/")), state)
    result = compare(loaded.analysis, other.analysis, "served", "alone")
    row = result.metrics.set_index("metric").loc["requests"]
    assert row["a"] == cli_answer["requests"] and np.isnan(row["b"])  # the worker alone cannot count them
