"""The --logdir picker's refresh on a big tree: many small JSON files that are not traces, a few real traces.

    python bench/logdir_bench.py [--files 60000] [--folders 300] [--traces 20] [--rounds 5]

Builds the tree once under bench/out/logdir_tree (SYNTHETIC: `{"loss": N}` files and copies of a synthetic
generation trace; reused when its counts match), then times, in this process, app.logdir.scan_traces as the
Analyze page's 5-second fragment calls it:
- cold: the first listing with an empty sniff cache (it reads at most MAX_NEW_SNIFFS new files),
- fill: the listings until every file has been looked at once (what the next refreshes do),
- warm: a refresh once everything is known (the median of --rounds), and what it read (nothing); the folder
  list (list_folders), which each refresh also runs, timed on its own,
- baseline: the same tree listed the way the picker did before issue 26 (every file's first 64 kB read on every
  refresh, as its memo of 8000 entries was cleared on a tree this size), measured in the same run.
On a shared machine read the ratio warm / baseline, not the seconds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stepscope.app import logdir  # noqa: E402
from tests.synthetic_traces import doc, synthetic_generation  # noqa: E402

OUT = ROOT / "bench" / "out" / "logdir_tree"


def build_tree(files: int, folders: int, traces: int) -> Path:
    stamp = OUT / ".counts"
    wanted = f"{files} {folders} {traces}"
    if stamp.is_file() and stamp.read_text() == wanted:
        return OUT
    if OUT.exists():
        import shutil

        shutil.rmtree(OUT)
    trace = json.dumps(doc(synthetic_generation(decode_steps=3))).encode()
    for i in range(files):
        folder = OUT / f"exp{i % folders:04d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"metrics-{i}.json").write_bytes(b'{"loss": %d}' % i)
    for i in range(traces):
        (OUT / f"exp{i % folders:04d}" / f"trace-{i}.json").write_bytes(trace)
    stamp.write_text(wanted)
    return OUT


def _timed(fn):
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def baseline_listing(root: Path) -> int:
    """The listing as before: every candidate's head read and sniffed, every time."""
    found = 0
    candidates, _ = logdir._candidates(str(root), str(root))
    for path, _st in candidates:
        fmt, _ = logdir._sniff_head(logdir._head(Path(path)))
        found += fmt is not None
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=60_000)
    parser.add_argument("--folders", type=int, default=300)
    parser.add_argument("--traces", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    root = build_tree(args.files, args.folders, args.traces)
    reads = [0]
    real_head = logdir._head

    def counting_head(path: Path) -> bytes:
        reads[0] += 1
        return real_head(path)

    logdir._head = counting_head
    cache = logdir.SniffCache()
    cold, cold_s = _timed(lambda: logdir.scan_traces(root, sniffs=cache))
    cold_reads, fills = reads[0], 0
    while any("not looked at yet" in n for n in logdir.scan_traces(root, sniffs=cache).notes):
        fills += 1
    listing = None
    warm_times = []
    for _ in range(args.rounds):
        reads[0] = 0
        listing, seconds = _timed(lambda: logdir.scan_traces(root, sniffs=cache))
        warm_times.append(seconds)
    warm_reads = reads[0]
    folders_s = statistics.median(_timed(lambda: logdir.list_folders(root))[1] for _ in range(args.rounds))
    logdir._head = real_head
    base_found, base_s = _timed(lambda: baseline_listing(root))
    warm = statistics.median(warm_times)
    print(f"tree: {args.files:,} small JSON files (not traces) and {args.traces} traces in {args.folders} folders")
    print(
        f"cold listing    {cold_s:7.3f} s  read {cold_reads:,} files, {len(cold.traces)} traces so far"
        f" ({'; '.join(cold.notes) or 'complete'})"
    )
    print(f"filled in after {fills + 1} more refresh(es) (MAX_NEW_SNIFFS = {logdir.MAX_NEW_SNIFFS:,} new files each)")
    print(
        f"warm refresh    {warm:7.3f} s  (median of {args.rounds}), read {warm_reads} files, "
        f"{len(listing.traces)} traces"
    )
    print(f"folder list     {folders_s:7.3f} s  (list_folders, also run on each refresh)")
    print(f"baseline        {base_s:7.3f} s  every file read again ({base_found} traces)")
    print(f"warm / baseline {warm / base_s:7.3f}")


if __name__ == "__main__":
    main()
