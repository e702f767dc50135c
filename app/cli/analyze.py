"""`python -m app.cli analyze TRACE|DIR|GLOB [--json]`: steps, gaps, summary and findings of one trace, or of
every rank of a multi-rank run (a folder or glob holding more than one trace) side by side."""

from __future__ import annotations

import argparse
import json
import sys

from .options import add_analysis_options, read_and_analyze


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    analyze = subparsers.add_parser("analyze", help="cut a trace into prefill, decode steps and idle gaps")
    analyze.add_argument(
        "trace",
        help="Kineto JSON (.json, .json.gz), Perfetto .pftrace or nsys SQLite export; or a folder/glob of rank traces",
    )
    analyze.add_argument("--json", action="store_true", help="print the result as one JSON object")
    analyze.add_argument("--no-cache", action="store_true", help="do not use the cache (STEPSCOPE_CACHE_DIR)")
    add_analysis_options(analyze)
    analyze.set_defaults(handler=run_analyze)
    return analyze


def run_analyze(args: argparse.Namespace) -> int:
    """Print the JSON contract (DESIGN.md) or its readable form. Raises TraceError/ValueError on bad input."""
    rank_files = _rank_files(args.trace)
    if len(rank_files) > 1:
        return _run_ranks(args, rank_files)
    if rank_files:
        args.trace = str(rank_files[0])
    notes: list[str] = []
    timeline, result = read_and_analyze(args, notes)  # reads first: analysis modules load while it decodes
    from ...analysis.report import contract

    report = contract(timeline, result)
    for note in notes:
        print(note, file=sys.stderr)
    if not args.no_cache:
        from ..cli_cached import remember_analyze

        remember_analyze(args, report, notes)  # only when every option it used is part of the cache key
    from ...exporters.text_report import render_text

    return _emit(report, args.json, render_text)


def _emit(report: dict, as_json: bool, render) -> int:
    """The report as one JSON line (streamed: a reader leaving early is seen here), or in its readable form."""
    if as_json:
        json.dump(report, sys.stdout, separators=(",", ":"))
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render(report))
    return 0


def _rank_files(source: str) -> list:
    """The trace files of a folder or glob (several: a multi-rank run); [] for a plain file path."""
    import glob
    from pathlib import Path

    if Path(source).is_file() or (not Path(source).is_dir() and not glob.has_magic(source)):
        return []  # a file, or a missing one (load_trace says "cannot open ...")
    from ...parsers.ranks import find_trace_files

    return find_trace_files(source)  # TraceError "no trace files in ..." when there are none


def _run_ranks(args: argparse.Namespace, paths: list) -> int:
    """DESIGN.md's ``{"ranks": [...], "run": {...}}`` for a folder or glob of rank traces, or its readable form."""
    from ...analysis import AnalysisOptions
    from ...analysis.ranks_report import analyze_run_folder
    from .options import check_analysis_options

    check_analysis_options(args)
    options = AnalysisOptions(gap_threshold_ns=int(args.gap_threshold_us * 1000), step_regex=args.step_regex)
    from ...exporters.text_report import render_ranks_text
    from ...trace_cache.timelines import load_trace_cached

    def reader(path, limits):  # every rank through the cache (a reopened run maps each rank's Arrow file)
        return load_trace_cached(path, limits, use_cache=not args.no_cache)

    return _emit(analyze_run_folder(paths, options, reader=reader), args.json, render_ranks_text)
