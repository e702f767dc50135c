"""The compiled JSON scanner in Numba's cache before a benchmark times anything (parsers/kineto/compiled.py).

The first big read on a machine compiles the scanner in the foreground (a minute or so); a benchmark that times
cold opens must not time that. So every such benchmark calls `ensure_built()` first, and says what it found: in the
cache already, compiled now (with the one-time compile's time), or not available (no Numba: every read is
msgspec's, and the figures are msgspec's).

    python bench/scanner_ready.py      # compile it now if need be, and say so
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from parsers.kineto import compiled  # noqa: E402


def ensure_built() -> str:
    """Compile the scanner unless it is in the cache (or cannot be); a line saying which."""
    if compiled.mode() == "off":
        return "compiled scanner: off (STEPSCOPE_JSON_SCANNER=off): msgspec reads every trace"
    if not compiled.installed():
        return "compiled scanner: NOT available (no Numba): msgspec reads every trace"
    if compiled.ready():
        return f"compiled scanner: in Numba's cache already ({compiled.folder()})"
    try:
        seconds = compiled.compile_now()
    except (RuntimeError, OSError) as exc:  # the figures are then msgspec's, and the line says so
        return f"compiled scanner: NOT available ({exc}): msgspec reads every trace"
    return f"compiled scanner: compiled now, once, in {seconds:.1f} s"


if __name__ == "__main__":
    print(ensure_built())
