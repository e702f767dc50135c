"""A long fuzzing session over the same SYNTHETIC generators as tests/test_fuzz.py, with random seeds.

    python bench/fuzz.py --minutes 25 [--formats kineto,perfetto,nsys,run]

Runs rounds of Hypothesis examples per format until the time is up; unlike the test it does not stop at
the first failure: every distinct failure (exception type, innermost project frame, first words) is counted,
one example of each saved under bench/out/fuzz/, and slow inputs (over 10 s) are saved too. Prints a table.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hypothesis import HealthCheck, given, settings  # noqa: E402

from tests import fuzz_inputs as fi  # noqa: E402

OUT = ROOT / "bench" / "out" / "fuzz"
STRATEGIES = {
    "kineto": (fi.kineto_trace_bytes, "trace.json"),
    "perfetto": (fi.perfetto_trace_bytes, "trace.pftrace"),
    "nsys": (fi.nsys_sqlite_bytes, "report.sqlite"),
    "run": (fi.run_json_bytes, "trace.json.gz"),
}


def _signature(exc: BaseException) -> tuple[str, str, str]:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "site-packages" not in f.filename]
    where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
    return type(exc).__name__, where, " ".join(str(exc).split())[:90]


def fuzz_round(fmt: str, examples: int, failures: collections.Counter, stats: collections.Counter) -> None:
    strategy, name = STRATEGIES[fmt]
    sample = fi.SAMPLE_TRACE.read_bytes()

    @settings(
        max_examples=examples, deadline=None, database=None, derandomize=False, suppress_health_check=list(HealthCheck)
    )
    @given(strategy())
    def one(data: bytes) -> None:
        start = time.perf_counter()
        try:
            if fmt == "run":
                status = fi.check_contract(sample, name, run_json=data)[0]
                assert status == 0, "a run.json made a valid trace fail"
            else:
                status = fi.check_contract(data, name)[0]
            stats[f"{fmt} exit {status}"] += 1
        except BaseException as exc:  # every failure is what we are here to count
            if isinstance(exc, KeyboardInterrupt):
                raise
            key = (fmt, *_signature(exc))
            if key not in failures:
                OUT.mkdir(parents=True, exist_ok=True)
                (OUT / f"{fmt}-{len(failures)}.bin").write_bytes(data)
            failures[key] += 1
        elapsed = time.perf_counter() - start
        stats["slowest_s"] = max(stats["slowest_s"], int(elapsed))
        if elapsed > 10:
            OUT.mkdir(parents=True, exist_ok=True)
            (OUT / f"{fmt}-slow-{int(elapsed)}s.bin").write_bytes(data)
            failures[(fmt, "slow", f"{elapsed:.0f}s", f"{len(data)} bytes")] += 1

    one()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=25)
    parser.add_argument("--formats", default=",".join(STRATEGIES))
    parser.add_argument("--round", type=int, default=200, help="examples per format per round")
    args = parser.parse_args()
    formats = args.formats.split(",")
    failures: collections.Counter = collections.Counter()
    stats: collections.Counter = collections.Counter()
    deadline = time.time() + args.minutes * 60
    rounds = 0
    while time.time() < deadline:
        for fmt in formats:
            if time.time() >= deadline:
                break
            fuzz_round(fmt, args.round, failures, stats)
        rounds += 1
        print(f"round {rounds}: {dict(stats)}; {len(failures)} distinct failures", flush=True)
    total = sum(v for k, v in stats.items() if k != "slowest_s")
    print(f"\n{total} inputs in {args.minutes:g} min, slowest {stats['slowest_s']} s; outcomes {dict(stats)}")
    for key, count in failures.most_common():
        print(f"{count:6d}  {' | '.join(key)}")
    if not failures:
        print("no failures")


if __name__ == "__main__":
    main()
