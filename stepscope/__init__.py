"""Stepscope for notebooks and scripts: load a trace, analyse it, compare two, get the frames.

    import stepscope
    trace = stepscope.load("sample_traces/cpu_tiny-llama_eager/trace.json.gz")
    trace.summary["itl_ms"]["p50"]          # the analyze --json summary
    trace.steps, trace.gaps                 # pandas frames, one row per step / idle gap
    diff = stepscope.compare(base, trace)   # metrics frame (delta = B - A, ratio = B / A) and a sentence
    diff.gate("itl_p50_ms<=1.05x")          # the CLI's gates

The project's top-level folders (parsers/, analysis/, app/, api/, ...) are this package's subpackages, one name
each: stepscope.parsers, ... In a checkout stepscope/ holds a symbolic link to each folder, so the ordinary import
system (and any static tool) finds stepscope.parsers.timeline at parsers/timeline.py; installed, the folders are
copied inside the package. The API itself is api/ (stepscope.api), loaded by name on first use: `import
stepscope.contracts` (say) must not pull in pandas.
"""

from __future__ import annotations

import importlib as _importlib

__all__ = ["Run", "Trace", "TraceComparison", "analyze", "compare", "frames", "load", "load_run"]


def __getattr__(name: str):
    if name in __all__:
        return getattr(_importlib.import_module(f"{__name__}.api"), name)
    raise AttributeError(f"module 'stepscope' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
