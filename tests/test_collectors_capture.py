"""The collectors' parts that the GPU capture set (bench/gpu_capture.py, issue 28) relies on, checked on the CPU:
markers off, the unprofiled ITL in run.json, one model reused across runs, the guarded cleanup after a CUDA error,
the profiler's start-up kernel and its initialisation before a CUDA graph is captured."""

from __future__ import annotations

import contextlib
import gzip
import json
import subprocess
import sys

import pytest
import torch

from stepscope.collectors import decode_loops, devices, profiling
from stepscope.collectors.errors import CollectorError
from stepscope.collectors.model_loading import build_preset
from stepscope.collectors.run import RunSpec, run_profiled_generation
from stepscope.contracts.markers import MARKER_PREFIX
from stepscope.contracts.run_record import RunRecord, read_run_record
from tests.conftest import ROOT


def trace_names(run_dir) -> list[str]:
    with gzip.open(run_dir / "trace.json.gz", "rt", encoding="utf-8") as f:
        return [str(e.get("name", "")) for e in json.load(f)["traceEvents"]]


def test_markers_off_leaves_no_marker_but_counts_and_clocks_every_token(tmp_path):
    run_dir = run_profiled_generation(RunSpec(device="cpu", prompt_tokens=4, new_tokens=4, markers=False), tmp_path)
    assert not [n for n in trace_names(run_dir) if n.startswith(MARKER_PREFIX)]
    record = read_run_record(run_dir)
    assert record.markers == {"prefill": 0, "decode": 0}
    assert record.spec["markers"] is False
    assert len(record.timings["token_times_ms"]) == 4
    assert record.timings["profiled_decode_steps"] == 3


def test_run_json_keeps_the_unprofiled_warm_up_itl_beside_the_profiled_one(tmp_path):
    run_dir = run_profiled_generation(RunSpec(device="cpu", prompt_tokens=4, new_tokens=5), tmp_path)
    record = read_run_record(run_dir)
    timings = record.timings
    assert len(timings["itl_ms"]) == 4 and len(timings["unprofiled_itl_ms"]) == 4
    assert timings["unprofiled_ttft_ms"] > 0 and all(t > 0 for t in timings["unprofiled_itl_ms"])
    assert record.unprofiled_itl_ms == timings["unprofiled_itl_ms"]
    # without a warm-up there is no unprofiled run: the keys are there, null
    cold = read_run_record(
        run_profiled_generation(RunSpec(device="cpu", prompt_tokens=4, new_tokens=3, warmup=0), tmp_path)
    )
    assert cold.timings["unprofiled_itl_ms"] is None and cold.timings["unprofiled_ttft_ms"] is None
    assert cold.unprofiled_itl_ms is None
    assert RunRecord(timings={"unprofiled_itl_ms": [1.5, "fast"]}).unprofiled_itl_ms is None  # not numbers: none


def test_one_model_serves_several_runs_and_a_mismatched_one_is_refused(tmp_path, monkeypatch):
    loaded = build_preset("tiny-llama", torch.device("cpu"), torch.float32, 2, 32)
    from stepscope.collectors import model_loading

    def no_second_build(*args, **kwargs):
        raise AssertionError("the model was built again")

    monkeypatch.setattr(model_loading, "build_preset", no_second_build)
    runs = [
        run_profiled_generation(RunSpec(device="cpu", prompt_tokens=4, new_tokens=3, batch=b), tmp_path, model=loaded)
        for b in (1, 2)
    ]
    assert [read_run_record(r).spec["batch"] for r in runs] == [1, 2]
    with pytest.raises(
        CollectorError, match="the model given is preset:tiny-llama, but the run asks for preset:tiny-qwen2"
    ):
        run_profiled_generation(RunSpec(preset="tiny-qwen2", device="cpu", new_tokens=2), tmp_path, model=loaded)
    with pytest.raises(CollectorError, match="in float32, the run needs cpu in bfloat16"):
        run_profiled_generation(RunSpec(device="cpu", new_tokens=2, dtype="bf16"), tmp_path, model=loaded)


def test_cleanup_after_a_cuda_error_never_raises(monkeypatch):
    def broken_empty_cache():
        raise RuntimeError("CUDA error: an illegal memory access was encountered\nCUDA kernel errors might be ...")

    monkeypatch.setattr(torch.cuda, "empty_cache", broken_empty_cache)
    note = devices.release_device_memory(torch.device("cuda"))
    assert note == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert devices.release_device_memory(torch.device("cpu")) is None


def test_a_failed_run_says_when_the_cleanup_failed_too(tmp_path, monkeypatch):
    from stepscope.collectors import run as run_module

    def failing_profile(*args, **kwargs):
        raise RuntimeError("CUDA error: unspecified launch failure")

    monkeypatch.setattr(run_module, "_profile_into", failing_profile)
    monkeypatch.setattr(devices, "release_device_memory", lambda device: "RuntimeError: CUDA error: again")
    with pytest.raises(CollectorError) as failure:
        run_profiled_generation(RunSpec(device="cpu", new_tokens=2), tmp_path)
    assert str(failure.value) == (
        "run failed: RuntimeError: CUDA error: unspecified launch failure "
        "(and freeing the cached memory failed: RuntimeError: CUDA error: again)"
    )


class _FakeProfiler:
    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def start(self) -> None:
        self.calls.append("profiler.start")

    def stop(self) -> None:
        self.calls.append("profiler.stop")


def test_one_tiny_kernel_runs_right_after_the_profiler_starts_on_a_gpu(monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(profiling, "_touch", lambda device: calls.append(f"kernel on {device.type}"))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append("synchronize"))
    for device in ("cpu", "cuda"):
        window = profiling.ProfileWindow(torch.device("cpu"), profiling.ProfilerOptions(), 1, 8)
        window.device, window.profiler = torch.device(device), _FakeProfiler(calls)
        window.start()
    assert calls == ["profiler.start", "profiler.start", "kernel on cuda", "synchronize"]


def test_the_profiler_is_initialised_before_the_cuda_graph_is_captured(monkeypatch):
    """StaticCacheLoop's capture on fake CUDA calls: the profiler session comes before the graph is captured."""
    # the model first: transformers' modules, imported on first use, must see the real torch.cuda
    loaded = build_preset("tiny-llama", torch.device("cpu"), torch.float32, 1, 16)
    settings = decode_loops.DecodeSettings(new_tokens=4, batch=1, prompt_len=4)
    loop = decode_loops.StaticCacheLoop(loaded.model, settings, torch.device("cpu"), "cuda-graph")
    calls: list[str] = []
    monkeypatch.setattr(decode_loops, "init_profiler_for_cuda_graphs", lambda device: calls.append("init profiler"))

    class FakeStream:
        def __init__(self, device=None) -> None:
            pass

        def wait_stream(self, other) -> None:
            pass

    class FakeGraph:
        pass

    @contextlib.contextmanager
    def fake_graph(graph):
        calls.append("capture begins")
        yield
        calls.append("capture ends")

    monkeypatch.setattr(torch.cuda, "Stream", FakeStream)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: FakeStream())
    monkeypatch.setattr(torch.cuda, "stream", lambda stream: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "CUDAGraph", FakeGraph)
    monkeypatch.setattr(torch.cuda, "graph", fake_graph)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    loop.prepare(torch.tensor([[5, 6, 7, 8]]))
    assert calls == ["init profiler", "capture begins", "capture ends"]
    assert isinstance(loop.graph, FakeGraph)


def test_profiler_initialisation_turns_cupti_teardown_off_and_runs_a_profiled_kernel(monkeypatch):
    calls: list[str] = []
    monkeypatch.delenv("TEARDOWN_CUPTI", raising=False)
    monkeypatch.setattr(profiling, "_touch", lambda device: calls.append("kernel"))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append("synchronize"))

    @contextlib.contextmanager
    def fake_profile(activities):
        calls.append("profile " + ",".join(sorted(a.name for a in activities)))
        yield

    monkeypatch.setattr(profiling.torch.profiler, "profile", fake_profile)
    profiling.init_profiler_for_cuda_graphs(torch.device("cpu"))
    assert calls == []  # nothing on a CPU
    profiling.init_profiler_for_cuda_graphs(torch.device("cuda"))
    assert calls == ["synchronize", "profile CPU,CUDA", "kernel", "synchronize"]
    import os

    assert os.environ["TEARDOWN_CUPTI"] == "0"


def test_the_earlier_gpu_check_still_dry_runs_on_a_cpu(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "collectors.gpu_check",
            str(tmp_path),
            "--preset",
            "tiny-llama",
            "--device",
            "cpu",
            "--modes",
            "eager",
            "--prompt-tokens",
            "4",
            "--new-tokens",
            "3",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "harness: ttft_ms" in out.stdout and "stepscope: itl_ms" in out.stdout
