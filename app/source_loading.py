"""Turn a TraceSource into a LoadedTrace, whatever its origin."""

from __future__ import annotations

from collections.abc import MutableMapping

from .analysis_settings import current_options
from .cache import LoadedTrace, load_path
from .trace_sources import TraceSource
from .uploads import load_upload


def load_source(source: TraceSource, state: MutableMapping) -> LoadedTrace:
    """Raises TraceError (one line) when the trace cannot be read."""
    if source.origin == "upload":
        return load_upload(state, source.key.split(":", 1)[1])
    loaded = load_path(source.path, current_options(state))
    return LoadedTrace(source.label, loaded.sha256, loaded.timeline, loaded.analysis, loaded.report)
