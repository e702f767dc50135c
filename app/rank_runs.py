"""Multi-rank runs for the Ranks page: which folders hold one, and reading + analysing them once (cached).

A rank run is a folder with more than one trace file (a tensor-parallel capture, vLLM's per-rank traces) among
the shipped samples or the runs folder, or several files uploaded together. It is opened by the front door
(analysis/front_door.open_run), like `analyze DIR`; this module only finds the inputs and remembers the answer by
the files' state (or the uploads' hashes) and the key of the options and model.
"""

from __future__ import annotations

import hashlib
from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from stepscope.analysis import AnalysisOptions
from stepscope.analysis.front_door import OpenedRun, TraceBytes, open_run
from stepscope.analysis.ranks import RankRun
from stepscope.parsers import TraceError
from stepscope.parsers.limits import ReadLimits
from stepscope.parsers.ranks import RankedRun, find_trace_files
from .analysis_settings import current_given, current_options
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
        digest.update(f"{p.resolve()}|{stat.st_mtime_ns}|{stat.st_ctime_ns}|{stat.st_ino}|{stat.st_size}\n".encode())
    return digest.hexdigest()


def _loaded(label: str, opened: OpenedRun) -> LoadedRanks:
    return LoadedRanks(label, opened.ranked, opened.result, opened.report["run"])


def _open(members, options: AnalysisOptions, given, label: str) -> LoadedRanks:
    """The front door's run, with a bad option as one line like an unreadable trace."""
    try:
        return _loaded(label, open_run(members, options, model=given.model, device=given.device, name=label))
    except ValueError as exc:  # a bad step regex
        raise TraceError(str(exc)) from None


@st.cache_resource(max_entries=4, show_spinner="Reading and analysing every rank...")
def _ranks_of_folder(key: str, options_key: str, _paths: tuple[Path, ...], _options, _model, label: str) -> LoadedRanks:
    return _open(list(_paths), _options, _model, label)  # each rank through the front door's cache


@st.cache_resource(max_entries=2, show_spinner="Reading and analysing every uploaded rank...")
def _ranks_of_uploads(
    key: str, options_key: str, _items: tuple[tuple[str, bytes], ...], _options, _model
) -> LoadedRanks:
    members = [TraceBytes(Path(name).name, data) for name, data in _items]
    return _open(members, _options, _model, f"{len(_items)} uploaded files")


def load_rank_source(source: RankSource, state: MutableMapping) -> LoadedRanks:
    """Raises TraceError (one line) when a file cannot be read."""
    from stepscope.analysis.result_key import NotKeyableError, result_key

    options, model = current_options(state), current_given(state)  # model: the model and device given
    try:
        options_key = result_key(options=options, given=model, limits=ReadLimits.from_env())
    except NotKeyableError:
        options_key = None
    if source.folder is None:
        items = tuple(state.get(RANK_UPLOADS_KEY, ()))
        if options_key is None:
            return _open(
                [TraceBytes(Path(n).name, d) for n, d in items], options, model, f"{len(items)} uploaded files"
            )
        key = hashlib.sha256(b"".join(hashlib.sha256(d).digest() for _, d in items)).hexdigest()
        return _ranks_of_uploads(key, options_key, items, options, model)
    paths = tuple(find_trace_files(source.folder))
    if options_key is None:
        return _open(list(paths), options, model, source.label)
    return _ranks_of_folder(_files_key(list(paths)), options_key, paths, options, model, source.label)
