"""Stepscope for notebooks and scripts: load a trace, analyse it, compare two, get the frames.

    import stepscope
    trace = stepscope.load("sample_traces/cpu_tiny-llama_eager/trace.json.gz")
    trace.summary["itl_ms"]["p50"]          # the analyze --json summary
    trace.steps, trace.gaps                 # pandas frames, one row per step / idle gap
    diff = stepscope.compare(base, trace)   # metrics frame (delta = B - A, ratio = B / A) and a sentence
    diff.gate("itl_p50_ms<=1.05x")          # the CLI's gates

The project's top-level folders (parsers/, analysis/, app/, api/, ...) are this package's subpackages: installed,
they live inside it (stepscope.parsers, ...); in a checkout they stay at the repository root, __path__ below
reaches them, and their bare names (app, parsers, ...) are aliases of the same modules (stepscope/_checkout.py).
The API itself is api/ (stepscope.api), loaded by name on first use: `import stepscope.contracts` (say) must not
pull in pandas, and in a checkout no import statement here could name a folder outside this one.
"""

from __future__ import annotations

import importlib as _importlib
import os as _os

_here = _os.path.dirname(_os.path.abspath(__file__))
_root = _os.path.dirname(_here)
if not _os.path.isdir(_os.path.join(_here, "parsers")) and _os.path.isdir(_os.path.join(_root, "parsers")):
    from pathlib import Path as _Path

    from ._checkout import install as _install_bare_names

    __path__.append(_root)  # a checkout: stepscope.parsers is ./parsers
    _install_bare_names(_Path(_root))

__all__ = ["Run", "Trace", "TraceComparison", "analyze", "compare", "frames", "load", "load_run"]


def __getattr__(name: str):
    if name in __all__:
        return getattr(_importlib.import_module(f"{__name__}.api"), name)
    raise AttributeError(f"module 'stepscope' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
