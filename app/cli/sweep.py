"""`python -m app.cli sweep`: the prefill sweep (collectors.sweep measures, analysis.roofline adds
the expected figures) written as runs/<id>/sweep.json, with one line per point on stdout.

    python -m app.cli sweep [--preset NAME | --model PATH] [--device auto|cpu|cuda[:N]]
        [--min-tokens 16] [--max-tokens 1024] [--points 8] [--batch 1] [--repeats 3]
        [--dtype auto|bf16|fp16|fp32] [--hbm-gbps X --tflops Y] [--out runs] [--no-limits]

The Run page's bounds (contracts.settings: STEPSCOPE_MAX_BATCH, _PROMPT_TOKENS on --max-tokens, _REQUESTS on
--points and --repeats) apply unless --no-limits.
"""

from __future__ import annotations

import argparse

from stepscope.contracts import settings
from .errors import UserError


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("sweep", help="time prefill over prompt lengths against its roofline")
    p.add_argument("--preset", default="tiny-llama")
    p.add_argument("--model", default=None, help="local model folder or hub id (instead of a preset)")
    p.add_argument("--device", default="auto")
    p.add_argument("--min-tokens", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=1024)
    p.add_argument("--points", type=int, default=8)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--dtype", default="auto")
    p.add_argument("--hbm-gbps", type=float, default=None, help="memory bandwidth in GB/s for the expected curve")
    p.add_argument("--tflops", type=float, default=None, help="throughput in TFLOP/s for the expected curve")
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument("--out", default="runs")
    p.add_argument(
        "--no-limits", action="store_true", help="skip the Run page's bounds (STEPSCOPE_MAX_BATCH and its kin)"
    )
    p.set_defaults(handler=run_sweep)
    return p


def run_sweep(args: argparse.Namespace) -> int:
    from stepscope.analysis.roofline import complete_sweep
    from stepscope.collectors.errors import CollectorError
    from stepscope.collectors.run import _quiet_libraries
    from stepscope.collectors.sweep import STAGES, SweepSpec, run_prefill_sweep

    if not args.no_limits:
        counts = {"batch": args.batch, "prompt_tokens": args.max_tokens, "points": args.points}
        problem = settings.run_limits_problem({**counts, "repeats": args.repeats})
        if problem:
            raise UserError(f"{problem} (or --no-limits)")
    _quiet_libraries()
    spec = SweepSpec(
        preset=args.preset,
        model=args.model,
        device=args.device,
        min_tokens=args.min_tokens,
        max_tokens=args.max_tokens,
        points=args.points,
        batch=args.batch,
        repeats=args.repeats,
        dtype=args.dtype,
        hbm_gbps=args.hbm_gbps,
        tflops=args.tflops,
        trust_remote_code=args.trust_remote_code,
    )

    def progress(stage: str, done: int, total: int) -> None:  # stdout: stderr carries only an "error:" line
        print(f"{stage}: {done}/{total}" if stage in STAGES else stage, flush=True)

    try:
        result = run_prefill_sweep(spec, args.out, progress, complete=complete_sweep)
    except CollectorError as exc:
        raise UserError(str(exc)) from None
    for p in result["points"]:
        expected = f"{p['expected_ms']:.3f} ms ({p['bound']})" if p["expected_ms"] is not None else "n/a"
        print(f"prefill {p['prompt_tokens']:>6} tokens: {p['measured_ms']:.3f} ms measured, {expected} expected")
    d, marks = result["decode_step"], result["marks"]
    print(f"decode step at {d['context']} tokens: {d['measured_ms']:.3f} ms measured")
    print(f"compute bound from {marks['compute_bound_prompt_tokens']} prompt tokens (expected)")
    print(f"prefill costs one decode step up to {marks['prefill_equals_decode_tokens']} tokens (measured)")
    print(result["path"])
    return 0
