"""`analyze --json` time on served-run traces, this checkout against another (the main branch before issue 38, by
default /work/wt/base), in interleaved rounds: each round runs both once, in turn, as fresh processes
(`python -m app.cli analyze TRACE --json --no-cache`), so a busy shared machine slows both alike. Prints the medians
and the ratio (this / other); issue 38 asks for at most 1.2.

    python bench/serving_speed.py [--other DIR] [--rounds 5] [TRACE ...]

Default traces: the vLLM capture with the most events (tests/data/captures/vllm/saturated_shapes_stacks, its worker
file: both checkouts read the same input) and a real vLLM V1 mixed step (tests/data/real, TraceLens).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACES = (
    next((ROOT / "tests/data/captures/vllm/saturated_shapes_stacks").glob("rank0.*")),
    ROOT / "tests/data/real/tracelens_vllm_gptoss_mixed_piecewise_rocm.json.gz",
)


def one_run(checkout: Path, trace: Path) -> float:
    """Wall seconds of one analyze --json in a fresh process (the JSON is read back to be sure it was made)."""
    t0 = time.perf_counter()
    command = [sys.executable, "-m", "app.cli", "analyze", str(trace), "--json", "--no-cache"]
    proc = subprocess.run(command, cwd=checkout, capture_output=True, text=True, check=True)
    elapsed = time.perf_counter() - t0
    if not proc.stdout.startswith("{"):
        raise RuntimeError(f"no JSON from {checkout}: {proc.stderr[-300:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", type=Path)
    parser.add_argument("--other", type=Path, default=Path("/work/wt/base"))
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    traces = [t.resolve() for t in args.traces] or list(DEFAULT_TRACES)
    print(f"{'trace':<48} {'other s':>8} {'this s':>8} {'ratio':>6}  (medians of {args.rounds} interleaved rounds)")
    for trace in traces:
        other, this = [], []
        for _ in range(args.rounds):
            other.append(one_run(args.other, trace))
            this.append(one_run(ROOT, trace))
        a, b = statistics.median(other), statistics.median(this)
        print(f"{trace.name[:48]:<48} {a:>8.2f} {b:>8.2f} {b / a:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
