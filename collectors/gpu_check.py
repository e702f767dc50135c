"""Prepared GPU check: Llama-3-8B shapes, bf16, batch 1, 64-token prompt, 64 new tokens, eager vs cuda-graph.

Meant for a machine with a GPU and no network (e.g. an H200 with torch 2.11 and transformers 5.17):

    python -m collectors.gpu_check OUT_DIR            # or set $OUT and omit OUT_DIR

For a quick dry run on a CPU: ``python -m collectors.gpu_check /tmp/check --preset tiny-llama
--device cpu --modes eager,compile``. For each run it prints the harness's own ITL p50 from run.json;
if Stepscope's analysis is importable it also runs ``python -m app.cli analyze TRACE --json``
and prints Stepscope's own ITL and kernels/launches per decode step, for comparison.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from stepscope.collectors.errors import CollectorError
from stepscope.collectors.run import RunSpec, run_profiled_generation
from stepscope.contracts.run_record import read_run_record

REPO_ROOT = Path(__file__).resolve().parents[1]


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m collectors.gpu_check")
    p.add_argument("out", nargs="?", default=os.environ.get("OUT") or "gpu_check_runs")
    p.add_argument("--preset", default="llama-3-8b")
    p.add_argument("--device", default="cuda")
    p.add_argument("--modes", default="eager,cuda-graph")
    p.add_argument("--prompt-tokens", type=int, default=64)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--record-shapes", action="store_true")
    return p.parse_args(argv)


def _stepscope_summary(trace: Path) -> dict[str, Any] | None:
    """The hook for Stepscope's own figures; None (with a note) when analysis is not there yet."""
    if importlib.util.find_spec("stepscope.analysis") is None:
        print("  stepscope analyze: skipped (analysis not importable)")
        return None
    proc = subprocess.run(
        [sys.executable, "-m", "stepscope", "analyze", str(trace), "--json"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        print(f"  stepscope analyze: failed ({tail})")
        return None
    try:
        return json.loads(proc.stdout)["summary"]
    except (json.JSONDecodeError, KeyError) as exc:
        print(f"  stepscope analyze: unreadable output ({exc})")
        return None


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    os.environ.setdefault("STEPSCOPE_DEBUG", "1")  # a failure on the GPU machine must say where it happened
    out = Path(args.out)
    failures = 0
    for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
        spec = RunSpec(
            preset=args.preset,
            device=args.device,
            prompt_tokens=args.prompt_tokens,
            new_tokens=args.new_tokens,
            batch=args.batch,
            mode=mode,
            warmup=args.warmup,
            record_shapes=args.record_shapes,
        )
        print(
            f"== {args.preset} {mode} on {args.device}: batch {args.batch}, "
            f"{args.prompt_tokens}-token prompt, {args.new_tokens} new tokens",
            flush=True,
        )
        try:
            run_dir = run_profiled_generation(spec, out, lambda s, d, t: print(f"  {s}: {d}/{t}", flush=True))
        except CollectorError as exc:
            print(f"  error: {exc}", flush=True)
            failures += 1
            continue
        record = read_run_record(run_dir)
        if record is None:
            print(f"  error: no readable run.json in {run_dir}", flush=True)
            failures += 1
            continue
        timings = record.timings
        print(f"  run: {run_dir}")
        print(f"  device: {record.device}, dtype {record.dtype}, versions {record.versions}")
        itl = timings["itl_ms"] or [float("nan")]
        print(
            f"  harness: ttft_ms {timings['ttft_ms']:.3f}, itl_ms p50 {statistics.median(itl):.3f}"
            f" (min {min(itl):.3f}, max {max(itl):.3f})",
            flush=True,
        )
        summary = _stepscope_summary(run_dir / (record.trace or "trace.json.gz"))
        if summary is not None:
            print(
                f"  stepscope: itl_ms {summary.get('itl_ms')}, "
                f"kernels/decode step {summary.get('kernels_per_decode_step')}, "
                f"launches/decode step {summary.get('launches_per_decode_step')}",
                flush=True,
            )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
