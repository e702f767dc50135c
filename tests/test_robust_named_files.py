"""Issue 26, class 2: every file Stepscope reads by name is a regular file, read with a size bound.

SYNTHETIC inputs built here: a run.json, a categories file, a model config, a trace, a rank member, a sweep record
and cache entries that are FIFOs (an `open()` would block until a writer comes: forever) or links to /dev/zero
(a read never ends). Each command answers within 20 s under 3 GB of address space (tests/bounded_cli.py).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from stepscope.contracts.run_record import read_run_record
from stepscope.contracts.safe_read import FileTooLargeError, NotRegularFileError, open_regular, read_regular
from stepscope.contracts.sweep_record import read_sweep_record
from stepscope.parsers import TraceError, load_trace
from stepscope.parsers.ranks import find_trace_files
from tests.bounded_cli import assert_sane_outcome, in_child, run_bounded
from tests.conftest import ROOT
from tests.synthetic_traces import synthetic_generation, write

SAMPLE = ROOT / "sample_traces" / "cpu_tiny-llama_eager"
NOT_FILES = ("fifo", "dev-zero")


def _plant(path: Path, kind: str) -> Path:
    """A FIFO with no writer, or a symlink to /dev/zero, at `path`."""
    if path.exists() or path.is_symlink():
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    return path


@pytest.fixture
def trace_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    folder.mkdir()
    shutil.copy(SAMPLE / "trace.json.gz", folder / "trace.json.gz")
    return folder


# --- the helper


@pytest.mark.parametrize("kind", NOT_FILES)
def test_the_helper_refuses_what_is_not_a_regular_file_without_blocking(tmp_path, kind):
    planted = _plant(tmp_path / "x.json", kind)
    with pytest.raises(NotRegularFileError, match="not a regular file"):
        in_child(5, read_regular, planted, 1 << 20)
    with pytest.raises(NotRegularFileError):
        in_child(5, open_regular, tmp_path)  # a folder opens read-only on Linux: fstat refuses it


def test_the_helper_bounds_the_read(tmp_path):
    path = tmp_path / "big.json"
    path.write_bytes(b"x" * 1001)
    assert read_regular(path, 1001) == b"x" * 1001
    with pytest.raises(FileTooLargeError):
        read_regular(path, 1000)


# --- run.json beside a trace


@pytest.mark.parametrize("kind", NOT_FILES)
def test_run_json_that_is_not_a_file_is_as_if_absent(trace_dir, tmp_path, kind):
    plain = run_bounded("analyze", trace_dir / "trace.json.gz", "--json", cache_dir=tmp_path / "cache-a")
    _plant(trace_dir / "run.json", kind)
    assert in_child(5, read_run_record, trace_dir / "trace.json.gz") is None
    for cache in ("cache-b", "cache-b"):  # cold, then warm (the cached answer's key reads the sidecar too)
        outcome = run_bounded("analyze", trace_dir / "trace.json.gz", "--json", cache_dir=tmp_path / cache)
        assert_sane_outcome(outcome)
        assert outcome.status == 0 and json.loads(outcome.stdout) == json.loads(plain.stdout)


# --- categories, model config, sweep record


@pytest.mark.parametrize("kind", NOT_FILES)
def test_categories_file_that_is_not_a_file_is_one_error_line(trace_dir, tmp_path, kind):
    rules = _plant(tmp_path / "rules.toml", kind)
    outcome = run_bounded("analyze", trace_dir / "trace.json.gz", "--categories", rules, cache_dir=tmp_path / "c")
    assert_sane_outcome(outcome)
    assert outcome.status == 2 and "not a regular file" in outcome.error_lines[0]


def test_categories_file_far_too_large_is_one_error_line(trace_dir, tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text("# " + "x" * (2 << 20) + "\n")
    outcome = run_bounded("analyze", trace_dir / "trace.json.gz", "--categories", rules, cache_dir=tmp_path / "c")
    assert_sane_outcome(outcome)
    assert outcome.status == 2 and "larger than" in outcome.error_lines[0]


@pytest.mark.parametrize("kind", NOT_FILES)
def test_model_config_that_is_not_a_file_is_one_error_line(trace_dir, tmp_path, kind):
    config = _plant(tmp_path / "config.json", kind)
    (trace_dir / "run.json").unlink(missing_ok=True)
    outcome = run_bounded("analyze", trace_dir / "trace.json.gz", "--model", config, cache_dir=tmp_path / "c")
    assert_sane_outcome(outcome)
    assert outcome.status == 2


@pytest.mark.parametrize("kind", NOT_FILES)
def test_sweep_record_that_is_not_a_file_is_a_value_error(tmp_path, kind):
    with pytest.raises(ValueError, match="sweep"):
        in_child(5, read_sweep_record, _plant(tmp_path / "sweep.json", kind))


# --- the trace itself and rank members


@pytest.mark.parametrize("kind", NOT_FILES)
def test_trace_that_is_not_a_file_is_one_error_line(tmp_path, kind):
    trace = _plant(tmp_path / "trace.json", kind)
    with pytest.raises(TraceError, match="not a regular file"):
        in_child(5, load_trace, trace)
    for extra in ((), ("--no-cache",)):
        outcome = run_bounded("analyze", trace, "--json", *extra, cache_dir=tmp_path / "c")
        assert_sane_outcome(outcome)
        assert outcome.status == 2 and "not a regular file" in outcome.error_lines[0]


def test_rank_member_that_is_not_a_file_is_not_a_member(tmp_path):
    folder = tmp_path / "ranks"
    folder.mkdir()
    for rank in (0, 1):
        write(folder / f"synthetic-rank-{rank}.json", synthetic_generation(decode_steps=3))
    _plant(folder / "synthetic-rank-2.json", "fifo")
    _plant(folder / "synthetic-rank-3.json.gz", "dev-zero")
    assert [p.name for p in find_trace_files(folder)] == ["synthetic-rank-0.json", "synthetic-rank-1.json"]
    outcome = run_bounded("analyze", folder, "--json", cache_dir=tmp_path / "c")
    assert_sane_outcome(outcome)
    assert outcome.status == 0 and len(json.loads(outcome.stdout)["ranks"]) == 2


# --- cache entries


@pytest.mark.parametrize("kind", NOT_FILES)
def test_cache_entries_that_are_not_files_are_misses(trace_dir, tmp_path, kind):
    cache = tmp_path / "cache"
    first = run_bounded("analyze", trace_dir / "trace.json.gz", "--json", cache_dir=cache)
    assert first.status == 0, first.stderr
    entries = [p for sub in ("stat", "results", "timelines") for p in (cache / sub).iterdir()]
    assert {p.parent.name for p in entries} == {"stat", "results", "timelines"}
    for entry in entries:
        _plant(entry, kind)
    again = run_bounded("analyze", trace_dir / "trace.json.gz", "--json", cache_dir=cache)
    assert_sane_outcome(again)
    assert again.status == 0 and json.loads(again.stdout) == json.loads(first.stdout)


# --- batch outputs read back (resume, the Fleet page)


def test_batch_output_table_that_is_not_a_file_is_one_clear_line(trace_dir, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    _plant(out / "steps.parquet", "fifo")
    outcome = run_bounded("batch", trace_dir, "--out", out, "--workers", "1", cache_dir=tmp_path / "c", timeout=60)
    assert_sane_outcome(outcome)
    assert outcome.status == 2 and "not a regular file: a FIFO" in outcome.error_lines[0]


@pytest.mark.parametrize("kind", NOT_FILES)
def test_fleet_table_that_is_not_a_file_is_a_value_error(tmp_path, kind):
    from stepscope.batch.fleet import TRACES_TABLE, load_fleet

    _plant(tmp_path / TRACES_TABLE, kind)
    with pytest.raises(ValueError, match="not a regular file"):
        in_child(10, load_fleet, tmp_path)
