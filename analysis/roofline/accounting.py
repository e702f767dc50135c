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
- Mixture of experts: a token multiplies through its `experts_per_token` experts (plus shared experts and the
  router); a forward reads each expert that any of its tokens routes to. Which ones is not in the config: with
  routing spread evenly, T tokens touch E x (1 - (1 - k/E)^T) of E experts (`touched_experts`), so one decode
  token reads k experts and a 2000-token prefill all of them. Quantised weights (FP8, MXFP4 experts) count at
  their own bytes.
- Sliding-window layers (gpt-oss, Mistral 7B v0.1) read at most the window's KV and attend to at most as many
  positions; a multi-head-latent-attention cache (DeepSeek-V3) holds its latent and rope part per token.
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
    return shape.layers * shape.kv_elements_per_token_layer * shape.dtype_bytes


def touched_experts(shape: ModelShape, tokens: int) -> float:
    """Experts of one MoE layer that `tokens` tokens route to, with routing spread evenly (the expected count)."""
    if not shape.is_moe:
        return 0.0
    e, k = shape.experts, shape.experts_per_token
    return e * (1.0 - (1.0 - k / e) ** max(int(tokens), 0))


def layer_weight_bytes(shape: ModelShape, tokens: int) -> float:
    """Layer weights a forward of `tokens` tokens reads, all layers: every matrix once, an MoE layer's routed
    experts only as far as its tokens reach them (touched_experts)."""
    wb, eb = shape.weight_bytes_per_param, shape.expert_bytes_per_param
    dense_layers = shape.layers - shape.n_moe_layers
    always = shape.layers * (shape.attention_matrix_params * wb + shape.layer_small_params * shape.dtype_bytes)
    dense = dense_layers * shape.dense_mlp_params * wb
    moe = shape.n_moe_layers * (
        shape.moe_always_params * wb + touched_experts(shape, tokens) * shape.expert_params * eb
    )
    return always + dense + moe


def expert_weight_bytes(shape: ModelShape, tokens: int) -> float:
    """The routed experts' part of layer_weight_bytes."""
    return shape.n_moe_layers * touched_experts(shape, tokens) * shape.expert_params * shape.expert_bytes_per_param


def kv_read_tokens(shape: ModelShape, context: int) -> float:
    """Cached tokens one sequence's attention reads per layer, the mean over layers (sliding layers cap it)."""
    if not shape.sliding_layers or not shape.sliding_window:
        return float(context)
    capped = min(context, shape.sliding_window)
    return (shape.sliding_layers * capped + (shape.layers - shape.sliding_layers) * context) / shape.layers


def _attention_pairs(shape: ModelShape, query_tokens: int, context: int) -> float:
    """(query, key) pairs of one sequence per layer, the mean over layers: each of `query_tokens` new positions
    attends to the `context` cached ones and the new ones up to itself (causal), at most the window in a sliding
    layer."""
    q = query_tokens
    full = q * context + q * (q + 1) / 2
    if not shape.sliding_layers or not shape.sliding_window:
        return full
    w = shape.sliding_window
    positions = range(context + 1, context + q + 1)  # each new position sees min(position, window) keys
    sliding = sum(min(p, w) for p in positions) if q <= 4096 else q * min(context + q / 2, w)
    return (shape.sliding_layers * sliding + (shape.layers - shape.sliding_layers) * full) / shape.layers


def prefill_cost(shape: ModelShape, prompt_tokens: int, batch: int = 1) -> PhaseCost:
    """One prefill forward of `batch` prompts of `prompt_tokens` tokens each, from an empty cache."""
    _check(prompt_tokens=prompt_tokens, batch=batch)
    pairs = _attention_pairs(shape, prompt_tokens, 0)
    read = kv_read_tokens(shape, prompt_tokens)
    return _forward(shape, "prefill", batch, prompt_tokens, context=0, kv_read=batch * read, pairs=batch * pairs)


def decode_cost(shape: ModelShape, context: int, batch: int = 1) -> PhaseCost:
    """One decode step of `batch` sequences, each with `context` tokens already cached."""
    _check(context=context + 1, batch=batch)
    read = batch * kv_read_tokens(shape, context)
    return _forward(
        shape, "decode", batch, 1, context=context, kv_read=read, pairs=batch * _attention_pairs(shape, 1, context)
    )


def step_cost(
    shape: ModelShape, phase: str, sequences: int, new_tokens: int, kv_tokens: int, pairs: float | None = None
) -> PhaseCost:
    """One forward of a batch an engine describes in totals (vLLM's annotations: sequences, new tokens, KV tokens
    over the whole batch, a mixed step's prefill chunks and decodes together). `kv_tokens` counts the cache after
    the step (the new tokens included); `pairs` the (query, key) pairs, else as if every sequence were alike."""
    _check(sequences=sequences, new_tokens=new_tokens)
    per_seq_new = new_tokens / sequences
    per_seq_context = max(kv_tokens - new_tokens, 0) / sequences
    tokens = max(round(per_seq_new), 1)
    context = round(per_seq_context)
    if pairs is None:
        pairs = sequences * _attention_pairs(shape, tokens, context)
    read = sequences * kv_read_tokens(shape, context)
    return _forward(shape, phase, sequences, tokens, context, kv_read=read, pairs=pairs, new=new_tokens)


def _forward(
    shape: ModelShape,
    phase: str,
    batch: int,
    tokens: int,
    context: int,
    kv_read: float,
    pairs: float,
    new: int | None = None,
) -> PhaseCost:
    """`kv_read`: cached tokens read per layer over the batch; `pairs`: (query, key) pairs per layer over the
    batch; `new`: new positions over the batch (batch x tokens unless the sequences differ)."""
    b = shape.dtype_bytes
    new = batch * tokens if new is None else new
    kv_token_layer = shape.kv_elements_per_token_layer * b
    layer = LayerCost(
        weight_bytes=round(layer_weight_bytes(shape, new) / shape.layers),
        kv_read_bytes=round(kv_read * kv_token_layer),
        kv_write_bytes=new * kv_token_layer,
        activation_bytes=new * _activation_elements(shape) * b,
        gemm_flops=2 * new * shape.layer_matrix_params,
        attention_flops=round(4 * shape.q_dim * pairs),
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
