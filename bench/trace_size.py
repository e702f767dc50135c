"""How big a GPU capture's trace will be, gzipped, and the decode-step cap that keeps it under 9 MiB.

The device run gets one try and brings back at most 16 MiB per file and 64 MiB in all, so each trace's
size must be settled before a GPU is lent. The estimate has two halves:

host side, measured on this CPU (``python bench/trace_size.py --measure``): the llama-3-8b preset's
layer count (32) and head layout at a tiny width (hidden 64, intermediate 128, 4 heads / 2 KV heads,
vocab 1024), fp32, batch 1, a 16-token prompt and 9 new tokens (1 prefill + 8 decode steps), recorded
through the collectors with record_shapes on (as the captures run). The host ops of a forward depend on
the layer count and the code path (HF ``generate()``), not on the width, so their count carries over to
the 8B model on the GPU. Measured 2026-12-01 on this project's 2-core VM (torch 2.13.0+cpu, transformers
5.23.0); ``--measure`` prints them again:

    plain (record_shapes):  6,416 host events per decode step, 6,949 in the prefill; 27.8 gzipped bytes per
                            event (a 1.62 MB trace of 58,475 events)
    with_stack + with_modules + profile_memory (+ record_shapes):
                            15,541 host events per decode step, 16,221 in the prefill; 24.2 gzipped bytes per
                            event (a 3.56 MB trace of 147,019 events)
    compute ops (the innermost op of each aten call that launches a CUDA kernel: mm, mul, add, copy_, cat,
    rsqrt, silu, sdpa, ...): 1,258 per decode step, 80.5k for 64 tokens: the issue's ~83k kernels.

GPU side, measured on the one real NVIDIA trace of HF transformers we have
(tests/data/real/tracelens_hf_qwen1.5-0.5b_forward_h100.json.gz, an H100 forward: 1,465 kernels, 1,921
runtime calls, 3,629 flow events, 241 memsets, 4,186 host ops): the gzipped bytes that the kernels, their
launch calls, flows and memsets add over the same trace without them, 88 bytes per kernel. Kernels per
host op there: 0.35, which on 6,416 host events would be 2,245 kernels a step; that trace is a 559-token
prefill at batch 16 with a memset per cuBLAS call, so the compute-op count is the closer figure for a decode
step. The estimate takes 1.25 x 1,258 = 1,572 kernels per step (above the compute ops and the issue's
figure: the cap errs small). Replayed CUDA graphs: a kernel and its flow end, 77 bytes per kernel in
tests/data/real/hta_training_cudagraph_a100.json.gz (135 graph kernels: a small sample, so high; repeated
names compress better in a long trace).

Per decode step that gives, gzipped: eager 6,416 x 27.8 + 1,572 x 88 = 317 kB; eager with the stack
options 15,541 x 24.2 + 1,572 x 88 = 514 kB; a graph replay 40 host events + 1,572 x 77 = 122 kB. An eager
8B trace of 64 tokens would be ~19.4 MiB: over the limit, hence ``decode_step_cap``: eager 28 decode steps
(8.8 MiB), stack 17 (8.9 MiB); a cuda-graph run of all 63 decode steps fits (7.7 MiB), and so does the
2000-token prompt's 15 (eager, 4.9 MiB). Batch 16 runs the same ops and kernels as batch 1. The checker
prints every capture's real size beside this estimate, so a later run can correct the figures.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

MIB = 1 << 20
TRACE_LIMIT_BYTES = 9 * MIB  # each trace, gzipped: 6 of them plus the summary and log stay under 64 MiB

# Measured on the CPU (module docstring; rerun with --measure): host events per decode step and per prefill
# for the 32-layer Llama, and their gzipped bytes per event.
HOST_EVENTS_PER_DECODE_STEP = {"plain": 6416, "stack": 15541}
HOST_EVENTS_PER_PREFILL = {"plain": 6949, "stack": 16221}
GZ_BYTES_PER_HOST_EVENT = {"plain": 27.8, "stack": 24.2}
COMPUTE_OPS_PER_DECODE_STEP = 1258
KERNELS_PER_COMPUTE_OP = 1.25  # headroom for cuBLAS memsets and split-K reductions: the cap errs small
# Measured on real NVIDIA traces (module docstring).
GZ_BYTES_PER_EAGER_KERNEL = 88.0  # the kernel, its launch call, flows and memsets (H100, HF transformers)
GZ_BYTES_PER_GRAPH_KERNEL = 77.0  # a replayed graph's kernel and its flow end (A100)
GRAPH_HOST_EVENTS_PER_STEP = 40  # marker, cudaGraphLaunch, the token's copy to the host, its sync
FIXED_BYTES = 64 << 10  # metadata, device properties, the trace's head and tail


@dataclass(frozen=True)
class TraceShape:
    """What decides a capture's trace size: the options recorded and how the decode step runs."""

    options: str = "plain"  # "plain" (record_shapes) or "stack" (with_stack, with_modules, profile_memory)
    graph: bool = False  # decode steps replayed as one CUDA graph (the prefill is eager either way)


def kernels_per_step() -> float:
    return COMPUTE_OPS_PER_DECODE_STEP * KERNELS_PER_COMPUTE_OP


def decode_step_bytes(shape: TraceShape) -> float:
    if shape.graph:
        return GRAPH_HOST_EVENTS_PER_STEP * GZ_BYTES_PER_HOST_EVENT["plain"] + kernels_per_step() * (
            GZ_BYTES_PER_GRAPH_KERNEL
        )
    host = HOST_EVENTS_PER_DECODE_STEP[shape.options] * GZ_BYTES_PER_HOST_EVENT[shape.options]
    return host + kernels_per_step() * GZ_BYTES_PER_EAGER_KERNEL


def prefill_bytes(shape: TraceShape) -> float:
    """The prefill runs eagerly in every mode (its host ops and kernels; the prompt length changes neither)."""
    options = shape.options
    return HOST_EVENTS_PER_PREFILL[options] * GZ_BYTES_PER_HOST_EVENT[options] + kernels_per_step() * (
        GZ_BYTES_PER_EAGER_KERNEL
    )


def estimate_trace_bytes(shape: TraceShape, decode_steps: int) -> int:
    """Gzipped size of a 32-layer Llama trace on a GPU with one prefill and ``decode_steps`` recorded steps."""
    if decode_steps < 0:
        raise ValueError("decode_steps must be 0 or more")
    return int(FIXED_BYTES + prefill_bytes(shape) + decode_steps * decode_step_bytes(shape))


def decode_step_cap(shape: TraceShape, new_tokens: int, limit_bytes: int = TRACE_LIMIT_BYTES) -> int:
    """The most decode steps to record (at least 1, at most ``new_tokens - 1``) whose estimate fits the limit."""
    room = (limit_bytes - FIXED_BYTES - prefill_bytes(shape)) / decode_step_bytes(shape)
    return max(1, min(new_tokens - 1, int(room)))


# ---- the CPU measurement behind the host-side figures ---------------------------------------------------------

COMPUTE_OPS = frozenset(
    f"aten::{name}"
    for names in (
        ("mm", "addmm", "bmm", "baddbmm", "mul", "add", "sub", "div", "neg", "rsqrt", "pow", "mean", "sum"),
        ("silu", "cat", "copy_", "fill_", "zero_", "cos", "sin", "_softmax", "argmax", "max", "index_select"),
        ("index_copy_", "where", "masked_fill_", "eq", "ne", "lt", "le", "gt", "ge", "bitwise_and", "bitwise_or"),
        ("logical_not", "isin", "cumsum", "arange", "all", "any", "_scaled_dot_product_flash_attention_for_cpu"),
        ("_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention"),
    )
    for name in names
)


def _innermost_compute_ops(ops: list[dict]) -> int:
    """Ops in COMPUTE_OPS with no descendant in it (aten::to > _to_copy > copy_ counts once)."""
    ops = sorted(ops, key=lambda e: (e["tid"], e["ts"], -e["dur"]))
    count, stack = 0, []  # stack: [end, tid, is_compute, has_compute_child]
    for op in ops:
        while stack and (stack[-1][1] != op["tid"] or stack[-1][0] <= op["ts"]):
            count += _close(stack)
        stack.append([op["ts"] + op["dur"], op["tid"], op["name"] in COMPUTE_OPS, False])
    while stack:
        count += _close(stack)
    return count


def _close(stack: list[list]) -> int:
    _end, _tid, is_compute, has_compute_child = stack.pop()
    if stack and (is_compute or has_compute_child):
        stack[-1][3] = True
    return int(is_compute and not has_compute_child)


def trace_figures(trace_gz: Path) -> dict[str, float]:
    """Per-step host figures of a CPU capture with stepscope markers (events attributed by start time)."""
    events = json.loads(gzip.decompress(trace_gz.read_bytes()))["traceEvents"]
    marks = sorted((e for e in events if str(e.get("name", "")).startswith("stepscope.")), key=lambda e: e["ts"])
    starts = [m["ts"] for m in marks] + [marks[-1]["ts"] + marks[-1]["dur"]]
    per_forward = [0] * len(marks)
    ops_per_forward: list[list[dict]] = [[] for _ in marks]
    for e in events:
        ts = e.get("ts")
        if not isinstance(ts, int | float) or not starts[0] <= ts < starts[-1]:
            continue
        i = next(i for i in range(len(marks)) if ts < starts[i + 1])
        per_forward[i] += 1
        if e.get("cat") == "cpu_op":
            ops_per_forward[i].append(e)
    decode = per_forward[1:]
    size = trace_gz.stat().st_size
    return {
        "events": len(events),
        "gz_bytes": size,
        "gz_bytes_per_event": size / len(events),
        "prefill_events": per_forward[0],
        "decode_steps": len(decode),
        "host_events_per_decode_step": sum(decode) / len(decode),
        "compute_ops_per_decode_step": sum(map(_innermost_compute_ops, ops_per_forward[1:])) / len(decode),
    }


def measure(
    layers: int = 32, new_tokens: int = 9, options: tuple[str, ...] = ("plain", "stack")
) -> dict[str, dict[str, float]]:
    """Capture the tiny-width ``layers``-layer Llama on this CPU with each of ``options`` ("plain", "stack")."""
    import transformers

    from stepscope.collectors.run import RunSpec, run_profiled_generation

    config = transformers.LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=1024,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
    )
    out = {}
    with tempfile.TemporaryDirectory(prefix="trace-size-") as work:
        folder = Path(work) / "model"
        transformers.AutoModelForCausalLM.from_config(config).save_pretrained(folder)
        stack = dict(with_stack=True, with_modules=True, profile_memory=True)
        for name in options:
            extra = stack if name == "stack" else {}
            spec = RunSpec(
                model=str(folder), device="cpu", prompt_tokens=16, new_tokens=new_tokens, record_shapes=True, **extra
            )
            run_dir = run_profiled_generation(spec, Path(work) / "runs")
            out[name] = trace_figures(run_dir / "trace.json.gz")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python bench/trace_size.py", description=__doc__.splitlines()[0])
    p.add_argument("--measure", action="store_true", help="rerun the CPU capture behind the host-side figures")
    p.add_argument("--layers", type=int, default=32)
    args = p.parse_args(argv)
    if args.measure:
        for name, figures in measure(args.layers).items():
            print(name, json.dumps({k: round(v, 2) for k, v in figures.items()}))
    print(f"kernels per decode step (estimate): {kernels_per_step():.0f}")
    for label, shape, tokens in (
        ("eager", TraceShape(), 64),
        ("cuda-graph", TraceShape(graph=True), 64),
        ("eager, stack options", TraceShape("stack"), 64),
    ):
        cap = decode_step_cap(shape, tokens)
        full, capped = estimate_trace_bytes(shape, tokens - 1), estimate_trace_bytes(shape, cap)
        print(
            f"{label:22s} {decode_step_bytes(shape) / 1e3:6.0f} kB per decode step; {tokens} tokens: "
            f"{full / MIB:5.1f} MiB uncapped, cap {cap} decode steps -> {capped / MIB:4.1f} MiB"
        )
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main())
