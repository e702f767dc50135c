"""A folder or glob of per-rank traces -> the ranks of one run, each with its rank number and how it was known.

Why: tensor/pipeline/expert-parallel jobs write one trace per rank (vLLM ``...-rank-N.<ts>.pt.trace.json.gz``,
SGLang ``...-TP-N-DP-N-PP-N-EP-N.trace.json.gz``, torchrun ``rank-N``/``rank_N``), and Kineto puts
``distributedInfo.rank`` in each file. The rank comes from that metadata first, else the file name, else the
order of the files. Files that do not look like one run (world sizes differ, ranks repeat, time ranges do not
overlap) are still read, with a warning saying so. Whether the ranks share a clock decides how analysis may
compare them: on one host absolute times compare; across hosts only step durations do.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .errors import TraceError
from .limits import ReadLimits
from .load import load_trace
from .timeline import Timeline

TRACE_SUFFIXES = (".json", ".json.gz", ".pt.trace.json", ".sqlite", ".perfetto-trace", ".pftrace", ".pb", ".gz")
NOT_TRACES = ("run.json",)
MAX_RANK = 1 << 20

# SGLang first (it also contains digits that torchrun's pattern would take), then vLLM/torchrun forms.
_NAME_PATTERNS = (
    ("sglang TP-N-DP-N-PP-N-EP-N", re.compile(r"TP-(\d+)-DP-(\d+)-PP-(\d+)(?:-EP-(\d+))?", re.IGNORECASE)),
    ("rank-N / rank_N", re.compile(r"(?:^|[^a-z])rank[-_]?(\d+)(?=[^0-9]|$)", re.IGNORECASE)),
)


@dataclass(frozen=True)
class RankFile:
    path: Path
    rank: int
    rank_source: str  # "distributedInfo" | "file name (PATTERN)" | "file order"
    world_size: int | None
    host: str | None
    start_ns: int  # first event (trace clock)
    end_ns: int  # last event end


@dataclass(frozen=True)
class RankedRun:
    """The ranks of one run, sorted by rank, with their timelines in the same order."""

    files: tuple[RankFile, ...]
    timelines: tuple[Timeline, ...]
    warnings: tuple[str, ...]
    same_clock: bool  # False: different hosts or disjoint times, compare ranks by step durations only
    clock_note: str
    order: tuple[int, ...] = ()  # files[k] is the order[k]-th of the paths given (rank_timelines' input order)


def find_trace_files(source: str | os.PathLike) -> list[Path]:
    """A folder (its trace files, not recursive) or a glob pattern -> sorted trace paths."""
    text = os.fspath(source)
    path = Path(text)
    if path.is_dir():
        candidates = [p for p in path.iterdir() if p.is_file()]
    elif path.is_file():
        candidates = [path]
    else:
        candidates = [Path(p) for p in glob.glob(text) if Path(p).is_file()]
    found = sorted(p for p in candidates if _looks_like_trace_name(p.name))
    if not found:
        raise TraceError(f"no trace files in {text[:200]}")
    return found


def _looks_like_trace_name(name: str) -> bool:
    return name not in NOT_TRACES and not name.startswith(".") and name.lower().endswith(TRACE_SUFFIXES)


def rank_from_name(name: str) -> tuple[int, str] | None:
    """Rank from a file name: SGLang's TP/DP/PP/EP (TP index within the DP/PP group), vLLM's and torchrun's rank-N."""
    for label, pattern in _NAME_PATTERNS:
        m = pattern.search(name)
        if m:
            return int(m.group(1)), label
    return None


def _distributed(timeline: Timeline) -> tuple[int | None, int | None]:
    """(rank, world size) from Kineto's distributedInfo, each None when absent or not a sane integer."""
    info = timeline.meta.extra.get("distributed")
    if not isinstance(info, dict):
        return None, None

    def sane(key: str, low: int) -> int | None:
        value = info.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and low <= value < MAX_RANK else None

    return sane("rank", 0), sane("world_size", 1)


def _host(timeline: Timeline) -> str | None:
    host = timeline.meta.extra.get("host_name")
    if not isinstance(host, str) or not host.strip():
        run = timeline.meta.extra.get("run")  # a contracts.run_record.RunRecord, or None
        host = getattr(run, "extra", {}).get("host")
    return host.strip()[:200] if isinstance(host, str) and host.strip() else None


def load_ranks(
    source: str | os.PathLike | list[Path],
    limits: ReadLimits | None = None,
    reader: Callable[[Path, ReadLimits | None], Timeline] = load_trace,
) -> RankedRun:
    """Read every trace of a run and number its ranks. Raises TraceError naming the file that could not be read.

    `reader` reads one file (load_trace; callers above the parsers pass the cached reader of trace_cache)."""
    paths = list(source) if isinstance(source, list) else find_trace_files(source)
    timelines: list[Timeline] = []
    for p in paths:
        try:
            timelines.append(reader(p, limits))
        except TraceError as exc:
            raise TraceError(f"{p.name}: {exc}") from None
    return rank_timelines(paths, timelines)


def _numbering(paths: list[Path], meta: list[tuple[int | None, int | None]]) -> tuple[list[tuple[int, str]], list[str]]:
    """(rank, how it was known) per file, all distinct, and the warnings: distributedInfo when every file has it
    and no two share a rank, else the file names on the same terms, else file order. A rank that repeats is
    warned about and never kept twice: every table and chart of a run has one row or lane per rank."""
    warnings: list[str] = []
    by_name = [rank_from_name(p.name) for p in paths]
    sources = (
        ("distributedInfo", [r for r, _ in meta], ["distributedInfo"] * len(paths)),
        ("file names", [n[0] if n else None for n in by_name], [f"file name ({n[1]})" if n else "" for n in by_name]),
    )
    for where, found, how in sources:
        if not all(r is not None for r in found):
            continue
        repeated = sorted({r for r in found if found.count(r) > 1})
        if not repeated:
            if warnings:
                warnings.append(f"ranks taken from the {where} instead")
            return list(zip(found, how, strict=True)), warnings
        shown = ", ".join(map(str, repeated[:10]))
        warnings.append(f"rank(s) {shown} appear more than once in the {where}: not one run?")
    if warnings:
        warnings.append("ranks numbered in file-name order instead")
    elif len(paths) > 1:
        warnings.append("no rank in the traces' metadata or file names: ranks numbered in file-name order")
    return [(i, "file order") for i in range(len(paths))], warnings


def rank_timelines(paths: list[Path], timelines: list[Timeline]) -> RankedRun:
    """Number already-read timelines and check they look like one run."""
    meta = [_distributed(t) for t in timelines]
    ranks, warnings = _numbering(paths, meta)
    files: list[RankFile] = []
    for p, t, (rank, how), (_, world) in zip(paths, timelines, ranks, meta, strict=False):
        ev = t.events
        start = int(ev["ts"].min()) if len(ev) else 0
        end = int((ev["ts"] + ev["dur"]).max()) if len(ev) else 0
        files.append(RankFile(p, rank, how, world, _host(t), start, end))

    worlds = sorted({f.world_size for f in files if f.world_size is not None})
    if len(worlds) > 1:
        warnings.append(f"world sizes differ between files ({', '.join(map(str, worlds))}): not one run?")
    elif worlds and worlds[0] != len(files):
        warnings.append(f"{len(files)} of a world of {worlds[0]} ranks are here: the others are not compared")

    hosts = sorted({f.host for f in files if f.host})
    overlap = len(files) < 2 or max(f.start_ns for f in files) < min(f.end_ns for f in files)
    if len(hosts) > 1:
        same_clock, note = False, f"ranks ran on {len(hosts)} hosts: compared by step durations, not absolute times"
    elif not overlap:
        same_clock = False
        note = "the ranks' time ranges do not overlap (different clocks?): compared by step durations"
        warnings.append("time ranges of the files do not overlap: not one run, or clocks differ")
    else:
        same_clock, note = True, "one host, one clock: step ends and collective arrivals compared directly"
    order = sorted(range(len(files)), key=lambda i: (files[i].rank, str(files[i].path)))
    return RankedRun(
        files=tuple(files[i] for i in order),
        timelines=tuple(timelines[i] for i in order),
        warnings=tuple(warnings),
        same_clock=same_clock,
        clock_note=note,
        order=tuple(order),
    )


# A serving engine's profile folder (issue 38): vLLM writes one trace per worker rank (`rank0.<id>.pt.trace.json.gz`;
# older versions `<ts>-rank-0.<id>...`) and one for its API server (`<host>_<pid>.async_llm.<id>.pt.trace.json.gz`),
# the run's front end, not a rank. The <id> is when the file was written, different for every file of one capture.
FRONT_END_NAME = re.compile(r"\.async_llm\.", re.IGNORECASE)
FRONT_END_FRAME = re.compile(r"(?:^|/)v1/engine/(?:async_llm|output_processor|core_client)\.py\(\d+\): ")
SERVING_WORKER_NAME = re.compile(r"(?:^|[^a-z])rank[-_]?\d+\.\d+\.pt\.trace\.json", re.IGNORECASE)


@dataclass(frozen=True)
class ServingFolder:
    """Which of a folder's files are worker ranks and which the API server's (positions into the files given)."""

    workers: tuple[int, ...]
    front_ends: tuple[int, ...]


def split_front_ends(paths: list[Path], timelines: list[Timeline]) -> ServingFolder:
    """The files that are an API server's trace (by vLLM's name for it, or by its frames: vLLM's engine client and no
    rank) and the others, the ranks. Raises TraceError, one line, when the folder holds more than one capture: a
    serving folder with a rank twice, or with files whose time ranges do not overlap."""
    front = [i for i, (p, t) in enumerate(zip(paths, timelines, strict=True)) if _is_front_end(p, t)]
    workers = [i for i in range(len(paths)) if i not in front]
    if not workers:
        return ServingFolder(tuple(range(len(paths))), ())
    serving = bool(front) or all(SERVING_WORKER_NAME.search(paths[i].name) for i in workers)
    if serving and len(paths) > 1:
        _one_capture(paths, timelines, workers)
    return ServingFolder(tuple(workers), tuple(front))


def _is_front_end(path: Path, timeline: Timeline) -> bool:
    if FRONT_END_NAME.search(path.name):
        return True
    if _distributed(timeline)[0] is not None or rank_from_name(path.name) is not None:
        return False
    names = timeline.events["name"]
    categories = names.cat.categories if hasattr(names, "cat") else names.unique()
    return any(FRONT_END_FRAME.search(str(c)) for c in categories)


def _one_capture(paths: list[Path], timelines: list[Timeline], workers: list[int]) -> None:
    ranks = [(_distributed(timelines[i])[0], rank_from_name(paths[i].name)) for i in workers]
    numbers = [r if r is not None else (n[0] if n else None) for r, n in ranks]
    seen: dict[int, str] = {}
    for i, rank in zip(workers, numbers, strict=True):
        if rank is not None and rank in seen:
            raise TraceError(
                f"the folder holds more than one capture: rank {rank} twice ({seen[rank]}, {paths[i].name}); "
                "analyze each capture's files on their own"
            )
        if rank is not None:
            seen[rank] = paths[i].name
    spans = [_span(t) for t in timelines]
    first = max(range(len(paths)), key=lambda i: spans[i][0])
    last = min(range(len(paths)), key=lambda i: spans[i][1])
    if spans[first][0] >= spans[last][1]:
        raise TraceError(
            f"the folder holds more than one capture: {paths[first].name} begins after {paths[last].name} ends; "
            "analyze each capture's files on their own"
        )


def _span(timeline: Timeline) -> tuple[int, int]:
    ev = timeline.events
    if not len(ev):
        return 0, 0
    return int(ev["ts"].min()), int((ev["ts"] + ev["dur"]).max())
