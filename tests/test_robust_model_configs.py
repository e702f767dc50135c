"""Issue 39 item 1: a local model folder whose config.json is absurd in any dimension is refused from the config's
numbers, before transformers builds (or even reads) anything: one `error:` line, exit 2, no traceback.

The configs are synthetic, written here by code: a tiny Llama/Qwen2 shape with one number blown up.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from stepscope.collectors.errors import CollectorError
from stepscope.collectors.model_loading import MAX_LAYERS, check_memory, config_parameters

REPO = Path(__file__).resolve().parents[1]

TINY = dict(
    model_type="llama",
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    vocab_size=256,
    max_position_embeddings=512,
)

ABSURD = {
    "layers": dict(num_hidden_layers=10**9),
    "layers-qwen2": dict(model_type="qwen2", num_hidden_layers=10**9),  # Qwen2Config builds a list per layer
    "layers-just-past": dict(num_hidden_layers=MAX_LAYERS + 1),
    "experts": dict(model_type="mixtral", num_local_experts=10**12, num_experts_per_tok=2),
    "heads": dict(num_attention_heads=10**12, num_key_value_heads=10**12, head_dim=64),
    "heads-past-hidden": dict(num_attention_heads=1000, num_key_value_heads=1000),
    "positions": dict(max_position_embeddings=10**15),
    "hidden": dict(hidden_size=10**9),
    "vocab": dict(vocab_size=10**13),
    "intermediate": dict(intermediate_size=10**13),
    "not-a-number": dict(num_hidden_layers="many"),
    "negative": dict(vocab_size=-3),
    "float": dict(hidden_size=64.5),
}


def _folder(tmp_path: Path, change: dict) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**TINY, **change}))
    return folder


@pytest.mark.parametrize("case", list(ABSURD))
def test_an_absurd_config_is_refused_by_its_numbers(case):
    with pytest.raises(CollectorError) as err:
        check_memory({**TINY, **ABSURD[case]}, torch.device("cpu"), torch.float32, 1, 64)
    assert "\n" not in str(err.value)


def test_the_estimate_matches_the_built_model_of_a_sane_config():
    """The same function prices sane configs too: within 1% above the parameters transformers builds."""
    from transformers import AutoConfig, AutoModelForCausalLM

    for change in (
        {},
        dict(model_type="qwen2"),
        dict(model_type="mixtral", num_local_experts=4, num_experts_per_tok=2),
    ):
        config = AutoConfig.for_model(**{**TINY, **change})
        with torch.device("meta"):
            built = sum(p.numel() for p in AutoModelForCausalLM.from_config(config).parameters())
        estimate = config_parameters(config.to_dict())
        assert built <= estimate <= 1.01 * built, change


@pytest.mark.parametrize("case", ["layers", "layers-qwen2", "experts", "heads", "positions"])
def test_run_refuses_an_absurd_model_folder_in_one_line(tmp_path, case):
    """Through the command line as a user runs it; the subprocess timeout is a hang guard, not a timing."""
    folder = _folder(tmp_path, ABSURD[case])
    cmd = [sys.executable, "-m", "app.cli", "run", "--model", str(folder), "--device", "cpu", "--out", str(tmp_path)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert not list(tmp_path.glob("*/trace.json.gz"))
