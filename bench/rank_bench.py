"""What a folder of many tiny ranks costs, per rank: `analyze DIR --json` cold and warm, and where the time goes.

    python bench/rank_bench.py [--ranks 1000] [--steps 4] [--rounds 1]

Builds (under bench/out/rank_folder_N, reused) N SYNTHETIC rank traces of one tensor-parallel run: Kineto JSON with
distributedInfo, a few decode steps of Stepscope markers, one compute kernel and one NCCL all-reduce per step
(tests/test_ranks.py's shape, a few kB each). Then:
- whole processes, as a user runs them: `python -m app.cli analyze DIR --json` with an empty STEPSCOPE_CACHE_DIR
  (cold: every rank parsed and cached) and again with the same folder (warm: every rank's Arrow entry mapped);
- in this process, the stages of a warm run: finding the files, reading each rank (the cache's lookup and map),
  analysing each rank (analyze(): the same pipeline as one trace), the cross-rank comparison, and the JSON.
Each figure is printed in total and per rank. On a shared machine compare stages within one run.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stepscope.contracts.markers import format_marker  # noqa: E402
from tests.synthetic_traces import annotation, kernel, launch  # noqa: E402

OUT = ROOT / "bench" / "out"
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


def rank_doc(rank: int, ranks: int, steps: int) -> dict:
    """SYNTHETIC: one rank's trace: per step a marker, a compute kernel, then an all-reduce."""
    events, corr = [], 1
    for i in range(steps):
        base = 10_000.0 + i * 1000.0
        kind = "prefill" if i == 0 else "decode"
        events.append(annotation(format_marker(kind, 0, i, 16 if i == 0 else 1, 1), base, 500.0))
        events += [launch(base + 1, 0.5, corr), kernel("gemm_compute", base + 2, 100.0 + rank % 7, corr)]
        events += [launch(base + 1.5, 0.5, corr + 1), kernel(NCCL, base + 110, 50.0, corr + 1, stream=20)]
        corr += 2
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "Synthetic GPU"}],
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": ranks},
        "host_name": "node0",
        "traceEvents": events,
    }


def build_folder(ranks: int, steps: int) -> Path:
    folder = OUT / f"rank_folder_{ranks}_{steps}"
    if folder.is_dir() and len(list(folder.glob("*.json.gz"))) == ranks:
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for r in range(ranks):
        (folder / f"synthetic-rank-{r}.json.gz").write_bytes(
            gzip.compress(json.dumps(rank_doc(r, ranks, steps)).encode())
        )
    return folder


def whole_process(folder: Path, cache: Path) -> float:
    env = {**os.environ, "STEPSCOPE_CACHE_DIR": str(cache)}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "analyze", str(folder), "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        check=False,
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"analyze failed: {done.stderr.decode()[-500:]}")
    return seconds


def stages(folder: Path, cache: Path) -> dict[str, float]:
    """The stages of a warm `analyze DIR --json`, timed in this process."""
    os.environ["STEPSCOPE_CACHE_DIR"] = str(cache)
    from stepscope.analysis import analyze
    from stepscope.analysis.ranks import analyze_ranks
    from stepscope.analysis.ranks_report import multi_rank_contract
    from stepscope.parsers.ranks import find_trace_files, rank_timelines
    from stepscope.trace_cache.timelines import load_trace_cached

    out: dict[str, float] = {}
    t = time.perf_counter()
    paths = find_trace_files(folder)
    out["find the files"] = time.perf_counter() - t
    t = time.perf_counter()
    timelines = [load_trace_cached(p) for p in paths]
    out["read each rank (cache hit: stat index + Arrow map)"] = time.perf_counter() - t
    t = time.perf_counter()
    ranked = rank_timelines(paths, timelines)
    out["number the ranks"] = time.perf_counter() - t
    t = time.perf_counter()
    for timeline in ranked.timelines[:50]:
        analyze(timeline)
    out["analyze() per rank (50 timed, scaled to all)"] = (time.perf_counter() - t) * len(paths) / min(50, len(paths))
    t = time.perf_counter()
    result = analyze_ranks(ranked)
    out["analyze_ranks (every rank's analyze() + the comparison)"] = time.perf_counter() - t
    t = time.perf_counter()
    json.dumps(multi_rank_contract(ranked, result))
    out["the JSON (every rank's contract)"] = time.perf_counter() - t
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    folder = build_folder(args.ranks, args.steps)
    size = sum(p.stat().st_size for p in folder.iterdir())
    print(f"{args.ranks} SYNTHETIC ranks of {args.steps} steps, {size / args.ranks / 1024:.1f} kB each (gzip)")
    with tempfile.TemporaryDirectory(prefix="rank-bench-cache-") as tmp:
        cache = Path(tmp)
        cold = whole_process(folder, cache)
        warm = whole_process(folder, cache)
        print(f"{'analyze DIR --json, cold':<58}{cold:8.2f} s {1000 * cold / args.ranks:8.2f} ms/rank")
        print(f"{'analyze DIR --json, warm':<58}{warm:8.2f} s {1000 * warm / args.ranks:8.2f} ms/rank")
        print("warm, by stage (in this process):")
        for name, seconds in stages(folder, cache).items():
            print(f"  {name:<56}{seconds:8.2f} s {1000 * seconds / args.ranks:8.2f} ms/rank")


if __name__ == "__main__":
    main()
