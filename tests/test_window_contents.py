"""Issue 42: what a window of the run holds (analysis/event_window.py, analysis/selection.py), one answer for the
API (`stepscope.load(path).window(...)`), the command line (`analyze --window A:B --json`) and the app's Selection
panel. Checked on a shipped CPU sample, real GPU traces (tests/data/real), the project's own captures and SYNTHETIC
GPU traces built here (tests/synthetic_gpu_captures.py), each against the analysis' own step rows and against
plain pandas masks over the work items."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import stepscope
from stepscope.analysis.event_window import WINDOW_COLUMNS, range_window, steps_window, work_index
from stepscope.analysis.selection import Selection, diff, select
from tests.conftest import REAL_TRACES
from tests.synthetic_gpu_captures import gpu_capture
from tests.synthetic_traces import write

ROOT = Path(__file__).resolve().parents[1]
CPU_SAMPLE = ROOT / "sample_traces" / "cpu_tiny-llama_eager" / "trace.json.gz"
CAPTURES = ROOT / "tests" / "data" / "captures"
TRACES = {
    "cpu sample": CPU_SAMPLE,
    "cpu two requests": CAPTURES / "memory_fp32_b1_two_requests.json.gz",
    "vllm fullgraph rocm": REAL_TRACES / "tracelens_vllm_gptoss_decode_fullgraph_rocm.json.gz",
    "hf qwen h100": REAL_TRACES / "tracelens_hf_qwen1.5-0.5b_forward_h100.json.gz",
    "sglang mi300x": REAL_TRACES / "tracelens_sglang_qwen3-8b_decode_mi300x.json.gz",
}


@pytest.fixture(scope="module")
def synthetic_graphs(tmp_path_factory) -> Path:
    """SYNTHETIC: a GPU generation whose decode steps replay a CUDA graph (one launch, many kernels)."""
    events, _ = gpu_capture(decode_steps=6, kernels_per_forward=9, graph=True)
    return write(tmp_path_factory.mktemp("graphs") / "synthetic_graph.json", events)


def _load(name: str, synthetic_graphs: Path):
    path = synthetic_graphs if name == "synthetic graphs" else TRACES[name]
    if not path.exists():
        pytest.skip(f"{path} is missing")
    return stepscope.load(path)


@pytest.mark.parametrize("name", [*TRACES, "synthetic graphs"])
def test_a_steps_window_says_what_its_step_row_says(name, synthetic_graphs):
    trace = _load(name, synthetic_graphs)
    steps = trace.report["steps"]
    assert steps, "every trace here has steps"
    work = trace.analysis.anatomy.work
    for i, row in enumerate(steps):
        window = trace.window(steps=[i])
        assert list(window.columns) == list(WINDOW_COLUMNS)
        assert window.attrs["busy_us"] == row["gpu_busy_us"]  # the same blocks, the same function
        assert window.attrs["idle_us"] == pytest.approx(row["gpu_idle_us"], abs=1e-6)
        assert int(window["count"].sum()) == row["kernels"]
        assert "notes" not in window.attrs
        start, end = trace.steps["start_ns"].iloc[i], trace.steps["end_ns"].iloc[i]
        assert window.attrs["wall_us"] == (end - start) / 1e3
        # clipped durations, by a plain mask over the work items: the step's own kernels cut to its span
        mine = work[(work["step"] == i) & work["leaf"]]
        clipped = (np.minimum(mine["end_ns"], end) - np.maximum(mine["start_ns"], start)).clip(lower=0)
        assert window["total_us"].sum() == pytest.approx(clipped.sum() / 1e3, rel=1e-12, abs=1e-9)
        by_name = mine.groupby(mine["name"].astype(str), observed=True).size()
        assert dict(zip(window["name"], window["count"], strict=True)) == by_name.to_dict()


@pytest.mark.parametrize("name", [*TRACES, "synthetic graphs"])
def test_a_window_over_the_whole_run_is_the_runs_totals(name, synthetic_graphs):
    trace = _load(name, synthetic_graphs)
    work = trace.analysis.anatomy.work
    kernels = work[work["leaf"]]
    origin = trace.analysis.time_origin_ns
    end_ms = (int(work["end_ns"].max()) - origin) / 1e6 + 1
    whole = trace.window(0, end_ms)
    assert int(whole["count"].sum()) == len(kernels)
    assert whole["total_us"].sum() == pytest.approx((kernels["end_ns"] - kernels["start_ns"]).sum() / 1e3)
    blocks = list(trace.analysis.busy_intervals.values())
    if len(blocks) == 1:
        assert whole.attrs["busy_us"] == pytest.approx((blocks[0][1] - blocks[0][0]).sum() / 1e3)
    every = trace.window(steps=range(len(trace.steps)))
    assert every.attrs["busy_us"] == pytest.approx(trace.steps["gpu_busy_ns"].sum() / 1e3)
    assert int(every["count"].sum()) == int(trace.steps["kernels"].sum())
    assert every["share_pct"].sum() == pytest.approx(100.0)


def test_a_range_window_is_every_kernel_overlapping_it_cut_to_it():
    trace = stepscope.load(TRACES["vllm fullgraph rocm"])
    work = trace.analysis.anatomy.work
    kernels = work[work["leaf"]]
    origin = trace.analysis.time_origin_ns
    rng = np.random.default_rng(7)
    span = int(work["end_ns"].max()) - origin
    for _ in range(25):
        a, b = sorted(rng.integers(0, span, 2))
        window = trace.window(a / 1e6, b / 1e6)
        lo, hi = origin + round(a / 1e6 * 1e6), origin + round(b / 1e6 * 1e6)
        overlap = kernels[(kernels["end_ns"] > lo) & (kernels["start_ns"] < hi)]
        assert int(window["count"].sum()) == len(overlap)
        cut = np.minimum(overlap["end_ns"], hi) - np.maximum(overlap["start_ns"], lo)
        assert window["total_us"].sum() == pytest.approx(cut.sum() / 1e3)
        assert window.attrs["wall_us"] == pytest.approx((hi - lo) / 1e3)
        assert 0 <= window.attrs["busy_us"] <= window.attrs["wall_us"] + 1e-9
        assert window.attrs["busy_us"] >= (cut.max() / 1e3 if len(cut) else 0) - 1e-6  # the union holds each kernel


def test_windows_refuse_what_they_cannot_read():
    trace = stepscope.load(TRACES["hf qwen h100"])
    with pytest.raises(ValueError, match="no step 5"):
        trace.window(steps=[5])
    with pytest.raises(ValueError, match="ends before it starts"):
        trace.window(10, 5)
    with pytest.raises(ValueError, match="not both"):
        trace.window(0, 1, steps=[0])
    with pytest.raises(ValueError, match="start_ms and end_ms"):
        trace.window(0)
    with pytest.raises(ValueError, match="not a time in the trace"):
        trace.window(0, float("inf"))
    with pytest.raises(ValueError, match="not a time in the trace"):
        trace.window(-1e300, 5)


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "analyze", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )


def test_the_command_lines_window_is_the_apis():
    done = _cli(CPU_SAMPLE, "--window", "100:130", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    window = report["window"]
    api = stepscope.load(CPU_SAMPLE).window(100, 130)
    assert window["start_ms"] == 100 and window["end_ms"] == 130
    for key in ("wall_us", "busy_us", "idle_us"):
        assert window[key] == api.attrs[key]
    assert [k["name"] for k in window["kernels"]] == api["name"].tolist()
    assert [k["count"] for k in window["kernels"]] == api["count"].tolist()
    assert set(window["kernels"][0]) == set(WINDOW_COLUMNS)
    assert window["unit"] == "host ops"
    without = _cli(CPU_SAMPLE, "--json")
    assert {k: v for k, v in report.items() if k != "window"} == json.loads(without.stdout)  # only added
    text = _cli(CPU_SAMPLE, "--window", "100:130")
    assert text.returncode == 0 and "window   100 to 130 ms" in text.stdout


@pytest.mark.parametrize("bad", ["1:2:3", "a:b", "5:1", "nan:2", ":"])
def test_a_bad_window_is_one_error_line(bad):
    done = _cli(CPU_SAMPLE, f"--window={bad}", "--json")
    assert done.returncode == 2
    assert done.stderr.startswith("error: --window") and len(done.stderr.strip().splitlines()) == 1


def test_a_selection_answers_with_host_calls_anatomy_and_a_diff(synthetic_graphs):
    trace = stepscope.load(synthetic_graphs)
    index = work_index(trace.timeline, trace.analysis)
    steps = trace.steps
    prefill = select(trace.timeline, trace.analysis, index, Selection.of_steps([0]))
    decode = select(trace.timeline, trace.analysis, index, Selection.of_steps([3]))
    # host calls starting inside the step, by a plain mask
    ev = trace.timeline.events
    lo, hi = steps["start_ns"].iloc[3], steps["end_ns"].iloc[3]
    inside = ev[(ev["ts"] >= lo) & (ev["ts"] < hi) & ev["kind"].isin(["runtime", "driver", "cpu_op", "annotation"])]
    assert int(decode.host["count"].sum()) == len(inside)
    assert "cudaGraphLaunch" in set(decode.host["name"])
    assert decode.anatomy is not None and int(decode.anatomy["count"].sum()) == int(steps["kernels"].iloc[3])
    by_name, by_category = diff(prefill, decode)
    assert set(by_name.columns) >= {"name", "short_name", "status", "count_a", "count_b", "us_a", "us_b", "delta_us"}
    assert (by_name["delta_us"] == by_name["us_b"] - by_name["us_a"]).all()
    assert by_name["us_a"].sum() == pytest.approx(prefill.kernels["total_us"].sum())
    assert by_name["us_b"].sum() == pytest.approx(decode.kernels["total_us"].sum())
    assert by_category["us_b"].sum() == pytest.approx(decode.kernels["total_us"].sum())
    same = diff(decode, decode)[0]
    assert (same["status"] == "same").all() and (same["delta_us"] == 0).all()


def test_a_range_selection_and_the_window_function_agree():
    trace = stepscope.load(CPU_SAMPLE)
    index = work_index(trace.timeline, trace.analysis)
    origin = trace.analysis.time_origin_ns
    answer = select(trace.timeline, trace.analysis, index, Selection.of_range(origin + 50_000_000, origin + 60_000_000))
    direct = range_window(index, origin + 50_000_000, origin + 60_000_000)
    pd.testing.assert_frame_equal(answer.kernels, direct)
    assert answer.kernels.attrs == direct.attrs
    assert set(answer.categories["category"]) == set(direct.attrs["categories"])
    whole_steps = steps_window(index, [1, 2])
    assert whole_steps.attrs["steps"] == [1, 2]


def test_a_steps_window_says_when_its_count_is_not_the_steps_own():
    """Where the anatomy placed work in another step than the steps' count did (event_window's docstring), the
    window says so rather than showing two counts as one."""
    trace = stepscope.load(CPU_SAMPLE)
    index = replace(trace._work, step_kernels=trace._work.step_kernels + 1)
    window = steps_window(index, [2])
    assert "by the steps' own count" in window.attrs["notes"][0]
