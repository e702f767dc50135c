"""The front door: every way into Stepscope opens a trace here, and gets the same answer.

    opened = open_trace("trace.json.gz", AnalysisOptions(), model="llama-3-8b")
    opened.report        # the analyze --json object (docs/DESIGN.md)
    opened.analysis      # steps, gaps, summary, findings, anatomy, roofline
    opened.timeline      # every event

The command line (analyze, compare, report, export), the app's pages, the notebook API and batch read traces
through these functions and nothing else. This module is the only code that reads through the cache, reads the
run.json beside a trace (once per open, into the timeline's metadata), applies a model and builds the contract,
so no figure can depend on the door it was asked through. The walk of one open:

    source -> cache or reader (trace_cache, parsers) -> run.json (parsers.run_sidecar) -> analyze()
           -> the model's additions (roofline, per-category roofline) -> contract (analysis.report)

`open_report` is the same walk for callers that want the contract only (the CLI's analyze): it is answered from
the result cache when every input is the same (analysis/result_key.py), without reading the trace.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from .options import AnalysisOptions
from .result_key import NotKeyableError, result_key

if TYPE_CHECKING:
    from stepscope.parsers.limits import ReadLimits
    from stepscope.parsers.ranks import RankedRun
    from stepscope.parsers.run_sidecar import Sidecar
    from stepscope.parsers.timeline import Timeline
    from stepscope.trace_cache.store import CacheStore
    from .model import Analysis
    from .ranks import RankRun
    from .roofline.hardware import Hardware
    from .roofline.model_config import ModelShape
    from .serving.front_end import FrontEndFiles

# told each stage as it starts: "read", "segment N" (N events), "measure", "anatomy", "model", "report"
Progress = Callable[[str], None]
ReadFraction = Callable[[float], None]  # told how much of a trace file is read, 0 to 1, as it goes (a progress bar)


@dataclass(frozen=True)
class TraceBytes:
    """A trace held in memory (an upload): its name for tables and its bytes as uploaded (gzip or not)."""

    name: str
    data: bytes


@dataclass(frozen=True)
class CachePolicy:
    """How the on-disk cache (STEPSCOPE_CACHE_DIR) is used: parsed Timelines, and answers of file sources."""

    timelines: bool = True  # read and write parsed Timelines (Arrow, memory-mapped back)
    results: bool = True  # read and write the contract of a file (open_report), keyed on every input
    store: CacheStore | None = None  # another cache folder (tests); None: the default one


USE_CACHE = CachePolicy()
NO_CACHE = CachePolicy(timelines=False, results=False)


@dataclass(frozen=True)
class Opened:
    """One trace read and analysed: what every output is made from."""

    name: str
    digest: str | None  # content hash of the file's bytes (None when read with the cache off)
    timeline: Timeline
    analysis: Analysis  # with the roofline and the model's additions applied
    report: dict  # the JSON contract (DESIGN.md): what analyze --json prints
    notes: tuple[str, ...] = ()  # one line each, for stderr or a caption: why no roofline, which model was used
    model: ModelShape | None = None  # the model given (the run.json's wins when it names one)
    path: Path | None = None  # the file, for a file source
    key: str | None = None  # the key of everything but the trace's bytes that shaped the answer (result_key.py)

    @property
    def answer_id(self) -> str:
        """Names this exact answer: the content and the key (for downloads and page-level memos)."""
        return f"{self.digest or self.name}-{self.key or 'unkeyed'}"


@dataclass(frozen=True)
class OpenedRun:
    """The ranks of one multi-rank run, each opened as above, and the run across them."""

    name: str
    ranks: tuple[Opened, ...]  # in rank order; each report also has "rank", "rank_source" and "file"
    ranked: RankedRun  # the files, their ranks and how the ranks were told, the clock note
    result: RankRun
    report: dict  # {"ranks": [...], "run": {...}} (DESIGN.md)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReportAnswer:
    """The contract as the CLI prints it: JSON text (from the result cache, or made now) and its notes."""

    text: str
    notes: tuple[str, ...]
    cached: bool
    report: dict | None = None  # the object itself when made now (a caller may stream it: json.dump gives `text`)


def _silent(stage: str) -> None:
    """No progress wanted."""


def _inputs(
    options: AnalysisOptions | None, model: ModelShape | str | None, device: Hardware | str | None, limits
) -> tuple[AnalysisOptions, Given, ReadLimits]:
    """The options, the given model and device, and the read limits every door resolves the same way (the
    defaults where None); raises ValueError for a model or device that cannot be resolved."""
    from stepscope.parsers.limits import ReadLimits

    return (
        options or AnalysisOptions(),
        Given(resolve_model(model), resolve_device(device)),
        limits or ReadLimits.from_env(),
    )


def open_trace(
    source: str | os.PathLike | TraceBytes,
    options: AnalysisOptions | None = None,
    *,
    model: ModelShape | str | None = None,
    device: Hardware | str | None = None,
    cache: CachePolicy = USE_CACHE,
    progress: Progress | None = None,
    limits: ReadLimits | None = None,
    name: str | None = None,
    read_fraction: ReadFraction | None = None,
) -> Opened:
    """Read and analyse one trace file or upload. `model` (a shape, or a preset name / model folder / config.json /
    run.json path) and `device` (a GPU table row or a name it matches, "H100") are for traces whose run.json
    does not say them; a run.json that names the model wins. Raises TraceError (an unreadable trace) or ValueError
    (a bad option, model or device), each with a one-line reason."""
    options, given, limits = _inputs(options, model, device, limits)
    return _open_one(source, options, given, cache, progress, limits, name, read_fraction=read_fraction)


def _open_one(
    source: str | os.PathLike | TraceBytes,
    options: AnalysisOptions,
    given: Given,
    cache: CachePolicy,
    progress: Progress | None,
    limits: ReadLimits,
    name: str | None = None,
    sidecar: Sidecar | None = None,
    read_fraction: ReadFraction | None = None,
) -> Opened:
    """open_trace's walk; `sidecar`: the run.json already read for this file (open_report reads it for the key)."""
    notify = progress or _silent
    notify("read")
    read = _read(source, limits, cache, sidecar, read_fraction)
    return _opened_from(read, name or source_name(source), options, given, limits, notify)


def _opened_from(
    read: tuple[str | None, Timeline, Sidecar, Path | None],
    name: str,
    options: AnalysisOptions,
    given: Given,
    limits: ReadLimits,
    notify: Progress,
) -> Opened:
    """The answer for what _read gave."""
    digest, timeline, sidecar, path = read
    opened = _analysed(name, digest, timeline, sidecar, path, options, given, notify)
    return replace(opened, key=answer_key_for(sidecar, options, given, limits))


def open_report(
    path: str | os.PathLike,
    options: AnalysisOptions | None = None,
    *,
    model: ModelShape | str | None = None,
    device: Hardware | str | None = None,
    cache: CachePolicy = USE_CACHE,
    progress: Progress | None = None,
    limits: ReadLimits | None = None,
    read_fraction: ReadFraction | None = None,
) -> ReportAnswer:
    """The analyze --json text of one trace file: from the result cache when every input is the same, else opened
    (open_trace) and stored. Raises like open_trace.

    A file the stat index does not know is not hashed before it is read: the read hashes it while its pieces
    decode (and stops at once if its content is cached), and the answer is looked for by that hash before the
    analysis. Hashing first cost a cold 1.3 GB trace a quarter of a second on one core before decoding began."""
    from stepscope.parsers.run_sidecar import read_sidecar

    options, given, limits = _inputs(options, model, device, limits)
    sidecar = read_sidecar(path)
    key = answer_key_for(sidecar, options, given, limits) if cache.results else None
    known_only = cache.timelines  # without the Timeline cache the read does not hash: hashed first, as it was
    if key is not None:
        hit = cached_answer(path, key, cache, known_only=known_only)
        if hit is not None:
            return hit
    notify = progress or _silent
    notify("read")
    read = _read(path, limits, cache, sidecar, read_fraction)
    if key is not None and known_only:  # this content answered before, under another name: its hash is known now
        hit = cached_answer(path, key, cache, known_only=True)
        if hit is not None:
            return hit
    opened = _opened_from(read, source_name(path), options, given, limits, notify)
    text = json.dumps(opened.report, separators=(",", ":"))
    if key is not None:  # keyed again: a first CPU roofline on this machine has just stored its figures
        _store_answer(path, answer_key_for(sidecar, options, given, limits) or key, text, opened.notes, cache)
    return ReportAnswer(text, opened.notes, cached=False, report=opened.report)


def open_run(
    source: str | os.PathLike | Sequence[str | os.PathLike | TraceBytes],
    options: AnalysisOptions | None = None,
    *,
    model: ModelShape | str | None = None,
    device: Hardware | str | None = None,
    cache: CachePolicy = USE_CACHE,
    progress: Progress | None = None,
    limits: ReadLimits | None = None,
    name: str | None = None,
) -> OpenedRun:
    """Read and analyse every rank of a run: a folder, a glob, or a list of files or uploads. A serving engine's API
    server trace among them is the run's front end, not a rank (open_folder). Raises TraceError naming the file that
    could not be read, or saying that the folder holds more than one capture."""
    opened = open_folder(
        source,
        options,
        model=model,
        device=device,
        cache=cache,
        progress=progress,
        limits=limits,
        name=name,
        single=False,
    )
    assert isinstance(opened, OpenedRun)
    return opened


def open_folder(
    source: str | os.PathLike | Sequence[str | os.PathLike | TraceBytes],
    options: AnalysisOptions | None = None,
    *,
    model: ModelShape | str | None = None,
    device: Hardware | str | None = None,
    cache: CachePolicy = USE_CACHE,
    progress: Progress | None = None,
    limits: ReadLimits | None = None,
    name: str | None = None,
    single: bool = True,
) -> Opened | OpenedRun:
    """A folder or glob (or a list of files) of one run: the worker ranks and, for a serving engine's profile folder,
    its API server's trace, read as the front end of every rank (parsers.ranks.split_front_ends). One worker rank
    (and `single`) gives that trace's answer, its report with `front_end`; several give the ranks of the run."""
    from stepscope.parsers.errors import TraceError
    from stepscope.parsers.ranks import find_trace_files, split_front_ends
    from .serving.front_end import front_end_files

    options, given, limits = _inputs(options, model, device, limits)
    notify = progress or _silent
    members = list(source) if isinstance(source, Sequence) and not isinstance(source, str) else None
    if members is None:
        members = find_trace_files(source)
    notify("read")
    read = []
    for member in members:
        try:
            read.append(_read(member, limits, cache))
        except TraceError as exc:
            file_name = member.name if isinstance(member, TraceBytes) else Path(member).name
            raise TraceError(f"{file_name}: {exc}") from None
    paths = [path or Path(member.name) for (_, _, _, path), member in zip(read, members, strict=True)]
    folder = split_front_ends(paths, [timeline for _, timeline, _, _ in read])
    front = front_end_files([paths[i].name for i in folder.front_ends], [read[i][1] for i in folder.front_ends])
    label = name or (Path(source).name if isinstance(source, str | os.PathLike) else "ranks")
    if single and len(folder.workers) == 1:
        i = folder.workers[0]
        digest, timeline, sidecar, path = read[i]
        opened = _analysed(source_name(members[i]), digest, timeline, sidecar, path, options, given, notify, front)
        return replace(opened, key=answer_key_for(sidecar, options, given, limits))
    return _run_of(
        [read[i] for i in folder.workers],
        [members[i] for i in folder.workers],
        label,
        options,
        given,
        limits,
        notify,
        front,
    )


def open_folder_trace(
    source: str | os.PathLike | Sequence[str | os.PathLike | TraceBytes],
    options: AnalysisOptions | None = None,
    *,
    model: ModelShape | str | None = None,
    device: Hardware | str | None = None,
    cache: CachePolicy = USE_CACHE,
    progress: Progress | None = None,
    limits: ReadLimits | None = None,
    name: str | None = None,
) -> Opened:
    """The one trace a page (or compare, report, export) shows for a folder, a glob or files uploaded together: its
    worker with the API server's trace as its front end (`analyze DIR`'s single-trace object), or, with several
    ranks, the first rank's answer, the one that serves every request (as `run.requests` is; the Ranks page and
    `analyze DIR` show them all). Raises like open_folder."""
    opened = open_folder(
        source, options, model=model, device=device, cache=cache, progress=progress, limits=limits, single=True
    )
    if isinstance(opened, OpenedRun):
        first = opened.ranks[0]
        return replace(first, name=f"{name or opened.name} (rank {first.report.get('rank', 0)} of {len(opened.ranks)})")
    return replace(opened, name=name or opened.name)


def _run_of(read, members, label, options, given, limits, notify, front) -> OpenedRun:
    from stepscope.parsers.ranks import rank_timelines
    from .ranks import analyze_ranks
    from .ranks_report import multi_rank_contract

    paths = [path or Path(member.name) for (_, _, _, path), member in zip(read, members, strict=True)]
    ranked = rank_timelines(paths, [timeline for _, timeline, _, _ in read])
    ranks = []
    for i in ranked.order:  # rank order
        digest, timeline, sidecar, path = read[i]
        opened = _analysed(source_name(members[i]), digest, timeline, sidecar, path, options, given, notify, front)
        ranks.append(replace(opened, key=answer_key_for(sidecar, options, given, limits)))
    ranks = tuple(ranks)
    result = analyze_ranks(ranked, options, analyses=[r.analysis for r in ranks])
    report = multi_rank_contract(ranked, result, [r.report for r in ranks])
    if front is not None and ranks:  # the run's requests: its first rank's, which sees every step
        report["run"]["requests"] = ranks[0].report["requests"]
        report["run"]["request_list"] = ranks[0].report["request_list"]
        report["run"]["front_end"] = ranks[0].report["front_end"]
    notes = tuple(dict.fromkeys(note for r in ranks for note in r.notes))
    return OpenedRun(label, ranks, ranked, result, report, notes)


def is_run_source(source: str | os.PathLike) -> bool:
    """Whether a path names a run of several traces (a folder or glob holding more than one), not one file."""
    from stepscope.parsers.ranks import find_trace_files

    text = os.fspath(source)
    if Path(text).is_file() or (not Path(text).is_dir() and not glob.has_magic(text)):
        return False
    return len(find_trace_files(text)) > 1  # TraceError "no trace files in ..." when there are none


def single_trace_of(source: str | os.PathLike) -> str:
    """The one trace a folder or glob holds (or the path itself): `analyze DIR` on a folder of one trace."""
    from stepscope.parsers.ranks import find_trace_files

    text = os.fspath(source)
    if Path(text).is_file() or (not Path(text).is_dir() and not glob.has_magic(text)):
        return text
    return str(find_trace_files(text)[0])


@dataclass(frozen=True)
class Given:
    """What the user says of a trace that its run.json does not: the model, and the device it ran on."""

    model: ModelShape | None = None
    device: Hardware | None = None


NOTHING_GIVEN = Given()


def resolve_device(device: Hardware | str | None) -> Hardware | None:
    """A device named by the user: a GPU table row or a name it matches ("H100"); ValueError when unknown."""
    if device is None or not isinstance(device, str):
        return device
    if not device.strip():
        return None
    from .roofline import gpu_by_name

    return gpu_by_name(device)


def resolve_model(model: ModelShape | str | None) -> ModelShape | None:
    """A model given by name or path turned into its shape (ValueError with one line when it is neither)."""
    if model is None or not isinstance(model, str):
        return model
    from .roofline.model_source import model_shape

    return model_shape(model)


def source_name(source: str | os.PathLike | TraceBytes) -> str:
    """What tables and sentences call a trace: its folder for a generic trace.json.gz, else its file name."""
    if isinstance(source, TraceBytes):
        return source.name
    path = Path(source)
    stem = path.name
    for suffix in (".gz", ".json", ".pftrace", ".perfetto-trace", ".sqlite"):
        stem = stem.removesuffix(suffix)
    if stem in ("trace", ""):
        return path.resolve().parent.name or path.name
    return stem


# --- reading -------------------------------------------------------------------------------------------------


def _read(
    source: str | os.PathLike | TraceBytes,
    limits: ReadLimits,
    cache: CachePolicy,
    sidecar: Sidecar | None = None,
    read_fraction: ReadFraction | None = None,
) -> tuple[str | None, Timeline, Sidecar, Path | None]:
    """(digest, Timeline with its run record, the sidecar, the file's path) of one file or upload; the run.json
    is read here unless the caller already read it."""
    from stepscope.parsers.run_sidecar import Sidecar, read_sidecar, with_sidecar

    if isinstance(source, TraceBytes):
        digest, timeline = _read_bytes(source.data, limits, cache)
        return digest, timeline, Sidecar(), None
    path = Path(source)
    digest, timeline = _read_file(path, limits, cache, read_fraction)
    sidecar = sidecar if sidecar is not None else read_sidecar(path)
    return digest, with_sidecar(timeline, sidecar), sidecar, path


def _read_file(
    path: Path, limits: ReadLimits, cache: CachePolicy, read_fraction: ReadFraction | None = None
) -> tuple[str | None, Timeline]:
    """Read while the analysis loads: a big trace's decoding starts before pandas and the analysis are imported,
    which they are while the forked child decodes. `read_fraction` hears how much is read, 0 to 1, as it goes."""
    if not cache.timelines:
        from stepscope.parsers.load import load_trace

        return None, load_trace(path, limits, meanwhile=_import_analysis, progress=read_fraction)
    from stepscope.trace_cache.timelines import open_trace_cached

    return open_trace_cached(path, limits, cache.store, meanwhile=_import_analysis, progress=read_fraction)


def _import_analysis() -> None:
    """What analyze() and the contract load, pandas too: imported after the read, they cost a cold command 20-26 ms."""
    from . import anatomy, pipeline, report  # noqa: F401


def _read_bytes(data: bytes, limits: ReadLimits, cache: CachePolicy) -> tuple[str, Timeline]:
    from stepscope.trace_cache.keys import hash_bytes

    digest = hash_bytes(data)
    if not cache.timelines:
        from stepscope.parsers.load import parse_trace_bytes

        return digest, parse_trace_bytes(data, limits)
    from stepscope.trace_cache.timelines import parse_bytes_cached

    return digest, parse_bytes_cached(data, limits, cache.store)


# --- analysing -----------------------------------------------------------------------------------------------


def _analysed(
    name: str,
    digest: str | None,
    timeline: Timeline,
    sidecar: Sidecar,
    path: Path | None,
    options: AnalysisOptions,
    given: Given,
    notify: Progress,
    front: FrontEndFiles | None = None,
) -> Opened:
    from . import analyze
    from .report import contract

    analysis = analyze(timeline, options, front.front_end if front is not None else None, notify)
    notify("model")
    analysis, notes = with_model(timeline, analysis, sidecar, given)
    notify("report")
    report = contract(timeline, analysis)
    if front is not None:
        report["front_end"] = {"files": list(front.files), "evidence": front.evidence}
    return Opened(name, digest, timeline, analysis, report, tuple(notes), given.model, path)


def with_model(timeline: Timeline, analysis: Analysis, sidecar: Sidecar, given: Given) -> tuple[Analysis, list[str]]:
    """The model's additions: expected-vs-measured figures and findings, the per-category roofline and the expected
    memory (KV growth, weights, KV tokens that fit), for the model the run.json names (and its device), else for the
    model given (on the trace's device when it is known). Notes say why a run.json is not used, and that it wins
    over a model given."""
    from .anatomy import with_category_roofline
    from .memory_model import with_memory_model
    from .roofline import roofline_for_run, roofline_report, timeline_device, with_roofline

    notes = [f"note: no roofline: {' '.join(sidecar.note.split())}"] if sidecar.note else []
    record = sidecar.record if sidecar.usable else None
    if record is not None:
        try:
            report = roofline_for_run(record, analysis, *timeline_device(timeline))
        except ValueError as exc:  # the run.json is optional: never fail the analysis over it
            notes.append(f"note: no roofline: {' '.join(str(exc).split())}")
            report = None
        if report is not None:
            if given.model is not None or given.device is not None:
                notes.append("note: run.json beside the trace names the model and device; --model/--gpu are not used")
            analysis = with_roofline(analysis, report)
            analysis = with_category_roofline(analysis, report.shape, report.hardware)
            return with_memory_model(analysis, timeline, report.shape, record), notes
    model = given.model
    if model is None and record is not None:  # the run.json names the model but the device is unknown
        from .roofline import shape_from_run_record

        return with_memory_model(analysis, timeline, shape_from_run_record(record), record), notes
    if model is None:
        from .model_proposal import proposal_note

        note = proposal_note(analysis.model_proposal)
        return analysis, notes + ([note] if note else [])
    analysis = with_memory_model(analysis, timeline, model, sidecar.record)
    hardware = given.device or trace_hardware(timeline, analysis)
    if hardware is None:
        return with_category_roofline(analysis, model), notes
    analysis = with_roofline(analysis, roofline_report(analysis, model, hardware))
    return with_category_roofline(analysis, model, hardware), notes


def trace_hardware(timeline: Timeline, analysis: Analysis) -> Hardware | None:
    """The device a trace without run.json ran on, as the roofline needs it: the GPU table's row for the trace's
    device, or for a CPU trace this machine's stored figures (labelled as this machine's); None when unknown."""
    from .roofline import hardware_for, timeline_device

    name, memory = timeline_device(timeline)
    return hardware_for(name, memory, "cuda" if analysis.summary.on_gpu else "cpu")


# --- the result cache ----------------------------------------------------------------------------------------


def answer_key(path: str | os.PathLike, options: AnalysisOptions, given: Given, limits: ReadLimits) -> str | None:
    """The key of a file's answer: every input that shapes it but the trace's bytes (result_key.py); None when one
    cannot be keyed."""
    from stepscope.parsers.run_sidecar import read_sidecar

    return answer_key_for(read_sidecar(path), options, given, limits)


def answer_key_for(sidecar: Sidecar, options: AnalysisOptions, given: Given, limits: ReadLimits) -> str | None:
    """answer_key with the run.json already read."""
    from .roofline.machine import stored_figures_digest

    try:
        return result_key(
            command="analyze",
            options=options,
            given=given,
            limits=limits,
            run_json=sidecar.digest,
            machine=stored_figures_digest(),
        )
    except NotKeyableError:
        return None


def cached_answer(
    path: str | os.PathLike, key: str, cache: CachePolicy, known_only: bool = False
) -> ReportAnswer | None:
    """The stored answer for this file's content and key, or None (a miss, a damaged entry, an unknown file).

    `known_only`: look the file's content hash up in the stat index only, never hash the file (the warm command
    line: a file the index does not know is almost always a first open, which hashes it as it reads it)."""
    from stepscope.trace_cache.results import cached_result

    hit = cached_result(path, key, store=cache.store, known_only=known_only)
    return None if hit is None else ReportAnswer(hit.text, hit.notes, cached=True)


def _store_answer(path: str | os.PathLike, key: str, text: str, notes: tuple[str, ...], cache: CachePolicy) -> None:
    from stepscope.trace_cache.results import store_result

    with contextlib.suppress(OSError, ValueError):  # a cache that cannot be written never fails the answer
        store_result(path, key, text, notes, store=cache.store)


def renamed(opened: Opened, name: str) -> Opened:
    """The same answer under another name (a page's label for it)."""
    return replace(opened, name=name)
