"""A real multi-rank capture on CPUs: a preset run tensor-parallel over N processes with torch.distributed (gloo).

Why: multi-rank analysis needs multi-rank traces with real collectives in them, and most users (and CI)
have no GPUs. Each rank builds the same preset with the same seed, keeps its column slice of q/k/v and
gate/up and its row slice of o_proj and down_proj (Megatron-style), and all-reduces the partial outputs
of o_proj and down_proj: two gloo all-reduces per layer, the collectives a real TP deployment runs.
Every rank runs HF ``generate()`` greedily with the same per-forward stepscope markers as collectors/run.py,
profiled with torch.profiler; each writes ``rank-N.trace.json.gz`` and rank 0 writes run.json.

    python -m collectors.tensor_parallel --preset tiny-llama --ranks 2 --new-tokens 16 --out runs
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from stepscope.collectors.errors import CollectorError

TRACE_NAME = "rank-{rank}.trace.json.gz"


@dataclasses.dataclass
class TPSpec:
    preset: str = "tiny-llama"
    ranks: int = 2
    prompt_tokens: int = 16
    new_tokens: int = 16
    batch: int = 1
    warmup: int = 1
    threads_per_rank: int = 1
    record_shapes: bool = False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _shard_linear(linear: Any, rank: int, world: int, dim: int) -> None:
    """Keep this rank's slice of a Linear along ``dim`` (0: output columns, 1: input rows)."""
    import torch

    weight = linear.weight.data
    size = weight.shape[dim]
    if size % world:
        raise CollectorError(f"a {tuple(weight.shape)} weight does not split into {world} ranks")
    part = size // world
    linear.weight = torch.nn.Parameter(weight.narrow(dim, rank * part, part).contiguous(), requires_grad=False)
    if linear.bias is not None:
        if dim == 0:
            linear.bias = torch.nn.Parameter(linear.bias.data.narrow(0, rank * part, part).contiguous(), False)
        elif rank != 0:  # a row-parallel bias is added once, after the reduction: keep it on rank 0 only
            linear.bias = torch.nn.Parameter(torch.zeros_like(linear.bias.data), requires_grad=False)
    if dim == 0:
        linear.out_features = part
    else:
        linear.in_features = part


def _all_reduce_output(_module: Any, _args: Any, output: Any) -> Any:
    import torch.distributed as dist

    dist.all_reduce(output)
    return output


def shard_model(model: Any, rank: int, world: int) -> int:
    """Column/row split of every decoder layer's attention and MLP; returns the all-reduces per forward."""
    config = model.config
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    if heads % world or kv_heads % world:
        raise CollectorError(f"{heads} heads / {kv_heads} KV heads do not split into {world} ranks")
    reduces = 0
    for layer in model.model.layers:
        attn, mlp = layer.self_attn, layer.mlp
        for proj in (attn.q_proj, attn.k_proj, attn.v_proj, mlp.gate_proj, mlp.up_proj):
            _shard_linear(proj, rank, world, 0)
        for proj in (attn.o_proj, mlp.down_proj):
            _shard_linear(proj, rank, world, 1)
            proj.register_forward_hook(_all_reduce_output)
            reduces += 1
        # HF attention reshapes with -1 heads; the GQA group size (heads / kv heads) is unchanged by the split
        for name in ("num_heads", "num_key_value_heads"):
            if hasattr(attn, name):
                setattr(attn, name, getattr(attn, name) // world)
    return reduces


def _rank_main(rank: int, spec: TPSpec, port: int, out: str) -> None:
    """One rank: build, shard, warm up, profile one generation, export its trace."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import torch
    import torch.distributed as dist

    from stepscope.collectors.decode_loops import DecodeSettings, HFGenerateLoop
    from stepscope.collectors.model_loading import build_preset
    from stepscope.collectors.profiling import ProfilerOptions, ProfileWindow
    from stepscope.collectors.prompts import prompt_ids
    from stepscope.collectors.step_tracker import StepTracker

    torch.set_num_threads(spec.threads_per_rank)
    dist.init_process_group("gloo", rank=rank, world_size=spec.ranks)
    try:
        device = torch.device("cpu")
        loaded = build_preset(spec.preset, device, torch.float32, spec.batch, spec.prompt_tokens + spec.new_tokens)
        reduces = shard_model(loaded.model, rank, spec.ranks)
        vocab = loaded.config.vocab_size
        input_ids = prompt_ids(None, spec.prompt_tokens, spec.batch, vocab, None)
        loop = HFGenerateLoop(loaded.model, DecodeSettings(spec.new_tokens, spec.batch, spec.prompt_tokens))
        for _ in range(spec.warmup):
            warm = StepTracker(spec.batch, device)
            warm.start_request(0)
            loop.generate(input_ids, warm)
        dist.barrier()
        window = ProfileWindow(device, ProfilerOptions(record_shapes=spec.record_shapes), 1, 1 << 30)
        tracker = StepTracker(spec.batch, device, after_forward=window.after_forward)
        window.start()
        try:
            window.request_started(0)
            tracker.start_request(0)
            loop.generate(input_ids, tracker)
        finally:
            window.stop()
        window.export_gzip(str(Path(out) / TRACE_NAME.format(rank=rank)))
        result = [rank, tracker.token_times_ms[0], reduces, sum(p.numel() for p in loaded.model.parameters())]
        (Path(out) / f".rank-{rank}.result.json").write_text(json.dumps(result))  # files: no pipe to fill
        dist.barrier()
    finally:
        dist.destroy_process_group()


def run_tensor_parallel(spec: TPSpec, out_dir: str | os.PathLike = "runs") -> Path:
    """Run ``spec.ranks`` processes, write one trace per rank plus run.json into a new run folder atomically."""
    import torch.multiprocessing as mp

    from stepscope.collectors.model_loading import preset_config
    from stepscope.collectors.run_record import build_record, json_safe, timings
    from stepscope.contracts.run_record import write_run_record

    if spec.ranks < 2:
        raise CollectorError("ranks must be at least 2")
    runs_dir = Path(out_dir)
    runs_dir.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=".partial-", dir=runs_dir))
    mask = os.umask(0)
    os.umask(mask)
    partial.chmod(0o777 & ~mask)  # mkdtemp makes it private; the run folder should not be
    try:
        mp.start_processes(_rank_main, args=(spec, _free_port(), str(partial)), nprocs=spec.ranks, start_method="spawn")
        results = [partial / f".rank-{r}.result.json" for r in range(spec.ranks)]
        per_rank = sorted(json.loads(p.read_text()) for p in results)
        for p in results:
            p.unlink()
        config = preset_config(spec.preset)
        import torch

        record = build_record(
            spec={**dataclasses.asdict(spec), "mode": "eager", "device": "cpu"},
            device_type="cpu",
            device_name=f"CPU ({spec.ranks} processes, gloo)",
            model_info={
                "source": f"preset:{spec.preset}",
                "architecture": "LlamaForCausalLM (tensor-parallel shards)",
                "parameters_per_rank": per_rank[0][3],
                "config": json_safe(config.to_dict()),
            },
            dtype=torch.float32,
            prompt_len=spec.prompt_tokens,
            timing=timings([per_rank[0][1]], spec.new_tokens - 1, False),
            expected_markers={"prefill": 1, "decode": spec.new_tokens - 1},
        )
        tensor_parallel = {
            "world_size": spec.ranks,
            "backend": "gloo",
            "traces": [TRACE_NAME.format(rank=r) for r in range(spec.ranks)],
            "all_reduces_per_forward": per_rank[0][2],
            "split": "column: q/k/v, gate/up; row: o_proj, down_proj (+ all-reduce)",
            "token_times_ms_per_rank": [r[1] for r in per_rank],
        }
        record = dataclasses.replace(
            record, trace=TRACE_NAME.format(rank=0), extra={**record.extra, "tensor_parallel": tensor_parallel}
        )
        write_run_record(partial, record)
        final = runs_dir / f"{time.strftime('%Y%m%d-%H%M%S')}_cpu_{spec.preset}_tp{spec.ranks}_eager"
        os.replace(partial, final)
        return final
    except CollectorError:
        raise
    except Exception as exc:
        first_line = (str(exc).strip().splitlines() or [""])[0][:300]
        raise CollectorError(f"tensor-parallel run failed: {type(exc).__name__}: {first_line}") from exc
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m collectors.tensor_parallel", description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="tiny-llama")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--prompt-tokens", type=int, default=16)
    p.add_argument("--new-tokens", type=int, default=16)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--threads-per-rank", type=int, default=1)
    p.add_argument("--record-shapes", action="store_true")
    p.add_argument("--out", default="runs")
    args = p.parse_args(argv)
    spec = TPSpec(
        args.preset,
        args.ranks,
        args.prompt_tokens,
        args.new_tokens,
        1,
        args.warmup,
        args.threads_per_rank,
        args.record_shapes,
    )
    try:
        print(run_tensor_parallel(spec, args.out))
    except CollectorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
