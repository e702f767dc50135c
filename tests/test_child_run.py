"""Issue 39: profiled generation from the Run page runs in a child process (collectors.child): its progress comes
back stage by stage, a stop or the timeout ends it at once, its failure is one CollectorError line, and the
asking process stays free (it only waits on a pipe)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from stepscope.collectors.child import NICE, run_in_child
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


def _children_running(module: str) -> list[int]:
    """Pids of this process's children whose command line runs `module`."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes().decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == os.getpid() and module in cmdline:
            pids.append(int(stat.parent.name))
    return pids


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the child's state from /proc")
def test_the_child_works_at_a_lower_priority_in_the_servers_session(tmp_path):
    """A child in a session of its own would be a scheduling group of its own where Linux groups by session
    (autogroup): an equal share of the CPU whatever its nice, taken from the server's other sessions."""
    seen: dict[str, int] = {}
    asked = time.monotonic()

    def look_then_stop() -> bool:
        for pid in _children_running("stepscope.collectors.child"):
            if time.monotonic() - asked > 1.5:  # the child has set its own priority first thing
                nice = os.getpriority(os.PRIO_PROCESS, pid)
                seen.update(pid=pid, sid=os.getsid(pid), pgid=os.getpgid(pid), nice=nice)
        return bool(seen)

    with pytest.raises(CollectorError, match="stopped"):
        run_in_child(LONG, tmp_path, None, look_then_stop)
    assert seen["sid"] == os.getsid(0) and seen["pgid"] == seen["pid"]
    assert seen["nice"] == os.getpriority(os.PRIO_PROCESS, 0) + NICE
