"""A large with_stack + with_modules CPU trace of HF generate() on a random Llama, for bench/analysis_bench.py:
the same model as ../shared/bench/make_big_cpu_trace.py, with python and nn.Module spans (no step markers).

    python bench/make_big_stack_trace.py LAYERS TOKENS OUT.json   # 16 40 gives about 330k events
"""

from __future__ import annotations

import sys

import torch
from torch.profiler import ProfilerActivity, profile
from transformers import LlamaConfig, LlamaForCausalLM


def main() -> None:
    layers, tokens, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    cfg = LlamaConfig(
        vocab_size=32000,
        hidden_size=256,
        intermediate_size=688,
        num_hidden_layers=layers,
        num_attention_heads=8,
        num_key_value_heads=4,
        max_position_embeddings=2048,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 32000, (1, 64))
    with torch.no_grad():
        model.generate(ids, max_new_tokens=4, min_new_tokens=4, do_sample=False)
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_stack=True, with_modules=True) as p:
            model.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False)
    p.export_chrome_trace(out)


if __name__ == "__main__":
    main()
