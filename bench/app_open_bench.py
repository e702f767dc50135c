"""Time from opening a big trace to the Analyze page's timeline being ready, in-process, no browser.

Measures what the app does on a cold cache: read + parse, analyse, then build the
overview and the default kernel-detail figures and serialise them to JSON (what
Streamlit sends to the browser). Prints one line per stage and the total.

    python bench/app_open_bench.py [TRACE]   (default: bench/out/gpu/gpu_trace.json)
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DEFAULT_TRACE = REPO / "bench" / "out" / "gpu" / "gpu_trace.json"


def main(argv: list[str]) -> int:
    from stepscope.analysis import analyze
    from stepscope.exporters.figures import timeline as timeline_figures
    from stepscope.parsers import load_trace

    path = Path(argv[0]) if argv else DEFAULT_TRACE
    if not path.exists():
        print(f"error: {path} not found (run bench/parse_bench.py first to make it)", file=sys.stderr)
        return 2
    marks = {}
    start = time.perf_counter()
    trace = load_trace(path)
    marks["parse"] = time.perf_counter()
    result = analyze(trace)
    marks["analyze"] = time.perf_counter()
    overview, _ = timeline_figures.overview_figure(result)
    overview_json = overview.to_json()
    marks["overview figure"] = time.perf_counter()
    steps = result.steps
    if len(steps) >= 2:
        lo, hi = int(steps["start_ns"].iloc[0]), int(steps["end_ns"].iloc[min(3, len(steps) - 1)])
    else:  # the Analyze page's default window: the first DETAIL_EVENT_BUDGET events
        ts = trace.events["ts"].to_numpy()
        lo, hi = int(ts[0]), int(ts[min(len(ts) - 1, timeline_figures.DETAIL_EVENT_BUDGET)]) + 1
    detail, note = timeline_figures.detail_figure(trace, result, lo, hi)
    detail_json = detail.to_json()
    marks["detail figure"] = time.perf_counter()
    previous = start
    print(
        f"trace: {path} ({path.stat().st_size / 2**20:.0f} MB, {trace.meta.event_count:,} events, "
        f"{len(trace.events):,} duration events, {len(steps)} steps)"
    )
    for stage, when in marks.items():
        print(f"{stage:16s} {when - previous:7.2f} s")
        previous = when
    print(
        f"{'total':16s} {previous - start:7.2f} s   (figure JSON {len(overview_json) / 1e6:.1f} MB + "
        f"{len(detail_json) / 1e6:.1f} MB) {note}"
    )
    print(json.dumps({"total_s": round(previous - start, 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
