"""Turn a TraceSource into the front door's answer for it (app/cache.py remembers it), whatever its origin."""

from __future__ import annotations

from collections.abc import MutableMapping

from stepscope.parsers.ranks import find_trace_files
from .analysis_settings import current_given, current_options
from .cache import LoadedTrace, load_folder, load_path
from .logdir import configured_logdir, folder_files
from .trace_sources import TraceSource
from .uploads import RUN_PREFIX, load_upload, load_upload_run


def load_source(source: TraceSource, state: MutableMapping) -> LoadedTrace:
    """Raises TraceError (one line) when the trace cannot be read. A folder (a serving engine's profile folder under
    the log directory) and files uploaded together open as `analyze DIR` opens the folder."""
    if source.key.startswith(RUN_PREFIX):
        return load_upload_run(state, source.key.removeprefix(RUN_PREFIX))
    if source.origin == "upload":
        return load_upload(state, source.key.split(":", 1)[1])
    if source.path is not None and source.path.is_dir():
        root = configured_logdir() if source.origin == "logdir" else None
        files = folder_files(root, source.path) if root is not None else find_trace_files(source.path)
        return load_folder(files, current_options(state), current_given(state), name=source.label)
    return load_path(source.path, current_options(state), current_given(state), name=source.label)
