"""The few numbers of a decoder-only transformer that decide its bytes and FLOPs.

Read from a transformers-style config dict: a local folder's config.json, the "model"/"config"
of a run.json, or a preset's keyword arguments (keys a preset leaves out take transformers'
defaults). Llama, Mistral, Qwen2 (q/k/v biases) and Phi-3 (fused qkv and gate_up: the same
weights and FLOPs as separate projections) are covered. Mixture-of-experts models are out of
scope: which experts a token reads decides their bytes, and a config alone cannot say.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...contracts.run_record import parse_run_record
from ...contracts.safe_read import read_regular_text

MAX_CONFIG_BYTES = 16 << 20  # a config.json is a few kB (quantisation maps: a few MB)

DTYPE_BYTES = {
    "float32": 4,
    "fp32": 4,
    "float": 4,
    "bfloat16": 2,
    "bf16": 2,
    "float16": 2,
    "fp16": 2,
    "half": 2,
    "float8_e4m3fn": 1,
    "fp8": 1,
    "int8": 1,
}

_MOE_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
_BIASED_QKV_MODEL_TYPES = ("qwen2",)  # Qwen2 always has q/k/v biases; its config has no key for it


@dataclass(frozen=True)
class ModelShape:
    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied_embeddings: bool
    dtype_bytes: int
    qkv_bias: bool = False

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def layer_matrix_params(self) -> int:
        """Weights one token multiplies through in a layer: q, k, v, o, gate, up, down."""
        attention = self.hidden * (self.q_dim + 2 * self.kv_dim) + self.q_dim * self.hidden
        mlp = 3 * self.hidden * self.intermediate
        return attention + mlp

    @property
    def layer_params(self) -> int:
        """Matrices plus the two RMSNorm weights and any q/k/v biases."""
        bias = self.q_dim + 2 * self.kv_dim if self.qkv_bias else 0
        return self.layer_matrix_params + 2 * self.hidden + bias

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def parameters(self) -> int:
        """All parameters as transformers counts them (a tied lm_head is not counted twice)."""
        head = 0 if self.tied_embeddings else self.embedding_params
        return self.layers * self.layer_params + self.hidden + self.embedding_params + head


def dtype_bytes(dtype: str | None, default: int = 2) -> int:
    """Bytes per element of "bfloat16", "torch.float16", "fp32", ...; `default` when unknown."""
    if not dtype:
        return default
    key = str(dtype).removeprefix("torch.").lower()
    return DTYPE_BYTES.get(key, default)


def shape_from_config(config: dict[str, Any], dtype: str | None = None, name: str | None = None) -> ModelShape:
    """A ModelShape from a transformers config dict. `dtype` (what the model ran in) wins over the
    config's own dtype, which only says how the checkpoint was saved; bf16 when neither says."""
    for key in _MOE_KEYS:
        if (config.get(key) or 0) > 1:
            raise ValueError(f"mixture-of-experts models ({key}={config[key]}) are not covered by the roofline model")
    if "text_config" in config and "hidden_size" not in config:
        config = config["text_config"]
    try:
        hidden = int(config["hidden_size"])
        layers = int(config["num_hidden_layers"])
        heads = int(config["num_attention_heads"])
        intermediate = int(config["intermediate_size"])
        vocab = int(config["vocab_size"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"the model config lacks a decoder-only transformer's sizes ({exc})") from None
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    config_dtype = config.get("torch_dtype") or config.get("dtype")
    model_type = str(config.get("model_type") or "")
    label = name or config.get("_name_or_path") or model_type or "model"
    return ModelShape(
        name=str(label),
        hidden=hidden,
        layers=layers,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate=intermediate,
        vocab=vocab,
        tied_embeddings=bool(config.get("tie_word_embeddings", False)),
        dtype_bytes=dtype_bytes(dtype or config_dtype, default=2),
        qkv_bias=bool(config.get("attention_bias")) or model_type in _BIASED_QKV_MODEL_TYPES,
    )


def read_config_file(path: str | Path) -> dict[str, Any]:
    """config.json of a model folder (or the file itself); the "model"/"config" of a run.json."""
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    try:  # a regular file only (a FIFO would block, /dev/zero never ends), within MAX_CONFIG_BYTES
        data = json.loads(read_regular_text(path, MAX_CONFIG_BYTES))
    except FileNotFoundError:
        raise ValueError(f"no model config at {path}") from None
    except OSError as exc:
        raise ValueError(f"cannot read the model config {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read the model config {path}: {exc}") from None
    except RecursionError:
        raise ValueError(f"cannot read the model config {path}: nested too deeply") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    if isinstance(data.get("model"), dict):  # a run.json (ValueError when it is a malformed one)
        config = parse_run_record(data).model_config
        if config is not None:
            return config
    return data
