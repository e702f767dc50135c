"""Bytes moved and FLOPs done by one prefill or one decode step: the floor a trace is read against.

Conventions (the seed's Llama-3-8B walk-through):
- Weights: every layer's matrices, norms and biases are read once per forward, whatever the
  number of tokens. The embedding table is not read whole: only the rows of the step's tokens
  are gathered. lm_head runs for the last position of each sequence only, and reads its whole
  matrix (also when tied to the embedding).
- GEMM FLOPs: 2 x (layer matrix parameters) per token, plus 2 x hidden x vocab per sequence.
- Attention FLOPs: QK^T and PV cost 2 x q_dim each per (query, key) pair, so 4 x q_dim per pair
  per layer. Prefill is causal: a prompt of n tokens has n(n+1)/2 pairs (the masked half is not
  counted, as FlashAttention skips it). A decode step's token attends to the context plus itself.
- KV cache: 2 (K and V) x layers x kv_heads x head_dim x dtype bytes per token. A prefill writes
  the prompt's K/V and its attention reads them once; a decode step reads the whole context's
  K/V and writes its own token's.
- Activations: what each kernel of a layer reads and writes, with SiLU x up fused into the
  gate_up GEMM and RoPE fused into attention (the seed's pipeline); see `_activation_elements`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model_config import ModelShape


@dataclass(frozen=True)
class LayerCost:
    """One decoder layer's share of a forward."""

    weight_bytes: int
    kv_read_bytes: int
    kv_write_bytes: int
    activation_bytes: int
    gemm_flops: int
    attention_flops: int

    @property
    def bytes(self) -> int:
        return self.weight_bytes + self.kv_read_bytes + self.kv_write_bytes + self.activation_bytes

    @property
    def flops(self) -> int:
        return self.gemm_flops + self.attention_flops


@dataclass(frozen=True)
class PhaseCost:
    """One forward (a prefill, or one decode step) over a batch: totals and their parts."""

    phase: str  # prefill | decode
    batch: int
    tokens: int  # new positions per sequence (the prompt length, or 1)
    context: int  # tokens already in the KV cache per sequence before this forward
    layer: LayerCost  # every layer costs the same
    layers: int
    embedding_bytes: int  # gathered rows
    head_weight_bytes: int  # lm_head matrix (+ final norm)
    head_activation_bytes: int  # final norm on the last positions, logits out
    head_flops: int

    @property
    def weight_bytes(self) -> int:
        return self.layers * self.layer.weight_bytes + self.embedding_bytes + self.head_weight_bytes

    @property
    def kv_read_bytes(self) -> int:
        return self.layers * self.layer.kv_read_bytes

    @property
    def kv_write_bytes(self) -> int:
        return self.layers * self.layer.kv_write_bytes

    @property
    def activation_bytes(self) -> int:
        return self.layers * self.layer.activation_bytes + self.head_activation_bytes

    @property
    def bytes(self) -> int:
        return self.weight_bytes + self.kv_read_bytes + self.kv_write_bytes + self.activation_bytes

    @property
    def gemm_flops(self) -> int:
        return self.layers * self.layer.gemm_flops + self.head_flops

    @property
    def attention_flops(self) -> int:
        return self.layers * self.layer.attention_flops

    @property
    def flops(self) -> int:
        return self.gemm_flops + self.attention_flops


def kv_bytes_per_token(shape: ModelShape) -> int:
    """KV cache one token adds for one sequence, all layers: 128 KiB for Llama-3-8B in bf16."""
    return 2 * shape.layers * shape.kv_dim * shape.dtype_bytes


def prefill_cost(shape: ModelShape, prompt_tokens: int, batch: int = 1) -> PhaseCost:
    """One prefill forward of `batch` prompts of `prompt_tokens` tokens each, from an empty cache."""
    _check(prompt_tokens=prompt_tokens, batch=batch)
    pairs = prompt_tokens * (prompt_tokens + 1) // 2
    return _forward(shape, "prefill", batch, prompt_tokens, context=0, kv_read_tokens=prompt_tokens, pairs=pairs)


def decode_cost(shape: ModelShape, context: int, batch: int = 1) -> PhaseCost:
    """One decode step of `batch` sequences, each with `context` tokens already cached."""
    _check(context=context + 1, batch=batch)
    return _forward(shape, "decode", batch, 1, context=context, kv_read_tokens=context, pairs=context + 1)


def _forward(
    shape: ModelShape, phase: str, batch: int, tokens: int, context: int, kv_read_tokens: int, pairs: int
) -> PhaseCost:
    b = shape.dtype_bytes
    new = batch * tokens
    kv_token_layer = 2 * shape.kv_dim * b
    layer = LayerCost(
        weight_bytes=shape.layer_params * b,
        kv_read_bytes=batch * kv_read_tokens * kv_token_layer,
        kv_write_bytes=new * kv_token_layer,
        activation_bytes=new * _activation_elements(shape) * b,
        gemm_flops=2 * new * shape.layer_matrix_params,
        attention_flops=4 * shape.q_dim * batch * pairs,
    )
    return PhaseCost(
        phase=phase,
        batch=batch,
        tokens=tokens,
        context=context,
        layer=layer,
        layers=shape.layers,
        embedding_bytes=min(new, shape.vocab) * shape.hidden * b,
        head_weight_bytes=(shape.embedding_params + shape.hidden) * b,
        head_activation_bytes=batch * (3 * shape.hidden + shape.vocab) * b,
        head_flops=2 * batch * shape.hidden * shape.vocab,
    )


def _activation_elements(shape: ModelShape) -> int:
    """Elements read or written per token per layer by the layer's kernels (weights and KV apart):
    RMSNorm r+w h, qkv GEMM r h w q+2kv, attention r q w q, o_proj r q w h, residual r 2h w h,
    RMSNorm r+w h, gate_up(+SiLU x up) r h w I, down r I w h, residual r 2h w h."""
    h, q = shape.hidden, shape.q_dim
    return 14 * h + (q + 2 * shape.kv_dim) + 3 * q + 2 * shape.intermediate


def _check(**values: int) -> None:
    for key, value in values.items():
        if int(value) < 1:
            raise ValueError(f"{key.replace('_', ' ')} must be at least 1, got {value}")
