"""Load one trace with HolisticTraceAnalysis, the reference Stepscope is measured against.

Run by parse_bench.py with the interpreter of bench/.venv-hta (HTA 0.5.0 needs pandas<3, which the
project's own environment does not have). It does only what a user of HTA does first: build a
TraceAnalysis, which parses the file into pandas frames. Usage: python hta_load.py TRACE_FILE

The trace is passed as ``trace_files={0: path}`` so HTA neither scans the folder nor needs a
"distributedInfo" rank in the file (a plain CPU trace from torch.profiler has none).
"""

import os
import sys
import time

# Only bench/.venv-hta's interpreter has HTA, which runs this file.
from hta.trace_analysis import TraceAnalysis  # pyright: ignore[reportMissingImports]


def main() -> None:
    path = os.path.abspath(sys.argv[1])
    t0 = time.perf_counter()
    analysis = TraceAnalysis(trace_files={0: path}, trace_dir=os.path.dirname(path))
    rows = sum(len(df) for df in analysis.t.traces.values())
    print(f"hta rows={rows} load_s={time.perf_counter() - t0:.2f}")


if __name__ == "__main__":
    main()
