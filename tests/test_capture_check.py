"""collectors/capture_check.py: the dependency-free checker of GPU captures, on SYNTHETIC GPU-shaped traces."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from stepscope.collectors.capture_check import check_capture, count_events, format_summary
from tests.conftest import ROOT
from tests.synthetic_gpu_captures import gpu_capture, run_record


def write_archive(path: Path, events: list[dict], record: dict | None, stem: str = "synthetic_capture") -> Path:
    """An archive laid out as bench/gpu_capture.py writes one: stem/trace.json.gz and stem/run.json."""
    members = {"trace.json.gz": gzip.compress(json.dumps({"traceEvents": events}).encode())}
    if record is not None:
        members["run.json"] = json.dumps(record).encode()
    with tarfile.open(path, "w") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(f"{stem}/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def truth_counts(truth) -> dict:
    return {
        k: getattr(truth, k)
        for k in (
            "kernels",
            "graph_launches",
            "launch_calls",
            "prefill_markers",
            "decode_markers",
            "kernels_before_host",
        )
    }


@pytest.mark.parametrize("graph", [False, True])
def test_counts_match_what_the_synthetic_capture_laid_out(graph):
    events, truth = gpu_capture(decode_steps=6, kernels_per_forward=9, graph=graph)
    check = count_events(events)
    assert truth_counts(check) == truth_counts(truth)
    # the gpu_user_annotation copies carry the same marker names and must not double the count
    assert check.decode_markers == 6 and check.prefill_markers == 1
    assert (check.graph_launches, check.launch_calls) == ((6, 9) if graph else (0, 63))


def test_clean_gpu_captures_have_no_problems(tmp_path):
    for mode, graph in (("eager", False), ("cuda-graph", True)):
        events, _ = gpu_capture(graph=graph)
        archive = write_archive(tmp_path / f"{mode}.tar", events, run_record(mode))
        check = check_capture(archive)
        assert check.problems == [], (mode, check.problems)
        assert check.name == mode and check.trace_bytes > 0 and check.run["device_type"] == "cuda"


def test_kernels_timed_before_the_first_host_op_are_flagged(tmp_path):
    events, truth = gpu_capture(early_kernels=3)
    check = check_capture(write_archive(tmp_path / "early.tar", events, run_record("eager")))
    assert check.kernels_before_host == truth.kernels_before_host == 3
    assert check.problems == ["3 kernels timed before the first host op"]


def test_a_graph_run_without_graph_launches_and_missing_markers_are_problems(tmp_path):
    events, _ = gpu_capture(graph=False)  # eager-shaped, but run.json says cuda-graph
    check = check_capture(write_archive(tmp_path / "g.tar", events, run_record("cuda-graph", decode_markers=9)))
    assert "cuda-graph run without a cudaGraphLaunch" in check.problems
    assert any(p.startswith("markers {'prefill': 1, 'decode': 5}, run.json expects") for p in check.problems)


def test_a_gpu_run_with_no_kernels_is_a_problem_but_a_cpu_run_is_not(tmp_path):
    host_only = [e for e in gpu_capture()[0] if e.get("cat") != "kernel"]
    gpu = check_capture(write_archive(tmp_path / "gpu.tar", host_only, run_record("eager")))
    cpu = check_capture(write_archive(tmp_path / "cpu.tar", host_only, run_record("eager", device_type="cpu")))
    assert "no kernels: the profiler recorded no GPU activity" in gpu.problems
    assert cpu.problems == []


def test_markers_off_capture_expects_none(tmp_path):
    events, truth = gpu_capture(markers=False)
    check = check_capture(write_archive(tmp_path / "stack.tar", events, run_record("eager", markers=False)))
    assert check.forwards == 0 and truth.decode_markers == 0
    assert check.problems == []


def test_oversized_unreadable_and_run_json_less_captures(tmp_path):
    events, _ = gpu_capture()
    archive = write_archive(tmp_path / "a.tar", events, run_record("eager"))
    assert any("over the" in p for p in check_capture(archive, limit_bytes=100).problems)
    assert check_capture(write_archive(tmp_path / "b.tar", events, None)).problems == ["no run.json"]
    broken = tmp_path / "c.tar"
    broken.write_bytes(b"not an archive at all")
    problems = check_capture(broken).problems
    assert len(problems) == 1 and problems[0].startswith("unreadable:")


def test_run_folder_and_bare_trace_read_like_the_archive(tmp_path):
    events, truth = gpu_capture(graph=True)
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "trace.json.gz").write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    (folder / "run.json").write_text(json.dumps(run_record("cuda-graph")))
    for path in (folder, folder / "trace.json.gz"):
        check = check_capture(path)
        assert truth_counts(check) == truth_counts(truth) and check.problems == []


def test_summary_fits_one_screen_and_names_every_problem(tmp_path):
    checks = []
    for i, early in enumerate((0, 2, 0, 0, 1, 0)):
        events, _ = gpu_capture(graph=i % 2 == 1, early_kernels=early)
        mode = "cuda-graph" if i % 2 else "eager"
        checks.append(check_capture(write_archive(tmp_path / f"h200_llama-3-8b_{i}.tar", events, run_record(mode))))
    text = format_summary(checks, ["note one", "note two"])
    lines = text.splitlines()
    assert len(lines) <= 40 and max(map(len, lines)) <= 120
    assert sum(line.startswith("problem: ") for line in lines) == 2
    assert "note two" in text and "no problems found" not in text


def test_command_line_needs_only_the_standard_library(tmp_path):
    events, _ = gpu_capture(graph=True)
    archive = write_archive(tmp_path / "x.tar", events, run_record("cuda-graph"))
    summary = tmp_path / "summary.txt"
    code = (
        "import sys, runpy; sys.argv = ['capture_check', sys.argv[1], '--summary', sys.argv[2]]\n"
        "try:\n    runpy.run_module('stepscope.collectors.capture_check', run_name='__main__')\n"
        "except SystemExit as exc:\n    rc = exc.code\n"
        "heavy = sorted(m for m in ('numpy', 'pandas', 'msgspec', 'torch') if m in sys.modules)\n"
        "print('RC', rc, 'HEAVY', heavy)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(archive), str(summary)], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("RC 0 HEAVY []")
    assert "no problems found" in summary.read_text()
    assert not list(tmp_path.glob(".*partial"))
