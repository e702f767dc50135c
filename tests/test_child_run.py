"""Issue 39: profiled generation from the Run page runs in a child process (collectors.child): its progress comes
back stage by stage, a stop or the timeout ends it at once, its failure is one CollectorError line, and the
asking process stays free (it only waits on a pipe)."""

from __future__ import annotations

import time

import pytest

from stepscope.collectors.child import run_in_child
from stepscope.collectors.errors import CollectorError
from stepscope.collectors.run import STAGES, RunSpec

pytest.importorskip("torch")

SMALL = RunSpec(preset="tiny-llama", device="cpu", prompt_tokens=8, new_tokens=3, warmup=0)
LONG = RunSpec(preset="tiny-llama", device="cpu", prompt_tokens=8, new_tokens=1000, requests=20, warmup=0)


def test_a_run_in_a_child_streams_its_stages_and_answers_its_folder(tmp_path):
    stages = []
    folder = run_in_child(SMALL, tmp_path, lambda stage, done, total: stages.append(stage))
    assert (folder / "trace.json.gz").is_file() and (folder / "run.json").is_file()
    assert [s for s in STAGES if s in stages] == list(STAGES)


def test_stop_ends_the_child_and_leaves_no_run(tmp_path):
    asked = time.monotonic()
    with pytest.raises(CollectorError, match="stopped"):
        run_in_child(LONG, tmp_path, None, lambda: time.monotonic() - asked > 2)
    assert not list(tmp_path.glob("*/trace.json.gz"))


def test_the_timeout_ends_the_child_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("STEPSCOPE_RUN_TIMEOUT_S", "2")
    with pytest.raises(CollectorError, match="STEPSCOPE_RUN_TIMEOUT_S=2"):
        run_in_child(LONG, tmp_path)


def test_the_childs_own_error_comes_back_as_one_line(tmp_path):
    with pytest.raises(CollectorError, match="unknown preset 'no-such'") as err:
        run_in_child(RunSpec(preset="no-such", device="cpu"), tmp_path)
    assert "\n" not in str(err.value)


def test_a_run_past_the_memory_bound_is_ended_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("STEPSCOPE_RUN_MEMORY_MB", "300")  # below what importing torch takes
    with pytest.raises(CollectorError) as err:
        run_in_child(SMALL, tmp_path)
    assert "\n" not in str(err.value)
    assert not list(tmp_path.glob("*/trace.json.gz"))
