"""bench/gpu_capture.py, the prepared GPU command of issue 28, and its trace-size estimate (bench/trace_size.py).

The device run gets one try, so what can be checked on a CPU is checked here: the dry run end to end (the
files it leaves in $OUT, their sizes and names, the dry_run marks, that Stepscope reads every trace, that the
capture path imported no pandas/msgspec/Streamlit nor Stepscope's readers), fail-soft with a failing cleanup,
and that the decode-step caps keep every estimated 8B trace under the limit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import time

import pytest

from bench import gpu_capture
from bench.gpu_capture import CAPTURES, Capture, CaptureResult, Plan, decode_cap_for, gpu_prefix, run_all
from bench.trace_size import (
    COMPUTE_OPS_PER_DECODE_STEP,
    GZ_BYTES_PER_HOST_EVENT,
    HOST_EVENTS_PER_DECODE_STEP,
    TRACE_LIMIT_BYTES,
    TraceShape,
    decode_step_cap,
    estimate_trace_bytes,
    measure,
)
from tests.conftest import ROOT

MIB = 1 << 20
FORBIDDEN = ("pandas", "msgspec", "streamlit", "plotly", "pyarrow")
OUR_READERS = ("analysis", "parsers", "app", "trace_cache", "exporters", "batch")
MODULES_AFTER = (
    "import json, sys\n"
    f"names = sorted(m for m in sys.modules if m.split('.')[0] in {set(FORBIDDEN)} or "
    f"m.removeprefix('stepscope.').split('.')[0] in {set(OUR_READERS)})\n"
    "print('MODULES', json.dumps(names))\n"
)


def modules_line(stdout: str) -> list[str]:
    line = next(line for line in stdout.splitlines() if line.startswith("MODULES "))
    return json.loads(line.removeprefix("MODULES "))


def test_capture_path_imports_only_torch_transformers_and_the_standard_library():
    code = (
        "import bench.gpu_capture, bench.trace_size, collectors.run, collectors.decode_loops, "
        "collectors.model_loading, collectors.profiling, collectors.step_tracker, collectors.capture_check, "
        "collectors.devices, collectors.run_record\n" + MODULES_AFTER
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert modules_line(out.stdout) == []


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    """One dry run of the whole script in a fresh process, $OUT a temp folder: (out, rc, seconds, modules, stdout)."""
    out = tmp_path_factory.mktemp("gpu-capture-out")
    code = (
        "import runpy, sys\nsys.argv = ['bench/gpu_capture.py', '--dry-run']\nrc = 0\n"
        "try:\n    runpy.run_path('bench/gpu_capture.py', run_name='__main__')\n"
        "except SystemExit as exc:\n    rc = exc.code\n" + MODULES_AFTER + "print('RC', rc)\n"
    )
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, OUT=str(out)),
    )
    seconds = time.perf_counter() - started
    assert "RC " in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    rc = int(proc.stdout.strip().splitlines()[-1].split()[1])
    return out, rc, seconds, modules_line(proc.stdout), proc.stdout + proc.stderr


def test_dry_run_writes_six_archives_a_summary_and_a_log_within_the_limits(dry_run):
    out, rc, seconds, modules, output = dry_run
    assert rc == 0, output[-3000:]
    files = sorted(p.name for p in out.iterdir())
    expected = sorted(
        [f"dryrun-cpu_tiny-llama_{c.name}.tar" for c in CAPTURES] + ["gpu_capture.log", "gpu_capture_summary.txt"]
    )
    assert files == expected  # nothing else: no lock file, no partial, no hidden file
    sizes = [p.stat().st_size for p in out.iterdir()]
    assert len(sizes) <= 8 and max(sizes) <= 16 * MIB and sum(sizes) <= 64 * MIB
    assert modules == []  # the whole capture path, run: no pandas, msgspec, Streamlit, nor Stepscope's readers
    assert seconds < 120, seconds


def test_dry_run_archives_hold_marked_runs_that_stepscope_reads(dry_run, tmp_path):
    import stepscope

    out = dry_run[0]
    for capture in CAPTURES:
        stem = f"dryrun-cpu_tiny-llama_{capture.name}"
        with tarfile.open(out / f"{stem}.tar") as archive:
            assert sorted(archive.getnames()) == [f"{stem}/run.json", f"{stem}/trace.json.gz"]
            archive.extractall(tmp_path, filter="data")
        record = json.loads((tmp_path / stem / "run.json").read_text())
        assert record["dry_run"] is True
        assert record["capture"]["name"] == capture.name and record["capture"]["requested_mode"] == capture.mode
        assert record["spec"]["mode"] == "eager"  # cuda-graph captures run eager on the CPU
        assert record["spec"]["with_stack"] is record["spec"]["profile_memory"] is capture.stack
        assert record["spec"]["markers"] is not capture.stack
        assert record["timings"]["profile_capped"] is True  # every dry capture records 4 of its 7 decode steps
        assert len(record["timings"]["unprofiled_itl_ms"]) == len(record["timings"]["itl_ms"]) == 7
        trace = stepscope.load(tmp_path / stem / "trace.json.gz")
        assert trace.summary["decode_steps"] == 4, (capture.name, trace.summary)
        assert trace.summary["prefill_steps"] == 1


def test_dry_run_summary_is_one_screen_with_a_line_per_capture(dry_run):
    out = dry_run[0]
    text = (out / "gpu_capture_summary.txt").read_text()
    lines = text.splitlines()
    assert len(lines) <= 40 and max(map(len, lines)) <= 120
    assert sum(line.startswith("ok ") for line in lines) == 6
    assert "no problems found" in text and "capture path imports: torch, transformers, stdlib only" in text
    log = (out / "gpu_capture.log").read_text()
    assert log.count("=== bench/gpu_capture.py --dry-run") == 1 and "done in" in log


def test_only_reruns_one_capture_and_a_failed_capture_with_a_failing_cleanup_lets_the_next_run(tmp_path, monkeypatch):
    """In-process, on the CPU: the first capture dies as on a CUDA error, and torch.cuda.empty_cache() then raises
    too, as it does in a broken CUDA context (the cleanup is run as on a GPU: the real guard, a failing call)."""
    import torch

    from stepscope.collectors import devices

    real_run_capture, real_release = gpu_capture.run_capture, devices.release_device_memory

    def run_capture(capture, *args, **kwargs):
        if capture.name == "b1_eager":
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return real_run_capture(capture, *args, **kwargs)

    def broken_empty_cache():
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setenv("STEPSCOPE_DEBUG", "1")  # main() sets it for the device; keep it out of later tests
    monkeypatch.setattr(gpu_capture, "run_capture", run_capture)
    monkeypatch.setattr(torch.cuda, "empty_cache", broken_empty_cache)
    monkeypatch.setattr(devices, "release_device_memory", lambda device: real_release(torch.device("cuda")))
    rc = gpu_capture.main(["--dry-run", "--out", str(tmp_path), "--only", "b1_cuda-graph,b1_eager"])
    assert rc == 1
    assert sorted(p.name for p in tmp_path.glob("*.tar")) == ["dryrun-cpu_tiny-llama_b1_cuda-graph.tar"]
    summary = (tmp_path / "gpu_capture_summary.txt").read_text()
    assert (
        "FAILED b1_eager: RuntimeError: CUDA error: an illegal memory access was encountered; then freeing "
        "GPU memory failed: RuntimeError: CUDA error"
    ) in summary
    assert "ok b1_cuda-graph" in summary
    assert "Traceback" in (tmp_path / "gpu_capture.log").read_text()  # the failure's traceback is in the log


def test_run_all_writes_a_summary_after_every_capture_and_stops_starting_past_the_budget():
    captures = list(CAPTURES[:3])
    summaries: list[int] = []
    cleanups: list[int] = []

    def run_one(capture: Capture, scale: float) -> CaptureResult:
        if capture is captures[0]:
            raise MemoryError("out of memory")
        return CaptureResult(capture.name)

    def cleanup() -> str | None:
        cleanups.append(1)
        raise RuntimeError("cleanup broke")

    results = run_all(captures, run_one, cleanup, lambda r: summaries.append(len(r)), budget_s=1e9)
    assert [r.error for r in results] == [
        "MemoryError: out of memory; then freeing GPU memory failed: RuntimeError: cleanup broke",
        None,
        None,
    ]
    assert summaries == [1, 2, 3] and cleanups == [1]
    skipped = run_all(captures, run_one, cleanup, lambda r: None, budget_s=-1)
    assert all(r.error.startswith("skipped:") for r in skipped)


def test_bad_arguments_get_one_error_line(tmp_path, monkeypatch, capsys):
    assert gpu_capture.main(["--out", str(tmp_path), "--only", "b2_eager"]) == 2
    assert capsys.readouterr().err.startswith("error: unknown capture b2_eager; known: b1_eager, ")
    monkeypatch.delenv("OUT", raising=False)
    assert gpu_capture.main([]) == 2
    assert "set $OUT" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_gpu_prefix_is_a_short_file_safe_name():
    assert gpu_prefix("NVIDIA H200") == "h200"
    assert gpu_prefix("NVIDIA A100-SXM4-80GB") == "a100-sxm4-80gb"
    assert gpu_prefix("NVIDIA GeForce RTX 4090") == "rtx-4090"
    assert gpu_prefix("") == "gpu"


# ---- the size estimate ----------------------------------------------------------------------------------------


def test_caps_keep_every_8b_capture_under_the_limit_and_all_of_them_under_the_output_limit():
    plan = Plan(dry_run=False, preset="llama-3-8b", device="cuda", dtype="bf16", prefix="h200")
    total = 0
    for capture in CAPTURES:
        cap, estimate = decode_cap_for(capture, plan, scale=1.0)
        assert 1 <= cap <= capture.new_tokens - 1
        assert estimate <= TRACE_LIMIT_BYTES, capture.name
        if cap < capture.new_tokens - 1:  # the cap is the largest that fits, not just any that does
            assert estimate_trace_bytes(capture.shape, cap + 1) > TRACE_LIMIT_BYTES
        total += estimate
    assert total <= 62 * MIB
    caps = {c.name: decode_cap_for(c, plan, 1.0)[0] for c in CAPTURES}
    assert caps["b1_eager"] < 63 and caps["b1_eager_stack"] < caps["b1_eager"]  # an eager 8B trace needs a cap
    assert caps["b1_cuda-graph"] == 63 and caps["b1_eager_prefill2000"] == 15


def test_a_trace_larger_than_its_estimate_shrinks_the_later_caps():
    shape = TraceShape()
    assert decode_step_cap(shape, 64, TRACE_LIMIT_BYTES // 2) < decode_step_cap(shape, 64)
    plan = Plan(dry_run=False, preset="llama-3-8b", device="cuda", dtype="bf16", prefix="h200")
    assert decode_cap_for(CAPTURES[0], plan, 2.0)[0] < decode_cap_for(CAPTURES[0], plan, 1.0)[0]
    assert decode_cap_for(CAPTURES[0], plan, 0.5)[0] == decode_cap_for(CAPTURES[0], plan, 1.0)[0]
    with pytest.raises(ValueError):
        estimate_trace_bytes(shape, -1)


def test_the_host_side_figures_are_what_a_cpu_capture_of_32_layers_measures_now():
    """The constants behind the estimate, re-measured: a transformers or torch change that moves them fails here."""
    figures = measure(layers=32, new_tokens=3, options=("plain",))["plain"]
    assert figures["decode_steps"] == 2
    assert figures["host_events_per_decode_step"] == pytest.approx(HOST_EVENTS_PER_DECODE_STEP["plain"], rel=0.1)
    assert figures["gz_bytes_per_event"] == pytest.approx(GZ_BYTES_PER_HOST_EVENT["plain"], rel=0.2)
    assert figures["compute_ops_per_decode_step"] == pytest.approx(COMPUTE_OPS_PER_DECODE_STEP, rel=0.1)
    # the compute ops are the kernels a GPU would run: the issue's ~83k for 64 tokens (1,297 a step)
    assert figures["compute_ops_per_decode_step"] == pytest.approx(83_000 / 64, rel=0.1)


def test_without_a_gpu_every_capture_is_written_down_as_not_run(tmp_path, monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("STEPSCOPE_DEBUG", "1")
    assert gpu_capture.main(["--out", str(tmp_path)]) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpu_capture.log", "gpu_capture_summary.txt"]
    summary = (tmp_path / "gpu_capture_summary.txt").read_text()
    assert summary.count("FAILED ") == 6 and "CUDA is not available" in summary
    assert "6 capture(s) failed" in summary and "no problems found" not in summary
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("error: device cuda asked for")


def test_a_trace_over_its_estimate_scales_the_caps_of_the_same_kind_after_it():
    from stepscope.collectors.capture_check import TraceCheck

    seen: list[tuple[str, float]] = []

    def run_one(capture: Capture, scale: float) -> CaptureResult:
        seen.append((capture.name, scale))
        return CaptureResult(capture.name, check=TraceCheck(capture.name, trace_bytes=3000), estimate_bytes=1000)

    run_all(list(CAPTURES[:3]), run_one, lambda: None, lambda r: None, budget_s=1e9)
    # b1_eager came out 3x its estimate: b16_eager (eager too) gets scale 3; b1_cuda-graph (graph) does not
    assert seen == [("b1_eager", 1.0), ("b1_cuda-graph", 1.0), ("b16_eager", 3.0)]
