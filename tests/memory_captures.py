"""Real CPU captures with memory events, made here, and their truth taken from the run itself (never from Stepscope).

Each case profiles HF generate() of a tiny Llama built from a config with random weights (no download) under
torch.profiler with record_shapes and (unless said) profile_memory, as the tutorial's diagnose_perf.py does. The
truth is what generate() returned: its KV cache's tensors (bytes per position of the whole batch, summed over layers
and K/V), the number of forwards, the batch, the dtype, and the model config. Written by

    python -m tests.memory_captures tests/data/captures

as `memory_<case>.json.gz` and `memory_<case>.truth.json` (tests/data/captures/memory_README.md). Needs torch and
transformers; about a second a case on a laptop CPU.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

CONFIG = dict(
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=32,
    vocab_size=256,
    max_position_embeddings=256,
    tie_word_embeddings=False,
    bos_token_id=1,
    eos_token_id=2,
)


@dataclass(frozen=True)
class Case:
    dtype: str = "float32"  # float32 | bfloat16
    batch: int = 1
    cache: str = "dynamic"  # dynamic | static
    requests: int = 1
    keep_outputs: bool = False  # hold every request's output (and its KV cache) until the trace ends
    profile_memory: bool = True
    prompt_tokens: int = 6
    new_tokens: int = 10


CASES = {
    "fp32_b1_dynamic": Case(),
    "fp32_b1_dynamic_nomem": Case(profile_memory=False),
    "bf16_b2_dynamic": Case(dtype="bfloat16", batch=2),
    "fp32_b2_static": Case(batch=2, cache="static"),
    "fp32_b1_two_requests": Case(requests=2),
    "fp32_b1_two_requests_kept": Case(requests=2, keep_outputs=True),
}


def capture(name: str, folder: Path) -> tuple[Path, Path]:
    """Profile one case; write its trace and truth into `folder`; return their paths."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    from transformers import LlamaConfig, LlamaForCausalLM

    case = CASES[name]
    torch.manual_seed(0)
    dtype = getattr(torch, case.dtype)
    model = LlamaForCausalLM(LlamaConfig(**CONFIG)).to(dtype).eval()
    ids = torch.randint(3, CONFIG["vocab_size"], (case.batch, case.prompt_tokens))
    kwargs = dict(max_new_tokens=case.new_tokens, min_new_tokens=case.new_tokens, do_sample=False)
    if case.cache == "static":
        kwargs["cache_implementation"] = "static"
    truths, kept = [], []
    with torch.no_grad():
        model.generate(ids, **kwargs)  # warm-up: one-off allocations stay out of the profile
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=case.profile_memory) as prof:
            for _ in range(case.requests):
                out = model.generate(ids, return_dict_in_generate=True, **kwargs)
                truths.append(_cache_truth(out.past_key_values))
                if case.keep_outputs:
                    kept.append(out)
                del out  # the KV cache is freed here unless kept: memory returned before the next request
    folder.mkdir(parents=True, exist_ok=True)
    trace = folder / f"memory_{name}.json.gz"
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(raw))
        trace.write_bytes(gzip.compress(raw.read_bytes(), mtime=0))
    truth = {
        "case": asdict(case),
        "config": CONFIG,
        "forwards": case.requests * case.new_tokens,  # one prefill + new_tokens - 1 decode steps per request
        "requests": truths,
        "versions": {"torch": torch.__version__, "transformers": _transformers_version()},
    }
    truth_path = folder / f"memory_{name}.truth.json"
    truth_path.write_text(json.dumps(truth, indent=1) + "\n")
    return trace, truth_path


def _cache_truth(cache) -> dict:
    """What generate()'s cache holds: its K and V tensors' bytes, positions, and bytes per position (whole batch)."""
    layers = cache.layers
    total = sum(layer.keys.nbytes + layer.values.nbytes for layer in layers)
    positions = int(layers[0].keys.shape[-2])
    return {
        "cache_class": type(cache).__name__,
        "layers": len(layers),
        "key_shape": list(layers[0].keys.shape),
        "dtype": str(layers[0].keys.dtype),
        "cache_bytes": int(total),
        "positions": positions,  # filled positions (dynamic) or the preallocated length (static)
        "bytes_per_position": total / positions,
    }


def _transformers_version() -> str:
    import transformers

    return transformers.__version__


def main(argv: list[str]) -> int:
    folder = Path(argv[0]) if argv else Path(__file__).resolve().parent / "data" / "captures"
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    for name in argv[1:] or CASES:
        trace, truth = capture(name, folder)
        print(f"{trace} ({trace.stat().st_size / 1e3:.0f} kB), {truth.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
