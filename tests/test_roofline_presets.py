"""The family presets (analysis/roofline/model_presets.py) and the MoE-aware accounting.

Truth comes from outside Stepscope: the parameter counts the model cards publish (total, and active where the
card gives it), and arithmetic on the config written out here."""

from __future__ import annotations

import pytest

from stepscope.analysis.annotations import engine_batch
from stepscope.analysis.roofline.accounting import (
    decode_cost,
    expert_weight_bytes,
    prefill_cost,
    step_cost,
    touched_experts,
)
from stepscope.analysis.roofline.model_config import shape_from_config, shape_from_form
from stepscope.analysis.roofline.model_presets import ANALYSIS_PRESETS, analysis_preset
from stepscope.analysis.roofline.model_source import model_shape, preset_names

# (preset, published total parameters, published active parameters or None); the model cards' figures
PUBLISHED = [
    ("llama-3-8b", 8.03e9, None),
    ("llama-3.1-70b", 70.6e9, None),
    ("llama-3.2-1b", 1.24e9, None),
    ("qwen3-0.6b", 0.6e9, None),
    ("qwen3-8b", 8.2e9, None),
    ("qwen3-32b", 32.8e9, None),
    ("qwen3-30b-a3b", 30.5e9, 3.3e9),
    ("qwen3-235b-a22b", 235e9, 22e9),
    ("gpt-oss-20b", 20.9e9, 3.6e9),
    ("gpt-oss-120b", 116.8e9, 5.1e9),
    ("deepseek-v3", 671e9, 37e9),
    ("mistral-7b", 7.25e9, None),
    ("mistral-small-24b", 23.6e9, None),
    ("mixtral-8x7b", 46.7e9, 12.9e9),
]


def test_every_preset_is_checked_against_its_card():
    assert {name for name, _, _ in PUBLISHED} == set(ANALYSIS_PRESETS)


@pytest.mark.parametrize(("name", "total", "active"), PUBLISHED)
def test_preset_parameter_counts_match_the_model_cards(name, total, active):
    shape = shape_from_config(analysis_preset(name), name=name)
    assert shape.parameters == pytest.approx(total, rel=0.02)
    if active is not None:
        # cards differ on whether the input embedding table counts as active: within 10% either way
        assert shape.active_parameters == pytest.approx(active, rel=0.10)
    assert shape.is_moe == (active is not None)


def test_presets_reach_the_front_door_and_copies_are_returned():
    assert set(ANALYSIS_PRESETS) <= set(preset_names()) and "tiny-llama" in preset_names()
    assert model_shape("gpt-oss-120b").experts == 128
    assert model_shape("Qwen3-8B").name == "qwen3-8b"  # names are case-insensitive
    config = analysis_preset("qwen3-8b")
    config["num_hidden_layers"] = 1
    assert analysis_preset("qwen3-8b")["num_hidden_layers"] == 36
    assert analysis_preset("no-such-model") is None
    with pytest.raises(ValueError, match="neither a preset"):
        model_shape("no-such-model")


def test_gpt_oss_reads_mxfp4_experts_and_its_sliding_layers():
    shape = model_shape("gpt-oss-120b")
    assert shape.expert_bytes_per_param == pytest.approx(4.25 / 8)
    assert shape.weight_bytes_per_param == 2  # attention, router in bf16 (not converted)
    assert (shape.sliding_window, shape.sliding_layers) == (128, 18)
    # one expert: gate, up (fused as gate_up) and down, 2880 wide
    assert shape.expert_params == 3 * 2880 * 2880


def test_decode_reads_the_experts_its_tokens_reach():
    shape = model_shape("gpt-oss-120b")
    # one token reads exactly its 4 experts; 32 tokens spread evenly over 128 reach 128 (1 - (1 - 4/128)^32)
    assert touched_experts(shape, 1) == pytest.approx(4.0)
    assert touched_experts(shape, 32) == pytest.approx(128 * (1 - (1 - 4 / 128) ** 32))
    assert touched_experts(shape, 100_000) == pytest.approx(128.0)
    one = expert_weight_bytes(shape, 1)
    assert one == pytest.approx(36 * 4 * 3 * 2880 * 2880 * 4.25 / 8)
    b1, b32 = decode_cost(shape, 1000, batch=1), decode_cost(shape, 1000, batch=32)
    assert b32.weight_bytes > b1.weight_bytes  # more tokens reach more experts
    assert b32.gemm_flops == pytest.approx(32 * b1.gemm_flops, rel=1e-6)  # each token's own experts
    dense = model_shape("qwen3-8b")
    assert decode_cost(dense, 1000, 32).weight_bytes - decode_cost(dense, 1000, 1).weight_bytes == 31 * 4096 * 2


def test_sliding_layers_read_at_most_their_window():
    shape = model_shape("gpt-oss-120b")
    kv_layer = 2 * 8 * 64 * 2  # K and V, 8 KV heads of 64, bf16
    short, long = decode_cost(shape, 100), decode_cost(shape, 10_000)
    assert short.kv_read_bytes == 36 * 100 * kv_layer  # every layer reads all 100
    assert long.kv_read_bytes == (18 * 10_000 + 18 * 128) * kv_layer  # half the layers stop at 128


def test_deepseek_mla_cache_and_fp8_weights():
    shape = model_shape("deepseek-v3")
    assert shape.kv_elements_per_token_layer == 512 + 64  # the latent and the rope part, not 2 x heads x dim
    assert shape.weight_bytes_per_param == 1  # FP8
    assert shape.n_moe_layers == 58  # the first 3 of 61 layers are dense
    assert prefill_cost(shape, 2000).kv_write_bytes == 61 * 2000 * 576 * 2


def test_engine_annotation_states_the_batch():
    """vLLM's annotation in tests/data/real/tracelens_vllm_gptoss_mixed_piecewise_rocm.json.gz (AMD-AGI/TraceLens):
    9 prefill chunks of 8155 tokens, 8430 KV tokens after the step, and 37 decodes reading 34489."""
    label = "execute_8192_context_9(sq8155sk8430sqsq7475785sqsk7671310)_generation_37(sq37sk34489sqsq37sqsk34489)"
    batch = engine_batch(label)
    assert (batch.prefill_sequences, batch.prefill_tokens, batch.prefill_kv_tokens) == (9, 8155, 8430)
    assert (batch.decode_sequences, batch.decode_tokens, batch.decode_kv_tokens) == (37, 37, 34489)
    assert (batch.sequences, batch.tokens) == (46, 8192)
    # causal pairs of the chunks: sum over sequences of q*c + q(q+1)/2 from the sums the label gives
    assert batch.prefill_pairs == 7671310 - 7475785 / 2 + 8155 / 2
    assert engine_batch("execute_context_1(888_788544)_generation_0(0)") is None  # the older form has no sums
    assert engine_batch("step[DECODE bs=32]") is None


def test_step_cost_of_a_decode_batch_equals_decode_cost():
    shape = model_shape("qwen3-8b")
    stated = step_cost(shape, "decode", sequences=32, new_tokens=32, kv_tokens=32 * 1025)
    plain = decode_cost(shape, context=1024, batch=32)
    assert stated.bytes == plain.bytes and stated.flops == pytest.approx(plain.flops)


def test_small_form_builds_the_shape_a_card_describes():
    form = shape_from_form(
        "gpt-oss-120b (form)",
        36,
        2880,
        64,
        8,
        201088,
        active_parameters=5.13e9,
        experts=128,
        experts_per_token=4,
        head_dim=64,
    )
    assert form.expert_intermediate == pytest.approx(2880, abs=2)  # the card's count has biases the form lacks
    assert form.parameters == pytest.approx(116.8e9, rel=0.01)
    dense = shape_from_form("an 8B", 32, 4096, 32, 8, 128256, parameters=8.03e9)
    assert dense.intermediate == pytest.approx(14336, abs=2)
    with pytest.raises(ValueError, match="multiple of KV heads"):
        shape_from_form("bad", 32, 4096, 32, 7, 128256, parameters=8e9)
    with pytest.raises(ValueError, match="parameter count"):
        shape_from_form("no size", 32, 4096, 32, 8, 128256)
