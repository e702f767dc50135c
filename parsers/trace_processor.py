"""Where Perfetto's trace_processor_shell is on this machine, if anywhere.

Its own module, free of numpy: the command line words its `export --help` with trace_processor_status()
when it builds its parser, before a big trace's decoding starts."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from stepscope.contracts import settings

TRACE_PROCESSOR_ENV = "STEPSCOPE_TRACE_PROCESSOR"


def find_trace_processor() -> Path | None:
    """A trace_processor_shell binary already on disk: $STEPSCOPE_TRACE_PROCESSOR, the perfetto
    package's download cache, or PATH. Never downloads (Stepscope must work offline)."""
    configured = settings.raw(TRACE_PROCESSOR_ENV)
    if configured:
        path = Path(configured).expanduser()
        return path if path.is_file() and os.access(path, os.X_OK) else None
    cached = _package_cache_path()
    if cached is not None and cached.is_file():
        return cached
    found = shutil.which("trace_processor_shell") or shutil.which("trace_processor")
    return Path(found) if found else None


def _package_cache_path() -> Path | None:
    """Where the perfetto package caches its pinned trace_processor_shell (see perfetto_prebuilts.py)."""
    import platform

    try:
        from perfetto.prebuilts.manifests.trace_processor_shell import TRACE_PROCESSOR_SHELL_MANIFEST
    except ImportError:
        return None
    plat, machine = sys.platform.lower(), platform.machine().lower()
    for entry in TRACE_PROCESSOR_SHELL_MANIFEST:
        if entry.get("platform") == plat and machine in entry.get("machine", []):
            root, ext = os.path.splitext(entry["file_name"])
            cache = Path.home() / ".local" / "share" / "perfetto" / "prebuilts"
            return cache / f"{root}-{entry['sha256'][:16]}{ext}"
    return None


def trace_processor_status() -> str:
    """One line for the UI/CLI: whether non-TrackEvent Perfetto traces can be read here."""
    path = find_trace_processor()
    if path is None:
        return (
            "trace_processor_shell is not on this machine: Perfetto traces without TrackEvent slices cannot be read "
            f"(set {TRACE_PROCESSOR_ENV} to the path of a trace_processor_shell binary)"
        )
    return f"trace_processor_shell at {path}: Perfetto traces of any kind can be read"
