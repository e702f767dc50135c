"""Does orjson make the app's Plotly figures serialize faster? (issue 39: orjson joins requirements.txt only if so)

Builds the Analyze page's overview and detail figures for each shipped sample trace, then serializes every figure
with plotly's two JSON engines ("json", the standard library; "orjson") and prints the median time of each, the
ratio, and the sizes. Streamlit's st.plotly_chart serializes with plotly's default engine ("auto": orjson when
importable), so this is the cost each chart pays on every rerun.

    python bench/orjson_figures.py [--repeat N]    (default 7)
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _figures() -> list[tuple[str, object]]:
    from stepscope.analysis import analyze
    from stepscope.exporters.figures import timeline as timeline_figures
    from stepscope.parsers import load_trace

    out = []
    for folder in sorted((REPO / "sample_traces").iterdir()):
        trace_path = folder / "trace.json.gz"
        if not trace_path.exists():
            continue
        trace = load_trace(trace_path)
        result = analyze(trace)
        overview, _ = timeline_figures.overview_figure(result)
        steps = result.steps
        lo, hi = int(steps["start_ns"].iloc[0]), int(steps["end_ns"].iloc[min(3, len(steps) - 1)])
        detail, _ = timeline_figures.detail_figure(trace, result, lo, hi)
        out += [(f"{folder.name} overview", overview), (f"{folder.name} detail", detail)]
    return out


def _median_s(fig, engine: str, repeat: int) -> float:
    import plotly.io as pio

    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        pio.to_json(fig, engine=engine, validate=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    if importlib.util.find_spec("orjson") is None:  # plotly's "orjson" engine imports it; this only asks
        print("error: orjson is not installed here: pip install orjson to compare", file=sys.stderr)
        return 2
    import plotly.io as pio

    total = {"json": 0.0, "orjson": 0.0}
    print(f"{'figure':40s} {'KB':>8s} {'json ms':>9s} {'orjson ms':>10s} {'ratio':>6s}")
    for name, fig in _figures():
        size = len(pio.to_json(fig, engine="json", validate=False)) / 1e3
        plain, fast = (_median_s(fig, engine, args.repeat) for engine in ("json", "orjson"))
        total["json"] += plain
        total["orjson"] += fast
        print(f"{name:40s} {size:8.0f} {plain * 1e3:9.2f} {fast * 1e3:10.2f} {plain / fast:6.2f}")
    print(
        f"{'all figures':40s} {'':8s} {total['json'] * 1e3:9.2f} {total['orjson'] * 1e3:10.2f} "
        f"{total['json'] / total['orjson']:6.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
