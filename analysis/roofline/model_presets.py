"""Today's common model families as the config.json the roofline reads: the keys of each model's published
transformers config (Hugging Face model card, config.json) that decide its bytes and FLOPs.

    analysis_preset("qwen3-30b-a3b")   # a config dict for shape_from_config, or None
    ANALYSIS_PRESETS                   # the names, in family order

These are for reading traces of real deployments (vLLM, SGLang) against a model; the collectors' presets
(collectors/presets.py) build models to profile and stay apart. Each entry names its source; the published
parameter counts (total, active) are checked in tests/test_roofline_presets.py.
"""

from __future__ import annotations

import copy
from typing import Any

_GPT_OSS_LAYER_TYPES = ["sliding_attention", "full_attention"]
_MXFP4 = {"quant_method": "mxfp4", "modules_to_not_convert": ["self_attn", "router", "embed_tokens", "lm_head"]}

_PRESETS: dict[str, dict[str, Any]] = {
    # meta-llama/Meta-Llama-3-8B config.json: 8.03B parameters
    "llama-3-8b": dict(
        model_type="llama",
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        vocab_size=128256,
        tie_word_embeddings=False,
    ),
    # meta-llama/Llama-3.1-70B config.json: 70.6B parameters
    "llama-3.1-70b": dict(
        model_type="llama",
        hidden_size=8192,
        intermediate_size=28672,
        num_hidden_layers=80,
        num_attention_heads=64,
        num_key_value_heads=8,
        vocab_size=128256,
        tie_word_embeddings=False,
    ),
    # meta-llama/Llama-3.2-1B config.json: 1.24B parameters, tied embeddings
    "llama-3.2-1b": dict(
        model_type="llama",
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=16,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=64,
        vocab_size=128256,
        tie_word_embeddings=True,
    ),
    # Qwen/Qwen3-0.6B config.json: 0.6B parameters, head_dim 128 (not hidden / heads), tied embeddings
    "qwen3-0.6b": dict(
        model_type="qwen3",
        hidden_size=1024,
        intermediate_size=3072,
        num_hidden_layers=28,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
        vocab_size=151936,
        tie_word_embeddings=True,
    ),
    # Qwen/Qwen3-8B config.json: 8.2B parameters
    "qwen3-8b": dict(
        model_type="qwen3",
        hidden_size=4096,
        intermediate_size=12288,
        num_hidden_layers=36,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        vocab_size=151936,
        tie_word_embeddings=False,
    ),
    # Qwen/Qwen3-32B config.json: 32.8B parameters
    "qwen3-32b": dict(
        model_type="qwen3",
        hidden_size=5120,
        intermediate_size=25600,
        num_hidden_layers=64,
        num_attention_heads=64,
        num_key_value_heads=8,
        head_dim=128,
        vocab_size=151936,
        tie_word_embeddings=False,
    ),
    # Qwen/Qwen3-30B-A3B config.json: 30.5B parameters, 3.3B active; 128 experts, 8 per token
    "qwen3-30b-a3b": dict(
        model_type="qwen3_moe",
        hidden_size=2048,
        intermediate_size=6144,
        moe_intermediate_size=768,
        num_hidden_layers=48,
        num_attention_heads=32,
        num_key_value_heads=4,
        head_dim=128,
        num_experts=128,
        num_experts_per_tok=8,
        decoder_sparse_step=1,
        mlp_only_layers=[],
        vocab_size=151936,
        tie_word_embeddings=False,
    ),
    # Qwen/Qwen3-235B-A22B config.json: 235B parameters, 22B active
    "qwen3-235b-a22b": dict(
        model_type="qwen3_moe",
        hidden_size=4096,
        intermediate_size=12288,
        moe_intermediate_size=1536,
        num_hidden_layers=94,
        num_attention_heads=64,
        num_key_value_heads=4,
        head_dim=128,
        num_experts=128,
        num_experts_per_tok=8,
        decoder_sparse_step=1,
        mlp_only_layers=[],
        vocab_size=151936,
        tie_word_embeddings=False,
    ),
    # openai/gpt-oss-20b config.json: 21B parameters, 3.6B active; MXFP4 experts, every other layer a 128-token
    # sliding window
    "gpt-oss-20b": dict(
        model_type="gpt_oss",
        hidden_size=2880,
        intermediate_size=2880,
        num_hidden_layers=24,
        num_attention_heads=64,
        num_key_value_heads=8,
        head_dim=64,
        num_local_experts=32,
        experts_per_token=4,
        sliding_window=128,
        layer_types=_GPT_OSS_LAYER_TYPES * 12,
        attention_bias=True,
        vocab_size=201088,
        tie_word_embeddings=False,
        quantization_config=_MXFP4,
    ),
    # openai/gpt-oss-120b config.json: 117B parameters, 5.1B active
    "gpt-oss-120b": dict(
        model_type="gpt_oss",
        hidden_size=2880,
        intermediate_size=2880,
        num_hidden_layers=36,
        num_attention_heads=64,
        num_key_value_heads=8,
        head_dim=64,
        num_local_experts=128,
        experts_per_token=4,
        sliding_window=128,
        layer_types=_GPT_OSS_LAYER_TYPES * 18,
        attention_bias=True,
        vocab_size=201088,
        tie_word_embeddings=False,
        quantization_config=_MXFP4,
    ),
    # deepseek-ai/DeepSeek-V3 config.json: 671B parameters (the multi-token-prediction module aside), 37B active;
    # MLA, 3 dense layers first, 1 shared + 256 routed experts (8 per token), FP8 weights
    "deepseek-v3": dict(
        model_type="deepseek_v3",
        hidden_size=7168,
        intermediate_size=18432,
        moe_intermediate_size=2048,
        num_hidden_layers=61,
        num_attention_heads=128,
        num_key_value_heads=128,
        n_routed_experts=256,
        n_shared_experts=1,
        num_experts_per_tok=8,
        first_k_dense_replace=3,
        moe_layer_freq=1,
        q_lora_rank=1536,
        kv_lora_rank=512,
        qk_nope_head_dim=128,
        qk_rope_head_dim=64,
        v_head_dim=128,
        vocab_size=129280,
        tie_word_embeddings=False,
        quantization_config={"quant_method": "fp8", "weight_block_size": [128, 128]},
    ),
    # mistralai/Mistral-7B-v0.3 config.json: 7.25B parameters
    "mistral-7b": dict(
        model_type="mistral",
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        vocab_size=32768,
        sliding_window=None,
        tie_word_embeddings=False,
    ),
    # mistralai/Mistral-Small-24B-Base-2501 config.json: 23.6B parameters
    "mistral-small-24b": dict(
        model_type="mistral",
        hidden_size=5120,
        intermediate_size=32768,
        num_hidden_layers=40,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        vocab_size=131072,
        sliding_window=None,
        tie_word_embeddings=False,
    ),
    # mistralai/Mixtral-8x7B-v0.1 config.json: 46.7B parameters, 12.9B active; 8 experts, 2 per token
    "mixtral-8x7b": dict(
        model_type="mixtral",
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        num_local_experts=8,
        num_experts_per_tok=2,
        vocab_size=32000,
        sliding_window=None,
        tie_word_embeddings=False,
    ),
}

ANALYSIS_PRESETS: tuple[str, ...] = tuple(_PRESETS)


def analysis_preset(name: str) -> dict[str, Any] | None:
    """The config dict of a preset (a copy: callers may change it), None for a name that is not one."""
    config = _PRESETS.get(name.strip().lower())
    return copy.deepcopy(config) if config is not None else None
