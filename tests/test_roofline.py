"""Roofline: the seed's Llama-3-8B on H100 figures, the GPU table, the CLI and expected vs measured."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from stepscope.analysis.model import Analysis, Segmentation
from stepscope.analysis.roofline import (
    Hardware,
    calibrate_cpu,
    compute_bound_prompt_tokens,
    decode_cost,
    estimate,
    gpu_by_name,
    kv_bytes_per_token,
    match_gpu,
    prefill_cost,
    roofline_for_run,
    roofline_report,
    shape_from_config,
    shape_from_run_record,
    with_roofline,
)
from stepscope.analysis.summary import Summary
from stepscope.contracts.presets import PRESETS
from stepscope.parsers.run_sidecar import read_sidecar
from tests.conftest import ROOT

SEED_H100 = Hardware("H100 (seed)", 3350e9, 700e12)


def preset_shape(name: str, dtype: str = "bfloat16"):
    preset = PRESETS[name]
    model_type = preset.config_class.removesuffix("Config").lower()
    return shape_from_config({"model_type": model_type, **preset.config_kwargs}, dtype=dtype, name=name)


def near(value: float, target: float, tolerance: float = 0.10) -> bool:
    return abs(value - target) <= tolerance * target


# --- the seed: Llama-3-8B, bf16, one H100 at 3350 GB/s and 700 TFLOP/s ---------------------------


def test_seed_prefill_of_7_tokens_is_memory_bound_at_about_4_2_ms():
    e = estimate(prefill_cost(preset_shape("llama-3-8b"), 7), SEED_H100)
    assert e.bound == "memory"
    assert near(e.expected_ms, 4.2), e.expected_ms
    assert near(e.cost.flops / 1e9, 100), e.cost.flops  # "compute 100 GFLOP"


def test_seed_prefill_of_2000_tokens_is_compute_bound_at_about_41_ms():
    e = estimate(prefill_cost(preset_shape("llama-3-8b"), 2000), SEED_H100)
    assert e.bound == "compute"
    assert near(e.expected_ms, 41), e.expected_ms
    assert near(e.cost.flops / 1e12, 28.6), e.cost.flops


def test_seed_decode_step_reads_about_16_1_gb_in_about_4_8_ms():
    e = estimate(decode_cost(preset_shape("llama-3-8b"), context=7), SEED_H100)
    assert e.bound == "memory"
    assert near(e.cost.bytes / 1e9, 16.1), e.cost.bytes
    assert near(e.expected_ms, 4.8), e.expected_ms
    assert near(e.cost.flops / 1e9, 16), e.cost.flops


def test_seed_per_layer_figures_and_kv_cache_per_token():
    shape = preset_shape("llama-3-8b")
    layer = prefill_cost(shape, 7).layer
    assert near(layer.gemm_flops / 1e9, 3.1)  # "Per layer: ~3.1 GFLOP, ~435 MB of weight reads"
    assert near(layer.weight_bytes / 1e6, 435)
    assert kv_bytes_per_token(shape) == 128 * 1024
    assert shape.parameters == 8_030_261_248  # Meta-Llama-3-8B


def test_seed_crossover_between_200_and_400_prompt_tokens():
    n = compute_bound_prompt_tokens(preset_shape("llama-3-8b"), SEED_H100)
    assert 200 <= n <= 400, n
    shape = preset_shape("llama-3-8b")
    assert estimate(prefill_cost(shape, n - 1), SEED_H100).bound == "memory"
    assert estimate(prefill_cost(shape, n), SEED_H100).bound == "compute"


# --- model shapes -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("preset", "parameters"),
    [("qwen2.5-0.5b", 494_032_768), ("phi-3-mini", 3_821_079_552), ("qwen2.5-7b", 7_615_616_512)],
)
def test_parameter_counts_match_the_published_models(preset, parameters):
    assert preset_shape(preset).parameters == parameters


def test_dtype_scales_bytes_not_flops_and_an_incomplete_moe_config_is_refused():
    bf16, fp32 = preset_shape("tiny-llama", "bfloat16"), preset_shape("tiny-llama", "float32")
    assert prefill_cost(fp32, 32).bytes == 2 * prefill_cost(bf16, 32).bytes
    assert prefill_cost(fp32, 32).flops == prefill_cost(bf16, 32).flops
    config = {**PRESETS["tiny-llama"].config_kwargs, "num_local_experts": 8}  # experts, but how many per token?
    with pytest.raises(ValueError, match="mixture-of-experts config is incomplete"):
        shape_from_config(config)


def test_batch_multiplies_flops_but_reads_the_weights_once():
    shape = preset_shape("llama-3-8b")
    one, eight = decode_cost(shape, 100, batch=1), decode_cost(shape, 100, batch=8)
    assert eight.flops == pytest.approx(8 * one.flops, rel=1e-9)
    assert eight.weight_bytes - one.weight_bytes == 7 * shape.hidden * shape.dtype_bytes  # 7 more embedding rows
    assert eight.kv_read_bytes == 8 * one.kv_read_bytes


# --- GPU table ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "memory", "row"),
    [
        ("NVIDIA H100 80GB HBM3", None, "H100 SXM"),
        ("NVIDIA H100 PCIe", None, "H100 PCIe"),
        ("NVIDIA H100", 102_085_492_736, "H100 NVL"),
        ("NVIDIA H200", None, "H200"),
        ("NVIDIA A100-SXM4-80GB", None, "A100 80GB"),
        ("NVIDIA A100-SXM4-40GB", None, "A100 40GB"),
        ("NVIDIA A100-PG509-200", 42_297_524_224, "A100 40GB"),
        ("NVIDIA A100-PCIE-40GB", None, "A100 40GB"),
        ("Tesla V100-DGXS-32GB", None, "V100"),
        ("NVIDIA B200", None, "B200"),
        ("AMD Instinct MI300X", None, "MI300X"),
        ("NVIDIA L4", None, "L4"),
        ("NVIDIA L40S", None, "L40S"),
        ("NVIDIA A10G", None, "A10G"),
        ("NVIDIA GeForce RTX 4090", None, "RTX 4090"),
    ],
)
def test_trace_device_names_match_table_rows(name, memory, row):
    assert match_gpu(name, memory).name == row


@pytest.mark.parametrize("name", [None, "", "   ", "NVIDIA GeForce RTX 2080 Ti", "cpu"])
def test_unknown_or_empty_device_names_match_nothing(name):
    assert match_gpu(name) is None


def test_table_figures_are_the_datasheets_and_user_names_resolve():
    h100 = gpu_by_name("h100")
    assert (h100.name, h100.memory_bytes_per_s, h100.flops_per_s) == ("H100 SXM", 3350e9, 989e12)
    assert gpu_by_name("MI300X").flops_per_s == pytest.approx(1307.4e12)
    scaled = h100.scaled(0.8, 0.7)
    assert scaled.memory_bytes_per_s == pytest.approx(2680e9) and scaled.flops_per_s == pytest.approx(692.3e12)
    with pytest.raises(ValueError, match="unknown GPU"):
        gpu_by_name("tpu v5")


def test_cpu_calibration_measures_positive_figures_once():
    cpu = calibrate_cpu()
    assert cpu.kind == "cpu" and cpu.memory_bytes_per_s > 1e8 and cpu.flops_per_s > 1e8
    assert calibrate_cpu() == cpu  # stored once (analysis/roofline/machine.py; tests/test_machine_figures.py)


# --- command line -------------------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess:
    """README's command, `python -m app.cli roofline ...`, so the subcommand's wiring is under test too."""
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "roofline", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_cli_json_has_the_promised_shape_and_the_seed_numbers():
    out = _cli(
        "--model", "llama-3-8b", "--gpu", "H100", "--prompt-tokens", "7", "--new-tokens", "100",
        "--batch", "1", "--hbm-gbps", "3350", "--tflops", "700", "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert set(report) == {"phases", "kv_bytes_per_token", "crossover_prompt_tokens"}
    assert set(report["phases"]) == {"prefill", "decode"}
    for phase in report["phases"].values():
        assert set(phase) == {"bytes", "flops", "expected_ms", "bound"}
        assert isinstance(phase["bytes"], int) and isinstance(phase["flops"], int)
        assert isinstance(phase["expected_ms"], float) and phase["bound"] in ("memory", "compute")
    assert near(report["phases"]["prefill"]["expected_ms"], 4.2)
    assert near(report["phases"]["decode"]["expected_ms"], 4.8)
    assert report["kv_bytes_per_token"] == 131072
    assert 200 <= report["crossover_prompt_tokens"] <= 400


def test_cli_table_figures_text_output_and_errors():
    table = json.loads(_cli("--model", "llama-3-8b", "--gpu", "NVIDIA H100 80GB HBM3", "--json").stdout)
    assert table["phases"]["decode"]["bound"] == "memory"
    text = _cli("--model", "tiny-qwen2", "--gpu", "a100-80gb", "--prompt-tokens", "64")
    assert text.returncode == 0 and "prefill" in text.stdout and "compute bound at" in text.stdout
    bad_calls = (
        ["--model", "nope", "--gpu", "h100"],
        ["--model", "tiny-llama", "--gpu", "tpu"],
        ["--model", "tiny-llama", "--hbm-gbps", "100"],
        ["--model", "tiny-llama", "--gpu", "h100", "--batch", "0"],
    )
    for bad in bad_calls:
        out = _cli(*bad)
        assert out.returncode == 2, bad
        assert out.stderr.startswith("error:") and out.stderr.count("\n") == 1, out.stderr


def test_cli_reads_a_model_folder_config(tmp_path):
    config = {"model_type": "llama", **PRESETS["llama-3-8b"].config_kwargs}
    (tmp_path / "config.json").write_text(json.dumps(config))
    out = _cli("--model", str(tmp_path), "--gpu", "h100", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["kv_bytes_per_token"] == 131072


# --- expected vs measured -------------------------------------------------------------------------------


def _analysis(prefill_ms: float, decode_ms: float, idle_share: float, decodes: int = 9) -> Analysis:
    """A request of 7 prompt tokens: one prefill and `decodes` decode steps, back to back."""
    spans = [prefill_ms] + [decode_ms] * decodes
    ends = np.cumsum(np.array(spans) * 1e6).astype(np.int64)
    starts = np.concatenate([[0], ends[:-1]])
    steps = pd.DataFrame(
        {
            "kind": ["prefill"] + ["decode"] * decodes,
            "request": 0,
            "index": np.arange(decodes + 1),
            "start_ns": starts,
            "end_ns": ends,
            "tokens": pd.array([7] + [1] * decodes, dtype="Int64"),
            "batch": pd.array([1] * (decodes + 1), dtype="Int64"),
            "gpu_idle_ns": (np.array([0] + [decode_ms * idle_share * 1e6] * decodes)).astype(np.int64),
            "outlier": False,
        }
    )
    return Analysis(
        steps=steps,
        gaps=pd.DataFrame(),
        summary=Summary(on_gpu=True, decode_steps=decodes),
        findings=(),
        segmentation=Segmentation("stepscope-markers", 1.0),
        top_kernels=pd.DataFrame(),
    )


def test_report_compares_each_phase_with_its_floor_and_says_so():
    shape = preset_shape("llama-3-8b")
    expected_decode = estimate(decode_cost(shape, 7 + 4), SEED_H100).expected_ms  # mean context 7 + (1..9)-1
    analysis = _analysis(prefill_ms=9.0, decode_ms=expected_decode / 0.31, idle_share=0.62)
    report = roofline_report(analysis, shape, SEED_H100)
    rows = report.phases.set_index("phase")
    assert rows.loc["decode", "efficiency_pct"] == pytest.approx(31, abs=0.5)
    assert rows.loc["decode", "context"] == 11 and rows.loc["decode", "bound"] == "memory"
    assert rows.loc["prefill", "efficiency_pct"] == pytest.approx(100 * rows.loc["prefill", "expected_ms"] / 9.0)
    decode = next(f for f in report.findings if f.id == "roofline-decode")
    assert decode.title == "Decode runs at 31% of the HBM bandwidth roofline; 62% of each step the GPU is idle"
    assert decode.severity == "warn"
    merged = with_roofline(analysis, report)
    assert merged.summary.roofline.decode_roofline_pct == pytest.approx(31, abs=0.5)
    assert merged.summary.roofline.prefill_bound == "memory"
    assert merged.summary.roofline.kv_bytes_per_token == 131072
    assert len(merged.findings) == 2 and analysis.findings == ()


def test_report_without_prefill_length_leaves_prefill_out():
    analysis = _analysis(5.0, 5.0, 0.1)
    analysis.steps["tokens"] = pd.array([pd.NA] * len(analysis.steps), dtype="Int64")
    report = roofline_report(analysis, preset_shape("llama-3-8b"), SEED_H100)
    assert list(report.phases["phase"]) == ["decode"] and report.notes
    assert report.summary.prefill_expected_ms is None
    with_prompt = roofline_report(analysis, preset_shape("llama-3-8b"), SEED_H100, prompt_tokens=7)
    assert list(with_prompt.phases["phase"]) == ["prefill", "decode"]


def test_run_json_beside_a_trace_gives_the_model_and_the_device(tmp_path):
    config = {"model_type": "llama", "dtype": "float32", **PRESETS["llama-3-8b"].config_kwargs}
    record = {
        "schema": "stepscope.run/1",
        "spec": {"batch": 1},
        "device": "NVIDIA H100 80GB HBM3",
        "device_type": "cuda",
        "model": {"source": "preset:llama-3-8b", "config": config},
        "dtype": "bfloat16",
        "prompt_len": 7,
    }
    (tmp_path / "run.json").write_text(json.dumps(record))
    trace = tmp_path / "trace.json.gz"
    sidecar = read_sidecar(trace)
    assert sidecar.usable and sidecar.record.prompt_len == 7
    shape = shape_from_run_record(sidecar.record)
    assert shape.dtype_bytes == 2 and shape.name == "llama-3-8b"  # run dtype wins over the config's
    report = roofline_for_run(sidecar.record, _analysis(9.0, 15.0, 0.5), device_name=None)
    assert report.hardware.name == "H100 SXM" and len(report.findings) == 2
    assert read_sidecar(tmp_path / "elsewhere" / "trace.json").record is None


def test_real_trace_device_names_reach_the_table():
    from stepscope.analysis.roofline import timeline_device
    from stepscope.parsers import load_trace
    from tests.conftest import real_trace

    for name, row in (
        ("tracelens_sglang_qwen3-8b_decode_mi300x.json.gz", "MI300X"),  # named in the metadata only
        ("hta_alexnet_a100.json.gz", "A100 40GB"),  # "A100-PG509-200", 42 GB
        ("tracelens_hf_qwen1.5-0.5b_forward_h100.json.gz", "H100 SXM"),
    ):
        assert match_gpu(*timeline_device(load_trace(real_trace(name)))).name == row
