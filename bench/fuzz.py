"""A long fuzzing session over the same SYNTHETIC generators as tests/test_fuzz.py, with random seeds.

    python bench/fuzz.py --minutes 25 [--formats kineto,perfetto,nsys,run,ranks,logdir,cache,sidecar,regex,names]
                         [--address-space-mb 3000]

Runs rounds of Hypothesis examples per surface until the time is up: the three trace formats and run.json
(tests/fuzz_inputs.py), and issue 26's surfaces (tests/fuzz_surfaces.py): rank folders, --logdir names, damaged
cache entries, sidecars that are not files, user regexes; and issue 39's thousands of distinct long names. Unlike
the test it does not stop at the first failure: every distinct failure (exception type, innermost project frame,
first words) is counted, one example of each saved under bench/out/fuzz/, and slow inputs (over 10 s) are saved
too; an input still running after 20 s fails (tests/fuzz_surfaces.py's alarm). The process runs under the issue's
address-space bound (ulimit -v 3000000 by default), so running out of memory shows as a failure. Prints a table.
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
from tests import fuzz_surfaces as fs  # noqa: E402

OUT = ROOT / "bench" / "out" / "fuzz"
STRATEGIES = {
    "kineto": (fi.kineto_trace_bytes, "trace.json"),
    "perfetto": (fi.perfetto_trace_bytes, "trace.pftrace"),
    "nsys": (fi.nsys_sqlite_bytes, "report.sqlite"),
    "run": (fi.run_json_bytes, "trace.json.gz"),
}
SURFACES = {  # issue 26: each check builds its own input from the drawn value and returns the exit status
    "ranks": (fs.rank_folders, fs.check_rank_folder),
    "logdir": (fs.logdir_trees, fs.check_logdir_tree),
    "cache": (fs.cache_damage, fs.check_cache_damage),
    "sidecar": (fs.sidecars, fs.check_sidecar),
    "regex": (fs.user_regexes, fs.check_user_regex),
    "names": (fs.long_name_traces, fs.check_long_names),  # issue 39: thousands of distinct long names
}


def _signature(exc: BaseException) -> tuple[str, str, str]:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "site-packages" not in f.filename]
    where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
    return type(exc).__name__, where, " ".join(str(exc).split())[:90]


def _save(fmt: str, tag: str, data) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        (OUT / f"{fmt}-{tag}.bin").write_bytes(data)
    else:  # a surface's drawn value: its repr (bytes and odd names escaped) says how to rebuild the input
        (OUT / f"{fmt}-{tag}.txt").write_text(repr(data)[:2_000_000] + "\n")


def fuzz_round(fmt: str, examples: int, failures: collections.Counter, stats: collections.Counter) -> None:
    if fmt in SURFACES:
        strategy, check = SURFACES[fmt]
    else:
        strategy, name = STRATEGIES[fmt]
        check = None
    sample = fi.SAMPLE_TRACE.read_bytes()

    @settings(
        max_examples=examples, deadline=None, database=None, derandomize=False, suppress_health_check=list(HealthCheck)
    )
    @given(strategy())
    def one(data: bytes) -> None:
        start = time.perf_counter()
        try:
            if check is not None:
                status = check(data)
            elif fmt == "run":
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
                _save(fmt, str(len(failures)), data)
            failures[key] += 1
        elapsed = time.perf_counter() - start
        stats["slowest_s"] = max(stats["slowest_s"], int(elapsed))
        if elapsed > 10:
            _save(fmt, f"slow-{int(elapsed)}s", data)
            size = f"{len(data)} bytes" if isinstance(data, bytes) else type(data).__name__
            failures[(fmt, "slow", f"{elapsed:.0f}s", size)] += 1

    one()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=25)
    parser.add_argument("--formats", default=",".join([*STRATEGIES, *SURFACES]))
    parser.add_argument("--round", type=int, default=200, help="examples per format per round")
    parser.add_argument("--address-space-mb", type=int, default=3000, help="ulimit -v for this process (0: none)")
    args = parser.parse_args()
    formats = args.formats.split(",")
    unknown = [f for f in formats if f not in STRATEGIES and f not in SURFACES]
    if unknown:
        parser.error(f"unknown format(s) {', '.join(unknown)}; known: {', '.join([*STRATEGIES, *SURFACES])}")
    if args.address_space_mb > 0:
        import resource

        limit = args.address_space_mb * 1000 * 1024  # as ulimit -v 3000000 (kB) has it
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
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
