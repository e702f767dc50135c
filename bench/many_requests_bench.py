"""Analysis time for a SYNTHETIC trace of many tiny requests (issue 16, class 9), and peak memory of a
gzip of millions of tiny events (class 10). Prints figures; asserts nothing (tests/test_robustness_*.py do).

    python bench/many_requests_bench.py [--requests 3000 20000] [--tiny-events 12000000]
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stepscope.analysis import analyze  # noqa: E402
from stepscope.analysis.report import contract  # noqa: E402
from stepscope.parsers import parse_trace_bytes  # noqa: E402
from tests.synthetic_traces import doc, many_tiny_requests  # noqa: E402


def requests_bench(counts: list[int]) -> None:
    for n in counts:
        data = json.dumps(doc(many_tiny_requests(n))).encode()
        start = time.perf_counter()
        timeline = parse_trace_bytes(data)
        parsed = time.perf_counter()
        result = analyze(timeline)
        contract(timeline, result)
        done = time.perf_counter()
        print(
            f"{n:>7} requests ({len(data) / 1e6:.1f} MB JSON, {len(timeline.events):,} events): "
            f"parse {parsed - start:.2f} s, analyse + contract {done - parsed:.2f} s"
        )


def tiny_events_bench(count: int) -> None:
    """Peak RSS of reading a gzip of `count` tiny instant events, in a fresh process (ru_maxrss)."""
    path = ROOT / "bench" / "out" / f"tiny_{count}.json.gz"
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        with gzip.open(path, "wb", compresslevel=9) as fh:
            fh.write(b'{"traceEvents":[')
            chunk = b'{"ph":"i","ts":1},' * 100_000
            for _ in range(count // 100_000 - 1):
                fh.write(chunk)
            fh.write(b'{"ph":"i","ts":1},' * 99_999 + b'{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1}]}')
    code = (
        (
            "import resource, sys, time; sys.path.insert(0, %r)\n"
            "from stepscope.parsers import load_trace, TraceError\n"
            "t = time.perf_counter()\n"
            "try:\n    load_trace(%r); outcome = 'read'\n"
            "except TraceError as exc:\n    outcome = 'refused: ' + str(exc)[:90]\n"
            "print(outcome, round(time.perf_counter() - t, 1), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
        )
        .replace("%r", "{!r}")
        .format(str(ROOT), str(path))
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900).stdout.split()
    print(
        f"{count:,} tiny events, {path.stat().st_size / 1e3:.0f} KB gzip: {' '.join(out[:-2])} in {out[-2]} s, "
        f"peak RSS {int(out[-1]) / 1e6:.2f} GB"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, nargs="*", default=[3000, 20000])
    parser.add_argument("--tiny-events", type=int, default=12_000_000)
    args = parser.parse_args()
    requests_bench(args.requests)
    if args.tiny_events:
        tiny_events_bench(args.tiny_events)


if __name__ == "__main__":
    main()
