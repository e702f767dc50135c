"""Turn a TraceSource into the front door's answer for it (app/cache.py remembers it), whatever its origin."""

from __future__ import annotations

from collections.abc import MutableMapping

from .analysis_settings import current_given, current_options
from .cache import LoadedTrace, load_path
from .trace_sources import TraceSource
from .uploads import load_upload


def load_source(source: TraceSource, state: MutableMapping) -> LoadedTrace:
    """Raises TraceError (one line) when the trace cannot be read."""
    if source.origin == "upload":
        return load_upload(state, source.key.split(":", 1)[1])
    return load_path(source.path, current_options(state), current_given(state), name=source.label)
