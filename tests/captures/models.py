"""Tiny models built from configs with random weights, and a tokenizer built in code: no hub access needed."""

from __future__ import annotations

VOCAB = 512
# What every tiny model here shares: GQA with 4 query and 2 KV heads, the tokenizer's vocabulary and special ids.
_COMMON = {
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": VOCAB,
    "max_position_embeddings": 256,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
    "tie_word_embeddings": False,
}


def llama(hidden: int = 64, layers: int = 2, seed: int = 0, attention: str = "sdpa"):
    """A small Llama (GQA 4/2 heads). Sizes are chosen to keep a profiled run at a few thousand host ops.
    `attention`: the attention implementation ("eager": matmuls and a softmax, no sdpa op to read lengths from)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        **_COMMON,
    )
    config._attn_implementation = attention
    return LlamaForCausalLM(config).eval()


def qwen2_moe(seed: int = 0):
    """A small Qwen2-MoE: 4 experts, 2 per token, a shared expert, 2 layers."""
    import torch
    from transformers import Qwen2MoeConfig, Qwen2MoeForCausalLM

    torch.manual_seed(seed)
    config = Qwen2MoeConfig(
        hidden_size=64,
        intermediate_size=128,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=64,
        num_experts=4,
        num_experts_per_tok=2,
        num_hidden_layers=2,
        decoder_sparse_step=1,
        **_COMMON,
    )
    config._attn_implementation = "sdpa"
    return Qwen2MoeForCausalLM(config).eval()


CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} <|end|> {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|> {% endif %}"
)


def tokenizer():
    """A word-level tokenizer over VOCAB words (w0 ... wN plus the chat markers), with a chat template."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    special = ["<pad>", "<s>", "</s>", "<unk>", "<|user|>", "<|assistant|>", "<|system|>", "<|end|>"]
    words = special + [f"w{i}" for i in range(VOCAB - len(special))]
    vocab = {w: i for i, w in enumerate(words)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def words(n: int, start: int = 0) -> str:
    """A prompt of n known words."""
    return " ".join(f"w{start + i}" for i in range(n))
