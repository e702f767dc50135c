"""The few numbers of a decoder-only transformer that decide its bytes and FLOPs.

Read from a transformers-style config dict: a local folder's config.json, the "model"/"config"
of a run.json, or a preset's keyword arguments (keys a preset leaves out take transformers'
defaults). Llama, Mistral, Qwen2 (q/k/v biases) and Qwen3, Phi-3 (fused qkv and gate_up: the same
weights and FLOPs as separate projections) are covered, and mixture-of-experts models: Mixtral,
Qwen2/3-MoE, gpt-oss (MXFP4 experts, alternating sliding-window layers) and DeepSeek-V3 (multi-head
latent attention, dense first layers, a shared expert, FP8 weights). Which experts a step's tokens
read is not in a config: the accounting assumes routing spreads tokens evenly (analysis.roofline.accounting).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from stepscope.contracts.run_record import parse_run_record
from stepscope.contracts.safe_read import read_regular_text

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
    # mixture of experts (experts 0: a dense model)
    experts: int = 0  # routed experts per MoE layer
    experts_per_token: int = 0
    expert_intermediate: int = 0  # one expert's FFN width
    shared_intermediate: int = 0  # the always-active shared experts' FFN width, all of them together
    moe_layers: int = 0  # layers with the MoE MLP (the others dense, `intermediate` wide); 0 with experts: all
    # what some models do differently
    attention_params: int = 0  # one layer's attention weights when not q/k/v/o from the heads (MLA); 0: from heads
    kv_elements: int = 0  # KV-cache elements per token per layer (MLA: latent + rope part); 0: K and V, 2 x kv_dim
    sliding_window: int = 0  # tokens a sliding-window layer attends to
    sliding_layers: int = 0  # layers with the sliding window (gpt-oss: every other one)
    weight_dtype_bytes: float = 0.0  # bytes per layer weight when quantised (FP8: 1); 0: dtype_bytes
    expert_dtype_bytes: float = 0.0  # bytes per expert weight (MXFP4 with its scales: 4.25 bits); 0: as the layer

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def is_moe(self) -> bool:
        return self.experts > 1

    @property
    def n_moe_layers(self) -> int:
        return (self.moe_layers or self.layers) if self.is_moe else 0

    @property
    def attention_matrix_params(self) -> int:
        """One layer's attention weights: q, k, v, o (or the model's own, MLA)."""
        return self.attention_params or self.hidden * (self.q_dim + 2 * self.kv_dim) + self.q_dim * self.hidden

    @property
    def kv_elements_per_token_layer(self) -> int:
        return self.kv_elements or 2 * self.kv_dim

    @property
    def expert_params(self) -> int:
        """One expert: gate, up, down."""
        return 3 * self.hidden * self.expert_intermediate

    @property
    def moe_always_params(self) -> int:
        """What every token of an MoE layer multiplies through besides its routed experts: shared experts, router."""
        return 3 * self.hidden * self.shared_intermediate + self.hidden * self.experts

    @property
    def dense_mlp_params(self) -> int:
        return 3 * self.hidden * self.intermediate

    @property
    def active_matrix_params(self) -> int:
        """Weights one token multiplies through, all layers: attention, its experts (or the dense MLP)."""
        moe = self.n_moe_layers * (self.experts_per_token * self.expert_params + self.moe_always_params)
        dense = (self.layers - self.n_moe_layers) * self.dense_mlp_params
        return self.layers * self.attention_matrix_params + moe + dense

    @property
    def layer_matrix_params(self) -> int:
        """Weights one token multiplies through in a layer (the mean over layers when they differ): q, k, v, o,
        gate, up, down; for an MoE layer its routed experts, the shared ones and the router."""
        return round(self.active_matrix_params / self.layers)

    @property
    def stored_matrix_params(self) -> int:
        """Every layer's matrices, every expert included."""
        moe = self.n_moe_layers * (self.experts * self.expert_params + self.moe_always_params)
        dense = (self.layers - self.n_moe_layers) * self.dense_mlp_params
        return self.layers * self.attention_matrix_params + moe + dense

    @property
    def layer_small_params(self) -> int:
        """The two RMSNorm weights and any q/k/v biases of a layer."""
        bias = self.q_dim + 2 * self.kv_dim if self.qkv_bias else 0
        return 2 * self.hidden + bias

    @property
    def layer_params(self) -> int:
        """Matrices plus the two RMSNorm weights and any q/k/v biases (the mean over layers when they differ)."""
        return round(self.stored_matrix_params / self.layers) + self.layer_small_params

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def parameters(self) -> int:
        """All parameters as transformers counts them (a tied lm_head is not counted twice)."""
        head = 0 if self.tied_embeddings else self.embedding_params
        layers = self.stored_matrix_params + self.layers * self.layer_small_params
        return layers + self.hidden + self.embedding_params + head

    @property
    def active_parameters(self) -> int:
        """Parameters one token reads: the embedding row aside, its layers' active weights and lm_head."""
        return self.active_matrix_params + self.layers * self.layer_small_params + self.hidden + self.embedding_params

    @property
    def weight_bytes_per_param(self) -> float:
        return self.weight_dtype_bytes or float(self.dtype_bytes)

    @property
    def expert_bytes_per_param(self) -> float:
        return self.expert_dtype_bytes or self.weight_bytes_per_param


def dtype_bytes(dtype: str | None, default: int = 2) -> int:
    """Bytes per element of "bfloat16", "torch.float16", "fp32", ...; `default` when unknown."""
    if not dtype:
        return default
    key = str(dtype).removeprefix("torch.").lower()
    return DTYPE_BYTES.get(key, default)


def shape_from_config(config: dict[str, Any], dtype: str | None = None, name: str | None = None) -> ModelShape:
    """A ModelShape from a transformers config dict. `dtype` (what the model ran in) wins over the
    config's own dtype, which only says how the checkpoint was saved; bf16 when neither says. A
    quantisation_config (FP8, MXFP4) sets the bytes of the weights it covers."""
    if "text_config" in config and "hidden_size" not in config:
        config = config["text_config"]
    try:
        hidden = _positive(config, "hidden_size")
        layers = _positive(config, "num_hidden_layers")
        heads = _positive(config, "num_attention_heads")
        intermediate = _positive(config, "intermediate_size")
        vocab = _positive(config, "vocab_size")
        kv_heads = int(config.get("num_key_value_heads") or heads)
        head_dim = int(config.get("head_dim") or hidden // heads)
        extra = _attention_fields(config, hidden, heads, layers)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"the model config lacks a decoder-only transformer's sizes ({exc})") from None
    try:
        extra.update(_moe_fields(config, layers))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"the mixture-of-experts config is incomplete ({exc})") from None
    if "qk_nope_head_dim" in config and "qk_rope_head_dim" in config:  # MLA: q.k runs over both parts
        head_dim = int(config["qk_nope_head_dim"]) + int(config["qk_rope_head_dim"])
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
        **extra,
        **_quantised_bytes(config),
    )


def _positive(config: dict[str, Any], key: str) -> int:
    value = int(config[key])
    if value < 1:
        raise ValueError(f"{key} must be positive, got {value}")
    return value


def _moe_fields(config: dict[str, Any], layers: int) -> dict[str, int]:
    """Experts, experts per token, their width, shared experts and how many layers are MoE, by family:
    Mixtral/gpt-oss (num_local_experts, intermediate_size is one expert), Qwen2/3-MoE (num_experts,
    moe_intermediate_size, mlp_only_layers, decoder_sparse_step, shared_expert_intermediate_size), DeepSeek-V3
    (n_routed_experts, n_shared_experts, first_k_dense_replace)."""
    experts = next((int(config[k]) for k in _MOE_KEYS if (config.get(k) or 0) > 1), 0)
    if not experts:
        return {}
    per_token = int(config.get("num_experts_per_tok") or config.get("experts_per_token") or config.get("top_k") or 0)
    if per_token < 1 or per_token > experts:
        raise ValueError(f"num_experts_per_tok {per_token} is not within 1..{experts}")
    width = int(config.get("moe_intermediate_size") or config["intermediate_size"])
    shared = int(config.get("shared_expert_intermediate_size") or 0)
    shared += int(config.get("n_shared_experts") or 0) * width
    dense = int(config.get("first_k_dense_replace") or 0) + len(config.get("mlp_only_layers") or [])
    step = int(config.get("decoder_sparse_step") or config.get("moe_layer_freq") or 1)
    moe_layers = len(range(0, layers - dense, max(step, 1)))
    return {
        "experts": experts,
        "experts_per_token": per_token,
        "expert_intermediate": width,
        "shared_intermediate": shared,
        "moe_layers": moe_layers,
    }


def _attention_fields(config: dict[str, Any], hidden: int, heads: int, layers: int) -> dict[str, int]:
    """DeepSeek's multi-head latent attention (its weights and its compressed KV cache) and sliding-window
    layers (gpt-oss's layer_types; Mistral's sliding_window on every layer)."""
    out: dict[str, int] = {}
    if config.get("kv_lora_rank"):
        kv_rank, rope = int(config["kv_lora_rank"]), int(config["qk_rope_head_dim"])
        nope, v_dim = int(config["qk_nope_head_dim"]), int(config.get("v_head_dim") or config["qk_nope_head_dim"])
        q_rank = int(config.get("q_lora_rank") or 0)
        q = hidden * q_rank + q_rank * heads * (nope + rope) if q_rank else hidden * heads * (nope + rope)
        out["attention_params"] = (
            q + hidden * (kv_rank + rope) + kv_rank * heads * (nope + v_dim) + heads * v_dim * hidden
        )
        out["kv_elements"] = kv_rank + rope
    window = int(config.get("sliding_window") or 0)
    types = config.get("layer_types")
    if window and isinstance(types, list) and types:
        out.update(sliding_window=window, sliding_layers=sum(t == "sliding_attention" for t in types[:layers]))
    elif window and str(config.get("model_type") or "") == "mistral":
        out.update(sliding_window=window, sliding_layers=layers)
    return out


_MXFP4_BYTES = 4.25 / 8  # 4-bit values and one 8-bit scale per 32


def _quantised_bytes(config: dict[str, Any]) -> dict[str, float]:
    """Weight bytes a quantisation_config sets: MXFP4 (gpt-oss) on the experts, FP8 (DeepSeek-V3) on every layer
    weight; the embeddings and lm_head stay in the model's dtype."""
    quant = config.get("quantization_config") or {}
    method = str(quant.get("quant_method") or "").lower() if isinstance(quant, dict) else ""
    if method == "mxfp4":
        return {"expert_dtype_bytes": _MXFP4_BYTES}
    if method in ("fp8", "fbgemm_fp8", "compressed-tensors-fp8"):
        return {"weight_dtype_bytes": 1.0}
    return {}


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


def shape_from_form(
    name: str,
    layers: int,
    hidden: int,
    heads: int,
    kv_heads: int,
    vocab: int,
    dtype: str = "bfloat16",
    active_parameters: float | None = None,
    parameters: float | None = None,
    experts: int = 0,
    experts_per_token: int = 0,
    intermediate: int | None = None,
    head_dim: int | None = None,
    tied_embeddings: bool = False,
) -> ModelShape:
    """A ModelShape from the few numbers a person knows of a model (the app's small form): the MLP width comes
    from `intermediate` when given, else from the parameter count (a dense model: all parameters; an MoE model:
    the active ones, with `experts` and `experts_per_token`), counted the way ModelShape counts them."""
    sizes = (("layers", layers), ("hidden", hidden), ("heads", heads), ("KV heads", kv_heads), ("vocab", vocab))
    for key, value in sizes:
        if int(value) < 1:
            raise ValueError(f"{key} must be at least 1, got {value}")
    if heads % kv_heads:
        raise ValueError(f"heads ({heads}) must be a multiple of KV heads ({kv_heads})")
    moe = experts > 1
    if moe and not 1 <= experts_per_token <= experts:
        raise ValueError(f"experts per token must be within 1..{experts}, got {experts_per_token}")
    base = ModelShape(
        name=name or "model",
        hidden=int(hidden),
        layers=int(layers),
        heads=int(heads),
        kv_heads=int(kv_heads),
        head_dim=int(head_dim or hidden // heads),
        intermediate=int(intermediate or 0),
        vocab=int(vocab),
        tied_embeddings=bool(tied_embeddings),
        dtype_bytes=dtype_bytes(dtype),
        experts=int(experts) if moe else 0,
        experts_per_token=int(experts_per_token) if moe else 0,
    )
    width = intermediate or _width_from_count(base, active_parameters if moe else (parameters or active_parameters))
    if moe:
        return replace(base, expert_intermediate=width, intermediate=width)
    return replace(base, intermediate=width)


def _width_from_count(shape: ModelShape, count: float | None) -> int:
    """The MLP (one expert's) width that makes the shape's parameter count (active count, for MoE) `count`."""
    if not count:
        raise ValueError("give the MLP width (intermediate) or the parameter count (active parameters for MoE)")
    head = shape.embedding_params  # lm_head: in both counts (the input table is in `parameters` only)
    if not shape.is_moe and not shape.tied_embeddings:
        head += shape.embedding_params
    per_layer = (float(count) - head - shape.hidden) / shape.layers - shape.layer_small_params
    per_layer -= shape.attention_matrix_params + (shape.hidden * shape.experts if shape.is_moe else 0)
    per_token = shape.experts_per_token if shape.is_moe else 1
    width = round(per_layer / (3 * shape.hidden * per_token))
    if width < 1:
        raise ValueError(f"{count:.3g} parameters are too few for {shape.layers} layers of width {shape.hidden}")
    return width
