"""Issue 39 item 4: analysis time per distinct name. The same SYNTHETIC generation (tests/synthetic_long_names.py:
one distinct name per kernel and host op) with short names and with names of many kilobytes, analysed in one run;
prints each trace's compressed size, its read and its analyze() seconds (the trace read first, then analyze()
timed on its own, best of --repeat), and the ratio long / short. Analysis time should grow with events, not with
name bytes: the ratio stays near 1 however long the names are.

    python bench/long_names_bench.py [--kernels 5000] [--name-bytes 40 8192 16384] [--repeat 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stepscope.analysis import AnalysisOptions, analyze  # noqa: E402
from stepscope.analysis.kernel_names import _label  # noqa: E402
from stepscope.parsers.load import load_trace  # noqa: E402
from tests.synthetic_long_names import synthetic_long_names_gz  # noqa: E402


def timed(path: Path, repeat: int) -> tuple[float, float, int]:
    """(read seconds, best analyze() seconds, steps found) for one trace file."""
    start = time.perf_counter()
    timeline = load_trace(path)
    read_s = time.perf_counter() - start
    best, steps = float("inf"), 0
    for _ in range(max(repeat, 1)):
        _label.cache_clear()  # each analyze() labels its names afresh, as the first analysis of a trace does
        start = time.perf_counter()
        result = analyze(timeline, AnalysisOptions())
        best = min(best, time.perf_counter() - start)
        steps = len(result.steps)
    return read_s, best, steps


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernels", type=int, default=5000, help="distinct kernel names (and as many launches)")
    p.add_argument("--name-bytes", type=int, nargs="+", default=[40, 8192, 16384])
    p.add_argument("--repeat", type=int, default=2)
    args = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="stepscope-long-names-") as folder:
        for size in args.name_bytes:
            path = Path(folder) / f"names-{size}.json.gz"
            path.write_bytes(synthetic_long_names_gz(args.kernels, size))
            rows.append((size, path.stat().st_size, *timed(path, args.repeat)))
    base = rows[0][3]
    print(f"{args.kernels:,} distinct kernel names, one run, analyze() best of {args.repeat}")
    print(f"{'name bytes':>10} {'gz KB':>7} {'read s':>7} {'analyze s':>9} {'steps':>6} {'x first':>7}")
    for size, gz, read_s, analyze_s, steps in rows:
        print(f"{size:>10,} {gz / 1024:>7.0f} {read_s:>7.2f} {analyze_s:>9.2f} {steps:>6} {analyze_s / base:>7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
