"""A model shape proposed from what a trace shows (issue 45): in the JSON, on the CLI's stderr, on the Analyze page.

Truth comes from where the captures came from, never from Stepscope: tests/data/real/PROVENANCE.md (AMD-AGI/TraceLens,
MIT: vLLM gpt-oss, tensor parallel 8 on a B200; SGLang Qwen3-8B; HF Qwen1.5-0.5B; facebookresearch/HTA, MIT) and the
published configs of those models (gpt-oss-120b 36 layers, gpt-oss-20b 24, Qwen3-8B 36, hidden 2880 for gpt-oss),
and the shipped TP sample's run.json (tiny-llama on 2 ranks).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from stepscope.analysis.front_door import NO_CACHE, open_run, open_trace
from tests.conftest import ROOT, real_trace

TP_SAMPLE = ROOT / "sample_traces" / "cpu_tiny-llama_tp2_eager"


def _proposal(name: str) -> dict:
    report = open_trace(real_trace(name), cache=NO_CACHE).report
    return report["summary"]["model_proposal"]


def test_vllm_tensor_parallel_b200_trace_proposes_gpt_oss_on_8_ranks():
    p = _proposal("tracelens_vllm_gptoss_prefill_eager_b200.json.gz")
    assert (p["layers"], p["tensor_parallel"], p["dtype"], p["moe"]) == (36, 8, "bfloat16", True)
    assert p["hidden"] == 2880 and p["vocab"] == 201088  # gpt-oss's published hidden size and vocabulary
    assert p["preset"] == "gpt-oss-120b" and p["preset"].startswith("gpt-oss")  # PROVENANCE: vLLM gpt-oss, TP 8
    assert "TP 8" in p["text"] and p["text"].endswith("?")
    assert {"layers", "tensor_parallel", "dtype", "moe", "hidden", "vocab"} <= set(p["evidence"])
    assert "25136 x 8 ranks" in p["evidence"]["vocab"]  # each rank's lm_head shard
    roof = p["weights_roofline"]
    assert roof["device"] == "B200" and roof["bytes_per_rank"] > 0 and roof["floor_us"] > 0
    assert roof["measured_step_us"] is None  # a prefill-only trace: no decode step to set the floor against


ROCM = ["tracelens_vllm_gptoss_decode_fullgraph_rocm.json.gz", "tracelens_vllm_gptoss_mixed_piecewise_rocm.json.gz"]


@pytest.mark.parametrize("name", ROCM)
def test_vllm_rocm_traces_propose_a_24_layer_gpt_oss(name):
    p = _proposal(name)
    assert p["layers"] == 24 and p["moe"] and p["dtype"] == "bfloat16" and p["hidden"] == 2880
    assert p["preset"] == "gpt-oss-20b"  # the 24-layer gpt-oss (published config)
    assert p["weights_roofline"]["device"] == "MI300X"


def test_decode_trace_gets_the_weights_only_floor_against_its_decode_step():
    p = _proposal("tracelens_vllm_gptoss_decode_fullgraph_rocm.json.gz")
    roof = p["weights_roofline"]
    assert roof["step_kind"] == "decode" and roof["measured_step_us"] > roof["floor_us"] > 0
    assert roof["pct_of_floor"] == pytest.approx(100 * roof["floor_us"] / roof["measured_step_us"])


def test_sglang_and_hf_traces():
    sglang = _proposal("tracelens_sglang_qwen3-8b_decode_mi300x.json.gz")
    assert sglang["preset"] == "qwen3-8b" and sglang["vocab"] == 151936 and not sglang["moe"]
    hf = _proposal("tracelens_hf_qwen1.5-0.5b_forward_h100.json.gz")  # Qwen1.5-0.5B: no preset has its shape
    assert (hf["layers"], hf["hidden"], hf["vocab"], hf["heads"]) == (24, 1024, 151936, 16)
    assert hf["preset"] is None and hf["candidates"] == [] and hf["weights_roofline"] is None


def test_a_trace_without_a_repeating_layer_proposes_nothing():
    assert _proposal("hta_alexnet_a100.json.gz") is None


def test_shipped_tp_sample_proposes_what_its_run_json_says():
    run = json.loads((TP_SAMPLE / "run.json").read_text())
    opened = open_run(TP_SAMPLE, cache=NO_CACHE)
    for rank in opened.report["ranks"]:
        p = rank["summary"]["model_proposal"]
        assert p["tensor_parallel"] == run["spec"]["ranks"] == 2
        assert p["layers"] == run["model"]["config"]["num_hidden_layers"]
        assert p["preset"] == run["spec"]["preset"]


def test_the_proposal_feeds_no_figure_until_it_is_accepted():
    """Without a model the answer has no roofline; accepting the proposed preset changes the answer's key and adds
    the roofline."""
    path = real_trace("tracelens_vllm_gptoss_decode_fullgraph_rocm.json.gz")
    guessed = open_trace(path, cache=NO_CACHE)
    assert guessed.analysis.roofline is None
    assert not [f for f in guessed.report["findings"] if f["id"].startswith("roofline")]
    accepted = open_trace(path, cache=NO_CACHE, model=guessed.report["summary"]["model_proposal"]["preset"])
    assert accepted.analysis.roofline is not None and accepted.key != guessed.key


def test_cli_prints_the_proposal_on_stderr(tmp_path):
    trace = real_trace("tracelens_vllm_gptoss_prefill_eager_b200.json.gz")
    env = {"STEPSCOPE_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "analyze", str(trace), "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stderr.splitlines() if "model proposed" in x)
    assert "gpt-oss-120b" in line and "--model gpt-oss-120b" in line and "per rank per decode step" in line
    assert json.loads(done.stdout)["summary"]["model_proposal"]["preset"] == "gpt-oss-120b"


def _samples(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / "samples" / name.split(".json")[0]
    folder.mkdir(parents=True)
    (folder / "trace.json.gz").write_bytes(real_trace(name).read_bytes())
    return folder.parent


def test_analyze_page_proposes_prefills_and_accepts(tmp_path, monkeypatch):
    from stepscope.app.navigation import ANALYZE_KEY
    from tests.app_pages import page_test

    name = "tracelens_vllm_gptoss_decode_fullgraph_rocm.json.gz"
    monkeypatch.setenv("STEPSCOPE_SAMPLES_DIR", str(_samples(tmp_path, name)))
    monkeypatch.setenv("STEPSCOPE_RUNS_DIR", str(tmp_path / "runs"))
    at = page_test("analyze", 240)
    at.session_state[ANALYZE_KEY] = "sample:" + name.split(".json")[0]
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    texts = [m.value.replace("\\", "") for m in (*at.markdown, *at.info)]
    assert any("Proposed model" in t and "gpt-oss-20b" in t for t in texts)  # near the top, labelled
    assert any("Weights-only roofline (proposed)" in t and "per rank per decode step" in t for t in texts)
    assert not any("pick the model it ran" in i.value for i in at.info)
    inputs = {n.label: n.value for n in at.number_input}
    assert inputs["Layers"] == 24 and inputs["Hidden"] == 2880 and inputs["Vocabulary"] == 201088
    assert not [d for d in at.dataframe if "% of roofline" in d.value.columns]  # a guess feeds no figure
    next(b for b in at.button if b.label == "Use gpt-oss-20b").click().run()
    assert not at.exception, [e.message for e in at.exception]
    assert [d for d in at.dataframe if "% of roofline" in d.value.columns]  # accepted: read against it
    assert not any("Proposed model" in m.value for m in at.markdown)
