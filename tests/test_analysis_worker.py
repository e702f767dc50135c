"""analyze() computes a CPU trace's host-op work in a worker thread (analysis/host_work.py) while it finds the
steps: the result must be the one the stages give one after the other, the worker's errors must reach the caller,
and a trace narrowed to one process must not use the worker's ops of every process.
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from stepscope.analysis import AnalysisOptions, analyze, pipeline
from stepscope.analysis.event_rows import kind_mask
from stepscope.analysis.step_finding import find_steps
from stepscope.parsers import load_trace
from stepscope.parsers.timeline import Timeline
from tests.synthetic_traces import cpu_op, doc, write

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"
CPU_TRACES = ("cpu_tiny-llama_eager/trace.json.gz", "cpu_tiny-llama_compile/trace.json.gz")


def _assert_same(a: object, b: object, where: str = "analysis") -> None:
    """Field by field: frames exactly (dtypes included), arrays by value and dtype, the rest by ==."""
    if isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b, check_exact=True, obj=where)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and np.array_equal(a, b), where
    elif dataclasses.is_dataclass(a) and not isinstance(a, type):
        assert type(a) is type(b), where
        for f in dataclasses.fields(a):
            _assert_same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for key in a:
            _assert_same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def _sample(name: str) -> Timeline:
    path = SAMPLES / name
    if not path.exists():
        pytest.skip(f"{path} is not in this checkout")
    return load_trace(path)


def _recording_worker(monkeypatch) -> list[str]:
    """Wrap pipeline.host_work so that each call records the thread it ran in."""
    threads: list[str] = []
    real = pipeline.host_work

    def recorded(*args, **kwargs):
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "host_work", recorded)
    return threads


@pytest.mark.parametrize("name", CPU_TRACES)
def test_the_worker_gives_the_serial_analysis(name, monkeypatch):
    timeline = _sample(name)
    threads = _recording_worker(monkeypatch)
    threaded = analyze(timeline, AnalysisOptions())
    assert len(threads) == 1 and threads[0].startswith("stepscope-host-work")  # the worker did run
    serial = pipeline._analyze(timeline, AnalysisOptions(), None, None)  # the anatomy computes the host work itself
    assert len(threads) == 1
    assert threaded.anatomy is not None and len(threaded.anatomy.work) > 0
    _assert_same(threaded, serial)


def test_a_worker_error_is_raised_by_analyze(monkeypatch):
    timeline = _sample(CPU_TRACES[0])

    def broken(*args, **kwargs):
        raise ValueError("host work failed")

    monkeypatch.setattr(pipeline, "host_work", broken)
    with pytest.raises(ValueError, match="host work failed"):
        analyze(timeline, AnalysisOptions())
    assert analyze(timeline, AnalysisOptions(anatomy=False)).anatomy is None  # no anatomy: no worker, no error


def test_no_worker_without_anatomy_or_on_a_gpu_trace(monkeypatch):
    timeline = _sample(CPU_TRACES[0])
    threads = _recording_worker(monkeypatch)
    analyze(timeline, AnalysisOptions(anatomy=False))
    ev = timeline.events
    kinds = [*ev["kind"].cat.categories, "kernel"]  # a device kind among the categories: a GPU trace
    gpu_like = Timeline(
        events=ev.assign(kind=pd.Categorical(ev["kind"].astype(str), categories=kinds)), meta=timeline.meta
    )
    assert not pipeline._host_only(gpu_like.events) and pipeline._host_only(ev)
    analyze(gpu_like, AnalysisOptions())
    assert threads == []


def _two_process_cpu_trace(tmp_path: Path) -> Timeline:
    """A SYNTHETIC CPU-only trace of two processes: each runs `forward` spans (aten ops inside, an argmax taking
    the token after each); process 100 runs six, process 200 four, so the host forwards of process 100 are the
    steps and analyze() narrows the timeline to it."""
    events = []
    for pid, forwards in ((100, 6), (200, 4)):
        for k in range(forwards):
            t = 1000 + 100 * k + (3 if pid == 200 else 0)
            ops = [
                ("forward", 0, 80),
                ("aten::linear", 1, 20),
                ("aten::mm", 2, 15),
                ("aten::view", 5, 2),
                ("aten::add", 30, 10),
                ("aten::mul", 45, 10),
                ("aten::argmax", 85, 5),
            ]
            for name, offset, dur in ops:
                events.append({**cpu_op(name, t + offset, dur, tid=pid + 1), "pid": pid})
    return load_trace(write(tmp_path / "synthetic_two_processes.json", doc(events)))


def test_one_process_of_several_reads_its_own_host_ops(monkeypatch, tmp_path):
    """The worker ran on both processes' ops: the anatomy must read the kept process's ops, as the serial
    stages do."""
    timeline = _two_process_cpu_trace(tmp_path)
    bounds, _ = find_steps(timeline)
    assert bounds.attrs.get("process") == 100  # the case under test: the timeline is narrowed to one process
    threads = _recording_worker(monkeypatch)
    threaded = analyze(timeline, AnalysisOptions())
    assert len(threads) == 1  # the worker ran, on every process's ops; the anatomy read its own
    assert threaded.steps["kind"].tolist() == ["prefill"] + ["decode"] * 5
    assert len(threaded.anatomy.work) == 6 * 7  # process 100's ops only, of 10 * 7
    assert int(kind_mask(timeline.events, ["cpu_op"]).sum()) == 10 * 7
    _assert_same(threaded, pipeline._analyze(timeline, AnalysisOptions(), None, None))
