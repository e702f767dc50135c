"""Multi-rank runs for the Ranks page: which folders hold one, and reading + analysing them once (cached).

A rank run is a folder with more than one trace file (a tensor-parallel capture, vLLM's per-rank traces) among
the shipped samples or the runs folder, or several files uploaded together. The analysis is
analysis/ranks.py's; this module only finds the inputs and caches the result by the files' content hashes.
"""

from __future__ import annotations

import hashlib
from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from ..analysis import AnalysisOptions
from ..analysis.ranks import RankRun, analyze_ranks
from ..analysis.ranks_report import run_summary
from ..parsers import TraceError, parse_trace_bytes
from ..parsers.limits import ReadLimits
from ..parsers.ranks import RankedRun, find_trace_files, load_ranks, rank_timelines
from .analysis_settings import current_options
from .trace_sources import runs_dir, samples_dir

RANK_UPLOADS_KEY = "rank_uploads"  # session state: ((name, bytes), ...) of the last multi-file upload
RANKS_KEY = "ranks_source"  # session state: the chosen rank run's key
DEFAULT_SAMPLE = "cpu_tiny-llama_tp2_eager"


@dataclass(frozen=True)
class RankSource:
    key: str  # "ranks:sample:<folder>" | "ranks:run:<folder>" | "ranks:upload"
    label: str
    folder: Path | None


@dataclass(frozen=True)
class LoadedRanks:
    label: str
    ranked: RankedRun
    result: RankRun
    run: dict  # analysis/ranks_report.run_summary: the figures of the run as the JSON reports them


def _rank_folders(root: Path, origin: str) -> list[RankSource]:
    if not root.is_dir():
        return []
    out = []
    for p in sorted(q for q in root.iterdir() if q.is_dir() and not q.name.startswith(".")):
        try:
            if len(find_trace_files(p)) > 1:
                out.append(RankSource(f"ranks:{origin}:{p.name}", f"{p.name} ({origin})", p))
        except TraceError:
            continue
    return out


def rank_sources(state: MutableMapping) -> list[RankSource]:
    """Sample folders first (the TP2 capture), then past runs, then the current multi-file upload."""
    sources = _rank_folders(samples_dir(), "sample") + _rank_folders(runs_dir(), "run")
    if len(state.get(RANK_UPLOADS_KEY, ())) > 1:
        sources.append(RankSource("ranks:upload", f"{len(state[RANK_UPLOADS_KEY])} uploaded files", None))
    return sources


def default_rank_source(sources: list[RankSource]) -> RankSource | None:
    named = [s for s in sources if s.folder is not None and s.folder.name == DEFAULT_SAMPLE]
    return (named or sources or [None])[0]


def _files_key(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for p in paths:
        stat = p.stat()
        digest.update(f"{p.resolve()}|{stat.st_mtime_ns}|{stat.st_size}\n".encode())
    return digest.hexdigest()


def _finish(label: str, ranked: RankedRun, options: AnalysisOptions) -> LoadedRanks:
    try:
        result = analyze_ranks(ranked, options)
    except ValueError as exc:  # a bad step regex: one line, like an unreadable trace
        raise TraceError(str(exc)) from None
    return LoadedRanks(label, ranked, result, run_summary(result))


@st.cache_data(max_entries=4, show_spinner="Reading and analysing every rank...")
def _ranks_of_folder(
    key: str, gap_threshold_ns: int, step_regex: str | None, _paths: tuple[Path, ...], label: str
) -> LoadedRanks:
    from ..trace_cache.timelines import load_trace_cached

    ranked = load_ranks(list(_paths), ReadLimits.from_env(), reader=load_trace_cached)  # each rank through the cache
    return _finish(label, ranked, AnalysisOptions(gap_threshold_ns=gap_threshold_ns, step_regex=step_regex))


@st.cache_data(max_entries=2, show_spinner="Reading and analysing every uploaded rank...")
def _ranks_of_uploads(
    key: str, gap_threshold_ns: int, step_regex: str | None, _items: tuple[tuple[str, bytes], ...]
) -> LoadedRanks:
    timelines = []
    for name, data in _items:
        try:
            timelines.append(parse_trace_bytes(data, ReadLimits.from_env()))
        except TraceError as exc:
            raise TraceError(f"{name}: {exc}") from None
    ranked = rank_timelines([Path(Path(name).name) for name, _ in _items], timelines)
    options = AnalysisOptions(gap_threshold_ns=gap_threshold_ns, step_regex=step_regex)
    return _finish(f"{len(_items)} uploaded files", ranked, options)


def load_rank_source(source: RankSource, state: MutableMapping) -> LoadedRanks:
    """Raises TraceError (one line) when a file cannot be read."""
    options = current_options(state)
    if source.folder is None:
        items = tuple(state.get(RANK_UPLOADS_KEY, ()))
        key = hashlib.sha256(b"".join(hashlib.sha256(d).digest() for _, d in items)).hexdigest()
        return _ranks_of_uploads(key, options.gap_threshold_ns, options.step_regex, items)
    paths = tuple(find_trace_files(source.folder))
    return _ranks_of_folder(_files_key(list(paths)), options.gap_threshold_ns, options.step_regex, paths, source.label)
