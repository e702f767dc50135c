"""Timeline -> steps, gaps, summary, findings. No Streamlit, Plotly or torch here.

The package loads its names on first use (PEP 562): importing a light submodule (the metric registry, the
gate's syntax, which the command line's --help needs) must not import pandas, so that a big trace's decoding
can start before pandas is loaded.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .model import Analysis, Finding, Segmentation
    from .options import AnalysisOptions
    from .pipeline import analyze, one_process

__all__ = ["Analysis", "AnalysisOptions", "Finding", "Segmentation", "analyze", "one_process"]

_HOMES = {
    "Analysis": "model",
    "Finding": "model",
    "Segmentation": "model",
    "AnalysisOptions": "options",
    "analyze": "pipeline",
    "one_process": "pipeline",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
