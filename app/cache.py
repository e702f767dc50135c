"""Parsed and analysed traces, cached by the content hash of the file's bytes (sha256 for uploads;
files: trace_cache's hash, and their Timeline also in its on-disk Arrow cache).

st.cache_data keys on the hash string only (the bytes and path are passed with a
leading underscore, so Streamlit does not hash them again); the same file under
two names, or uploaded twice, is parsed once. The Analysis is cached with the
Timeline so a rerun (every widget change) costs an unpickle, not a parse.

A file is never hashed on its own before its parse: the first open of a file goes through
trace_cache.open_trace_cached, which hashes it while the parse runs (a big JSON file: while the forked child
decodes; any other: the bytes read for the parse) and records the hash in the stat index, so the next open of
the same path, size, mtime and inode knows it without reading.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from ..analysis import Analysis, AnalysisOptions, analyze
from ..analysis.report import contract
from ..parsers import Timeline, TraceError
from ..parsers.limits import ReadLimits
from .stage_timing import stage

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


MAX_KNOWN_FILES = 256
_StatKey = tuple  # (path, *trace_cache.keys.stat_identity)


class _KnownFiles:
    """This server's own memo of (path, size, mtime, ctime, inode) -> (content hash, sample hash), for the files it
    opened: it answers even when the on-disk stat index cannot be written (a read-only cache folder). Sessions run
    as threads of the one server, so it is behind a lock; like the on-disk index, an entry is served only while the
    file's bytes still give its sample (trace_cache.keys)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.digests: dict[_StatKey, tuple[str, str]] = {}

    def get(self, key: _StatKey) -> tuple[str, str] | None:
        with self.lock:
            return self.digests.get(key)

    def put(self, key: _StatKey, digest: str, sample: str) -> None:
        with self.lock:
            self.digests[key] = digest, sample
            while len(self.digests) > MAX_KNOWN_FILES:
                self.digests.pop(next(iter(self.digests)))  # the oldest first (dicts keep insertion order)


@st.cache_resource(show_spinner=False)
def _known_files() -> _KnownFiles:
    return _KnownFiles()


def _stat_key(path: Path, stat) -> _StatKey:
    from ..trace_cache.keys import stat_identity

    return str(path), *stat_identity(stat)


def _known_digest(path: Path, stat) -> str | None:
    """The hash of this exact file state when this server or the stat index has seen it, else None (no read but
    the sample's)."""
    from ..trace_cache.keys import file_sample, known_digest
    from ..trace_cache.store import CacheStore

    memo = _known_files().get(_stat_key(path, stat))
    if memo is not None and file_sample(path) == memo[1]:
        return memo[0]
    return known_digest(CacheStore(), path)


def _remember(path: Path, stat, sha: str) -> None:
    """Memo the hash just read for the file's state before the read, when that is still its state now."""
    from ..trace_cache.keys import file_sample, stat_identity

    try:
        unchanged = stat_identity(path.stat()) == stat_identity(stat)
    except OSError:
        return
    sample = file_sample(path) if unchanged else None
    if sample is not None:
        _known_files().put(_stat_key(path, stat), sha, sample)


def _open_unknown_file(path: Path) -> tuple[str, Timeline]:
    """(hash, Timeline) of a file whose hash is not known, from one read: hashed and parsed from the same bytes
    (or, when its content is already in the on-disk cache under another name or stat, mapped from there)."""
    from ..trace_cache.timelines import open_trace_cached

    with st.spinner("Reading the trace..."), stage("parse"):
        return open_trace_cached(path, ReadLimits.from_env())


@st.cache_data(max_entries=MAX_CACHED_TRACES, show_spinner="Reading the trace...")
def _timeline_of_file(sha256: str, _path: str, _opened: Timeline | None = None) -> Timeline:
    """Keyed by the content hash only. `_opened`: the Timeline just read with this hash, kept as it is (an entry
    already here for the hash wins, so the same content under two names stays one entry); without it, the file
    is read through the on-disk cache (a hit maps its Arrow entry, a miss parses)."""
    if _opened is not None:
        return _opened
    from ..trace_cache.timelines import load_trace_cached

    with stage("parse"):
        return load_trace_cached(_path, ReadLimits.from_env())


@st.cache_data(max_entries=MAX_CACHED_TRACES, show_spinner="Reading the upload...")
def _timeline_of_bytes(sha256: str, _data: bytes) -> Timeline:
    from ..trace_cache.timelines import parse_bytes_cached

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
    with stage("digest"):  # the stat lookups only: a file not seen before is hashed inside "parse", as it is read
        sha = _known_digest(path, stat)
    if sha is None:
        sha, opened = _open_unknown_file(path)
        _remember(path, stat, sha)
        timeline = _timeline_of_file(sha, str(path), opened)
    else:
        timeline = _timeline_of_file(sha, str(path))
    return _loaded(path.parent.name or path.name, sha, timeline, options)


def load_bytes(name: str, data: bytes, options: AnalysisOptions | None = None) -> LoadedTrace:
    """Parse and analyse uploaded bytes (cached by content). Raises TraceError."""
    sha = sha256_of_bytes(data)
    return _loaded(name, sha, _timeline_of_bytes(sha, data), options)
