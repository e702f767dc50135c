"""Batch analysis over 200 inputs, local process pool vs a local Ray cluster: traces/s, peak memory, same tables.

Inputs (built under bench/out/batch_inputs, reused): the real traces of ../shared/real_traces and the shipped
samples, each copied many times with new bytes (decompressed and gzipped again with a different gzip mtime,
so every copy is a distinct input with its own content hash, as nightly captures of one config are), plus 10
hostile files. Each runner starts from an empty output folder; a second local run checks resume.

    python bench/batch_bench.py [--inputs 200] [--workers N] [--skip-ray]

Peak memory is the largest summed RSS of this process and all its descendants (pool workers; Ray's raylet,
GCS and workers), sampled every 50 ms from /proc.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stepscope.batch.runner import run_batch  # noqa: E402
from stepscope.batch.work import PATH_FIELDS, TIMING_FIELDS  # noqa: E402

REAL = ROOT.parent / "shared" / "real_traces"
if not REAL.is_dir():
    REAL = Path("/work/shared/real_traces")
OUT = ROOT / "bench" / "out"
HOSTILE = 10


def build_inputs(folder: Path, count: int) -> None:
    if folder.is_dir() and len([p for p in folder.rglob("*") if p.is_file()]) == count:
        return
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    sources = sorted(REAL.rglob("*.json*")) + sorted((ROOT / "sample_traces").rglob("*.json.gz"))
    plain = [p.read_bytes() for p in sources]
    plain = [gzip.decompress(b) if b[:2] == b"\x1f\x8b" else b for b in plain]
    for i in range(count - HOSTILE):
        k = i % len(sources)
        name = f"{i:04d}_{sources[k].name.removesuffix('.gz')}.gz"
        (folder / name).write_bytes(gzip.compress(plain[k], compresslevel=1, mtime=i + 1))
    for i in range(HOSTILE):
        data = [b"", b"\x1f\x8b" + os.urandom(64), b'{"traceEvents": [{"ph": "X"', b'{"a": 1}', b"[" * 50_000][i % 5]
        (folder / f"hostile_{i:02d}.json").write_bytes(data + str(i).encode() * (i >= 5))


def _tree_rss_bytes(root_pid: int) -> int:
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/statm") as f:
                rss[int(entry)] = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    total, stack = 0, [root_pid]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total


class PeakMemory:
    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, _tree_rss_bytes(os.getpid()))
            time.sleep(0.05)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def comparable(out: Path) -> dict:
    import pyarrow.parquet as pq

    tables = {}
    for name in ("traces", "steps", "gaps", "categories"):
        t = pq.read_table(out / f"{name}.parquet").to_pandas()
        t = t.drop(columns=[c for c in (*TIMING_FIELDS, *PATH_FIELDS) if c in t.columns])
        by = ["key", "rank", "step", "category"] if name == "categories" else list(t.columns[:2])
        tables[name] = t.sort_values(by, kind="stable").reset_index(drop=True)
    return tables


def timed(label: str, inputs: Path, out: Path, **kw) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    with PeakMemory() as mem:
        started = time.perf_counter()
        report = run_batch(str(inputs), str(out), progress=sys.stderr, **kw)
        seconds = time.perf_counter() - started
    figures = {
        "runner": label,
        "inputs": report.inputs,
        "analysed": report.analysed,
        "errors": report.errors,
        "seconds": round(seconds, 2),
        "traces_per_s": round(report.analysed / seconds, 2),
        "peak_rss_mb": round(mem.peak / 2**20),
    }
    print(json.dumps(figures))
    return figures


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--inputs", type=int, default=200)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--skip-ray", action="store_true")
    args = ap.parse_args()
    inputs = OUT / "batch_inputs"
    build_inputs(inputs, args.inputs)
    results = [timed("local", inputs, OUT / "batch_local", workers=args.workers)]
    resumed = run_batch(str(inputs), str(OUT / "batch_local"), progress=None)
    print(json.dumps({"resume": {"analysed": resumed.analysed, "skipped": resumed.skipped}}))
    if not args.skip_ray:
        import ray

        ray.init(include_dashboard=False, log_to_driver=False)
        try:
            results.append(timed("ray", inputs, OUT / "batch_ray", ray_address="auto"))
        finally:
            ray.shutdown()
        a, b = comparable(OUT / "batch_local"), comparable(OUT / "batch_ray")
        print(json.dumps({"identical_tables": all(a[n].equals(b[n]) for n in a)}))
    (OUT / "batch_bench.json").write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
