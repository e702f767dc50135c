"""The compiled JSON scanner built before a benchmark times anything (parsers/scanner.py).

A big read uses the scanner only once it is built for this checkout; until then it decodes with msgspec and then
starts the build in the background, which would take a core from the next timed run. So every benchmark that times
a cold open calls `ensure_built()` first, and says what it found: built already, built now (with the one-time build's
time, measured here), or not available (no Numba: every read is msgspec's, and the figures are msgspec's).

    python bench/scanner_ready.py      # build it now if need be, and say so
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from parsers import scanner  # noqa: E402


def ensure_built() -> str:
    """Build the scanner unless it is built (or cannot be); a line saying which."""
    if scanner.mode() == "off":
        return "compiled scanner: off (STEPSCOPE_JSON_SCANNER=off): msgspec reads every trace"
    if scanner.built():
        return "compiled scanner: built already"
    start = time.perf_counter()
    try:
        scanner.build()
    except Exception as exc:  # the figures are then msgspec's, and the line says so
        return f"compiled scanner: NOT available ({type(exc).__name__}: {exc}): msgspec reads every trace"
    return f"compiled scanner: built now, once, in {time.perf_counter() - start:.1f} s"


if __name__ == "__main__":
    print(ensure_built())
