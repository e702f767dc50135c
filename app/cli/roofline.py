"""`python -m app.cli roofline`: the floor bytes and FLOPs set under prefill and one decode step.

    python -m app.cli roofline --model PRESET|PATH --gpu NAME --prompt-tokens N --new-tokens M
        --batch B [--hbm-gbps X --tflops Y] [--dtype bf16] [--json]

--model: a collectors preset name, a model folder (its config.json), a config.json or a run.json.
--gpu: a row of analysis.roofline.gpus (fuzzy: "h100", "NVIDIA A100-SXM4-80GB") or "cpu" (measured
here). --hbm-gbps / --tflops override the row's figures (and stand in for --gpu when both given).
"""

from __future__ import annotations

import argparse
import json

from .errors import UserError
from .stdout import write_text


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the subcommand on app.cli's subparsers."""
    p = subparsers.add_parser("roofline", help="expected bytes, FLOPs and time per phase for a model on a device")
    p.add_argument("--model", required=True, help="preset name, model folder, config.json or run.json")
    p.add_argument("--gpu", default=None, help='GPU name from the table (e.g. "H100 SXM", "a100-80gb") or "cpu"')
    p.add_argument("--prompt-tokens", type=int, default=16, help="prompt length per sequence (default 16)")
    p.add_argument("--new-tokens", type=int, default=32, help="tokens generated per sequence (default 32)")
    p.add_argument("--batch", type=int, default=1, help="sequences per forward (default 1)")
    p.add_argument("--hbm-gbps", type=float, default=None, help="memory bandwidth in GB/s (overrides the table)")
    p.add_argument("--tflops", type=float, default=None, help="dense throughput in TFLOP/s (overrides the table)")
    p.add_argument("--dtype", default=None, help="bf16 (default; fp32 with --gpu cpu), fp16, fp32, fp8")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(handler=run_roofline)
    return p


MAX_COUNT = 1 << 24  # tokens or sequences: far above any real run, low enough that every product stays finite


def run_roofline(args: argparse.Namespace) -> int:
    """Print the table or the JSON object. Raises UserError (bad flags) or ValueError (bad model)."""
    from stepscope.analysis.roofline import compute_bound_prompt_tokens, decode_cost, estimate, kv_bytes_per_token
    from stepscope.analysis.roofline.hardware import phase_estimates
    from stepscope.analysis.roofline.model_source import model_shape

    for name in ("prompt_tokens", "new_tokens", "batch"):
        if not 1 <= getattr(args, name) <= MAX_COUNT:
            raise UserError(f"--{name.replace('_', '-')} must be between 1 and {MAX_COUNT}")
    hardware = _hardware(args)
    dtype = args.dtype or ("float32" if hardware.kind == "cpu" else "bfloat16")
    try:
        shape = model_shape(args.model, dtype)
    except (ValueError, ArithmeticError) as exc:  # a hostile config.json: 1e308 sizes overflow
        raise UserError(" ".join(str(exc).split())[:300]) from None
    try:
        phases = phase_estimates(shape, hardware, args.prompt_tokens, args.batch)
        crossover = compute_bound_prompt_tokens(shape, hardware, args.batch)
        last = estimate(decode_cost(shape, args.prompt_tokens + args.new_tokens - 2, args.batch), hardware)
    except (ValueError, ArithmeticError) as exc:
        raise UserError(str(exc)) from None
    report = {
        "phases": {
            name: {
                "bytes": int(e.cost.bytes),
                "flops": int(e.cost.flops),
                "expected_ms": float(e.expected_ms),
                "bound": e.bound,
            }
            for name, e in phases.items()
        },
        "kv_bytes_per_token": int(kv_bytes_per_token(shape)),
        "crossover_prompt_tokens": crossover,
    }
    write_text(
        json.dumps(report, separators=(",", ":")) + "\n"
        if args.json
        else _text(args, shape, hardware, phases, last, report)
    )
    return 0


def _hardware(args: argparse.Namespace):
    from stepscope.analysis.roofline import Hardware, calibrate_cpu, gpu_by_name

    for flag, value in (("--hbm-gbps", args.hbm_gbps), ("--tflops", args.tflops)):
        if value is not None and not 0 < value < 1e9:  # also refuses inf and nan
            raise UserError(f"{flag} must be a positive finite number below 1e9")
    if args.gpu is None:
        if args.hbm_gbps is None or args.tflops is None:
            raise UserError("give --gpu NAME, or both --hbm-gbps and --tflops")
        return Hardware("custom", args.hbm_gbps * 1e9, args.tflops * 1e12, source="given on the command line")
    if args.gpu.strip().lower() == "cpu":
        base = calibrate_cpu()
    else:
        base = gpu_by_name(args.gpu)
    if args.hbm_gbps is None and args.tflops is None:
        return base
    return Hardware(
        base.name,
        args.hbm_gbps * 1e9 if args.hbm_gbps is not None else base.memory_bytes_per_s,
        args.tflops * 1e12 if args.tflops is not None else base.flops_per_s,
        kind=base.kind,
        memory_name=base.memory_name,
        source=f"{base.source}, figures given on the command line override it",
    )


def _text(args, shape, hardware, phases, last, report) -> str:
    from stepscope.analysis.roofline.compare import format_bytes

    lines = [
        f"{shape.name}: {shape.parameters / 1e9:.3g}B parameters, {shape.dtype_bytes} bytes per element, "
        f"batch {args.batch}, prompt {args.prompt_tokens}, {args.new_tokens} new tokens",
        f"{hardware.name}: {hardware.memory_bytes_per_s / 1e9:.0f} GB/s, {hardware.flops_per_s / 1e12:.4g} TFLOP/s"
        f" ({hardware.source})",
        "",
        f"{'phase':<22}{'bytes':>12}{'FLOPs':>12}{'memory ms':>11}{'compute ms':>12}{'expected ms':>13}  bound",
    ]
    rows = [("prefill", phases["prefill"]), ("decode (first step)", phases["decode"])]
    if args.new_tokens > 2:
        rows.append(("decode (last step)", last))
    for label, e in rows:
        lines.append(
            f"{label:<22}{format_bytes(e.cost.bytes):>12}{_flops(e.cost.flops):>12}"
            f"{e.memory_ms:>11.4g}{e.compute_ms:>12.4g}{e.expected_ms:>13.4g}  {e.bound}"
        )
    decode_steps = args.new_tokens - 1
    total = phases["prefill"].expected_ms + decode_steps * (phases["decode"].expected_ms + last.expected_ms) / 2
    crossover = report["crossover_prompt_tokens"]
    lines += [
        "",
        f"KV cache: {report['kv_bytes_per_token'] / 1024:.4g} KiB per token per sequence",
        f"Prefill turns compute bound at {crossover} prompt tokens" if crossover else "Prefill never compute bound",
        f"Whole generation at the roofline: {total:.4g} ms (1 prefill + {decode_steps} decode steps)",
    ]
    return "\n".join(lines) + "\n"


def _flops(flops: float) -> str:
    for unit, scale in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if flops >= scale:
            return f"{flops / scale:.3g} {unit}"
    return f"{flops:.3g} FLOP"
