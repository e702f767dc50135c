"""Parsed and analysed traces, cached by the sha256 of the file's bytes.

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

from analysis import Analysis, analyze
from analysis.report import contract
from parsers import Timeline, TraceError, parse_trace_bytes
from parsers.limits import ReadLimits, read_trace_bytes
from parsers.run_sidecar import attach_run_json

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
    """Hash a file once per (path, mtime, size), so reruns skip reading big files."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _build(
    data: bytes | bytearray, already_decompressed: bool, path: Path | None = None
) -> tuple[Timeline, Analysis, dict]:
    timeline = parse_trace_bytes(data, ReadLimits.from_env(), already_decompressed=already_decompressed)
    if path is not None:
        timeline = attach_run_json(timeline, path)  # device and model facts a CPU trace lacks
    analysis = analyze(timeline)
    return timeline, analysis, contract(timeline, analysis)


@st.cache_data(max_entries=MAX_CACHED_TRACES, show_spinner="Reading and analysing the trace...")
def _analyse_file(sha256: str, _path: str) -> tuple[Timeline, Analysis, dict]:
    return _build(read_trace_bytes(_path, ReadLimits.from_env()), already_decompressed=True, path=Path(_path))


@st.cache_data(max_entries=MAX_CACHED_TRACES, show_spinner="Reading and analysing the upload...")
def _analyse_bytes(sha256: str, _data: bytes) -> tuple[Timeline, Analysis, dict]:
    return _build(_data, already_decompressed=False)


def load_path(path: str | Path) -> LoadedTrace:
    """Parse and analyse a trace file (cached). Raises TraceError with a one-line reason."""
    path = Path(path)
    try:
        stat = path.stat()
    except OSError as exc:
        raise TraceError(f"cannot open {path.name}: {exc.strerror or exc}") from None
    sha = _sha256_of_file(str(path), stat.st_mtime_ns, stat.st_size)
    timeline, analysis, report = _analyse_file(sha, str(path))
    return LoadedTrace(path.parent.name or path.name, sha, timeline, analysis, report)


def load_bytes(name: str, data: bytes) -> LoadedTrace:
    """Parse and analyse uploaded bytes (cached by content). Raises TraceError."""
    sha = sha256_of_bytes(data)
    timeline, analysis, report = _analyse_bytes(sha, data)
    return LoadedTrace(name, sha, timeline, analysis, report)
