"""Parsed and analysed traces, cached by the content hash of the file's bytes (sha256 for uploads;
files: trace_cache's hash through its stat index, and their Timeline also in its on-disk Arrow cache).

st.cache_data keys on the hash string only (the bytes and path are passed with a
leading underscore, so Streamlit does not hash them again); the same file under
two names, or uploaded twice, is parsed once. The Analysis is cached with the
Timeline so a rerun (every widget change) costs an unpickle, not a parse.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import streamlit as st
from stepscope.analysis import Analysis, AnalysisOptions, analyze
from stepscope.analysis.report import contract
from stepscope.app.stage_timing import stage
from stepscope.parsers import Timeline, TraceError
from stepscope.parsers.limits import ReadLimits

MAX_CACHED_TRACES = 8


@dataclass(frozen=True)
class LoadedTrace:
    name: str
    sha256: str
    timeline: Timeline
    analysis: Analysis
    report: dict  # the CLI's JSON contract, for the summary download


def sha256_of_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@st.cache_data(max_entries=256, show_spinner=False)
def _sha256_of_file(path: str, mtime_ns: int, size: int) -> str:
    """The file's content hash once per (path, mtime, size), through the on-disk cache's stat index."""
    from stepscope.trace_cache.keys import file_digest
    from stepscope.trace_cache.store import CacheStore

    return file_digest(CacheStore(), path)


@st.cache_data(max_entries=MAX_CACHED_TRACES, show_spinner="Reading the trace...")
def _timeline_of_file(sha256: str, _path: str) -> Timeline:
    from stepscope.trace_cache.timelines import (
        load_trace_cached,  # the on-disk Arrow cache: a reopen maps, never parses
    )

    with stage("parse"):
        return load_trace_cached(_path, ReadLimits.from_env())


@st.cache_data(max_entries=MAX_CACHED_TRACES, show_spinner="Reading the upload...")
def _timeline_of_bytes(sha256: str, _data: bytes) -> Timeline:
    from stepscope.trace_cache.timelines import parse_bytes_cached

    return parse_bytes_cached(_data, ReadLimits.from_env())


@st.cache_data(max_entries=4 * MAX_CACHED_TRACES, show_spinner="Analysing the trace...")
def _analysis_of(sha256: str, gap_threshold_ns: int, step_regex: str | None, _timeline: Timeline) -> tuple:
    """Keyed by the trace's hash and the options, so changing a setting re-analyses without re-reading."""
    try:
        with stage("analysis"):
            analysis = analyze(_timeline, AnalysisOptions(gap_threshold_ns=gap_threshold_ns, step_regex=step_regex))
    except ValueError as exc:  # a bad regex or threshold: one line, like an unreadable trace
        raise TraceError(str(exc)) from None
    return analysis, contract(_timeline, analysis)


def _loaded(name: str, sha: str, timeline: Timeline, options: AnalysisOptions | None) -> LoadedTrace:
    options = options or AnalysisOptions()
    analysis, report = _analysis_of(sha, options.gap_threshold_ns, options.step_regex, timeline)
    return LoadedTrace(name, sha, timeline, analysis, report)


def load_path(path: str | Path, options: AnalysisOptions | None = None) -> LoadedTrace:
    """Parse and analyse a trace file (cached). Raises TraceError with a one-line reason."""
    path = Path(path)
    try:
        stat = path.stat()
    except OSError as exc:
        raise TraceError(f"cannot open {path.name}: {exc.strerror or exc}") from None
    with stage("digest"):
        sha = _sha256_of_file(str(path), stat.st_mtime_ns, stat.st_size)
    return _loaded(path.parent.name or path.name, sha, _timeline_of_file(sha, str(path)), options)


def load_bytes(name: str, data: bytes, options: AnalysisOptions | None = None) -> LoadedTrace:
    """Parse and analyse uploaded bytes (cached by content). Raises TraceError."""
    sha = sha256_of_bytes(data)
    return _loaded(name, sha, _timeline_of_bytes(sha, data), options)
