"""Architecture presets: real model shapes with random weights, so profiling needs no download.

Kernel timing depends on shapes and dtypes, not on weight values, so a preset built from
the published config of a model profiles like the real thing. The "tiny-*" presets are small
enough to profile a full generation on a laptop CPU in seconds (tests use several architectures).
The collectors build a model from a preset; the roofline and the app read its shapes (here, so that analysis
need not import the collectors).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Preset:
    name: str
    config_class: str  # name of the transformers config class
    config_kwargs: dict[str, Any] = field(default_factory=dict)
    description: str = ""


_TINY_COMMON = dict(max_position_embeddings=2048, rms_norm_eps=1e-6, tie_word_embeddings=False)

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in [
        Preset(
            "tiny-llama",
            "LlamaConfig",
            dict(
                hidden_size=256,
                intermediate_size=688,
                num_hidden_layers=4,
                num_attention_heads=8,
                num_key_value_heads=4,
                vocab_size=32000,
                bos_token_id=1,
                eos_token_id=2,
                **_TINY_COMMON,
            ),
            "small Llama (256 hidden, 4 layers, GQA 8/4 heads): a full profiled run takes seconds on a CPU",
        ),
        Preset(
            "tiny-qwen2",
            "Qwen2Config",
            dict(
                hidden_size=128,
                intermediate_size=384,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=2,
                vocab_size=8192,
                bos_token_id=1,
                eos_token_id=2,
                **_TINY_COMMON,
            ),
            "small Qwen2 (qkv bias, GQA)",
        ),
        Preset(
            "tiny-phi3",
            "Phi3Config",
            dict(
                hidden_size=128,
                intermediate_size=384,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=4,
                vocab_size=8192,
                bos_token_id=1,
                eos_token_id=2,
                pad_token_id=0,
                **_TINY_COMMON,
            ),
            "small Phi-3 (fused qkv and gate_up projections)",
        ),
        Preset(
            "llama-3-8b",
            "LlamaConfig",
            dict(
                hidden_size=4096,
                intermediate_size=14336,
                num_hidden_layers=32,
                num_attention_heads=32,
                num_key_value_heads=8,
                vocab_size=128256,
                max_position_embeddings=8192,
                rms_norm_eps=1e-5,
                rope_theta=500000.0,
                bos_token_id=128000,
                eos_token_id=128001,
                tie_word_embeddings=False,
                hidden_act="silu",
            ),
            "Meta-Llama-3-8B shapes (8.0B parameters)",
        ),
        Preset(
            "phi-3-mini",
            "Phi3Config",
            dict(
                hidden_size=3072,
                intermediate_size=8192,
                num_hidden_layers=32,
                num_attention_heads=32,
                num_key_value_heads=32,
                vocab_size=32064,
                max_position_embeddings=4096,
                original_max_position_embeddings=4096,
                rms_norm_eps=1e-5,
                rope_theta=10000.0,
                sliding_window=2047,
                bos_token_id=1,
                eos_token_id=32000,
                pad_token_id=32000,
                tie_word_embeddings=False,
                hidden_act="silu",
            ),
            "Phi-3-mini-4k-instruct shapes (3.8B parameters)",
        ),
        Preset(
            "qwen2.5-0.5b",
            "Qwen2Config",
            dict(
                hidden_size=896,
                intermediate_size=4864,
                num_hidden_layers=24,
                num_attention_heads=14,
                num_key_value_heads=2,
                vocab_size=151936,
                max_position_embeddings=32768,
                rms_norm_eps=1e-6,
                rope_theta=1000000.0,
                bos_token_id=151643,
                eos_token_id=151643,
                tie_word_embeddings=True,
                hidden_act="silu",
            ),
            "Qwen2.5-0.5B shapes (0.49B parameters, tied embeddings)",
        ),
        Preset(
            "qwen2.5-7b",
            "Qwen2Config",
            dict(
                hidden_size=3584,
                intermediate_size=18944,
                num_hidden_layers=28,
                num_attention_heads=28,
                num_key_value_heads=4,
                vocab_size=152064,
                max_position_embeddings=32768,
                rms_norm_eps=1e-6,
                rope_theta=1000000.0,
                bos_token_id=151643,
                eos_token_id=151643,
                tie_word_embeddings=False,
                hidden_act="silu",
            ),
            "Qwen2.5-7B shapes (7.6B parameters)",
        ),
    ]
}

DEFAULT_PRESET = "tiny-llama"
