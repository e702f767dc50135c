"""The prefill sweep on the CPU: tiny preset, three lengths, written atomically as sweep.json."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from stepscope.analysis.roofline import complete_sweep, load_sweep, sweep_frame
from stepscope.collectors.errors import CollectorError
from stepscope.collectors.sweep import SweepSpec, measured_crossing, prompt_lengths, run_prefill_sweep
from tests.conftest import ROOT


def test_prompt_lengths_are_log_spaced_distinct_and_end_at_max():
    assert prompt_lengths(16, 1024, 7) == [16, 32, 64, 128, 256, 512, 1024]
    assert prompt_lengths(8, 8, 3) == [8]
    assert prompt_lengths(1, 3, 8) == [1, 2, 3]


def test_measured_crossing_interpolates_between_points():
    points = [{"prompt_tokens": n, "measured_ms": ms} for n, ms in ((16, 1.0), (32, 2.0), (64, 6.0))]
    assert measured_crossing(points, 4.0) == pytest.approx(48.0)
    assert measured_crossing(points, 0.5) is None  # already above at the shortest prompt
    assert measured_crossing(points, 9.0) is None


def test_sweep_on_the_tiny_preset_on_cpu(tmp_path):
    stages = []
    spec = SweepSpec(preset="tiny-llama", device="cpu", min_tokens=8, max_tokens=32, points=3, repeats=1)
    result = run_prefill_sweep(
        spec, out_dir=tmp_path, progress=lambda s, d, t: stages.append(s), complete=complete_sweep
    )
    assert {"load model", "sweep", "decode step", "write"} <= set(stages)
    written = json.loads(Path(result["path"]).read_text())
    assert written["schema"] == "stepscope.sweep/1" and written["device_type"] == "cpu"
    assert [p["prompt_tokens"] for p in written["points"]] == [8, 16, 32]
    for p in written["points"]:
        assert p["measured_ms"] > 0 and p["expected_ms"] > 0 and p["bound"] in ("memory", "compute")
    assert written["points"][0]["flops"] < written["points"][-1]["flops"]
    assert written["decode_step"]["measured_ms"] > 0 and written["hardware"]["memory_gbps"] > 0
    assert set(written["marks"]) == {
        "compute_bound_prompt_tokens",
        "prefill_equals_decode_tokens",
        "prefill_equals_decode_expected_tokens",
    }
    assert written["marks"]["compute_bound_prompt_tokens"] >= 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".partial")]
    frame = sweep_frame(load_sweep(Path(result["path"]).parent))
    assert list(frame["prompt_tokens"]) == [8, 16, 32] and (frame["expected_ms"] > 0).all()


def test_sweep_rejects_bad_ranges_with_one_line():
    with pytest.raises(CollectorError, match="min-tokens"):
        run_prefill_sweep(SweepSpec(min_tokens=64, max_tokens=16), out_dir=None)
    out = subprocess.run(
        [sys.executable, "-m", "app.cli", "sweep", "--points", "0"], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 2 and out.stderr.startswith("error:") and out.stderr.count("\n") == 1


def test_analyze_reads_the_run_json_beside_a_real_cpu_run(tmp_path):
    from stepscope.analysis import analyze
    from stepscope.analysis.roofline import roofline_for_run, timeline_device, with_roofline
    from stepscope.collectors.run import RunSpec, run_profiled_generation
    from stepscope.parsers import load_trace
    from stepscope.parsers.run_sidecar import read_sidecar

    run_dir = run_profiled_generation(
        RunSpec(preset="tiny-llama", device="cpu", prompt_tokens=16, new_tokens=6, warmup=0), out_dir=tmp_path
    )
    trace = run_dir / "trace.json.gz"
    timeline = load_trace(trace)
    analysis = analyze(timeline)
    report = roofline_for_run(read_sidecar(trace).record, analysis, *timeline_device(timeline))
    assert report is not None and report.hardware.kind == "cpu"
    rows = report.phases.set_index("phase")
    assert rows.loc["prefill", "tokens"] == 16 and rows.loc["decode", "context"] == 16 + 2  # steps 1..4 -> 16..19
    assert (rows["efficiency_pct"] > 0).all() and (rows["measured_ms"] > 0).all()
    merged = with_roofline(analysis, report)
    assert {f.id for f in merged.findings} >= {"roofline-prefill", "roofline-decode"}
    assert merged.summary.roofline.decode_roofline_pct > 0


def test_complete_sweep_fills_the_roofline_into_a_measured_record():
    """A hand-made measured record (what collectors.sweep writes without `complete`) on a made-up GPU:
    1000 GB/s and 100 TFLOP/s given, so expected = max(bytes / 1e12 B/s, flops / 1e14 FLOP/s)."""
    config = {
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 1000,
    }
    measured = {
        "schema": "stepscope.sweep/1",
        "model": {"source": "preset:x", "parameters": None, "config": config},
        "device": "Made-up GPU",
        "device_type": "cuda",
        "device_memory_bytes": None,
        "dtype": "float32",
        "batch": 1,
        "repeats": 1,
        "hardware": None,
        "points": [
            {
                "prompt_tokens": n,
                "measured_ms": 1.0,
                "runs_ms": [1.0],
                "expected_ms": None,
                "memory_ms": None,
                "compute_ms": None,
                "bound": None,
                "bytes": None,
                "flops": None,
            }
            for n in (8, 64)
        ],
        "decode_step": {"context": 9, "measured_ms": 0.5, "runs_ms": [0.5], "expected_ms": None},
        "marks": {
            "compute_bound_prompt_tokens": None,
            "prefill_equals_decode_tokens": None,
            "prefill_equals_decode_expected_tokens": None,
        },
    }
    assert complete_sweep(measured)["hardware"] is None  # not in the GPU table and no figures given
    done = complete_sweep(measured, hbm_gbps=1000, tflops=100)
    assert measured["points"][0]["expected_ms"] is None  # the input is left as it was
    assert done["hardware"]["memory_gbps"] == 1000 and done["hardware"]["tflops"] == 100
    assert done["model"]["parameters"] > 0
    for p in [*done["points"], done["decode_step"]]:
        assert p["memory_ms"] == pytest.approx(p["bytes"] / 1e12 * 1e3)
        assert p["compute_ms"] == pytest.approx(p["flops"] / 1e14 * 1e3)
        assert p["expected_ms"] == pytest.approx(max(p["memory_ms"], p["compute_ms"]))
    assert done["points"][0]["flops"] < done["points"][1]["flops"]
    assert done["marks"]["compute_bound_prompt_tokens"] >= 1
