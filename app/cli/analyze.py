"""`python -m app.cli analyze TRACE|DIR|GLOB [--json]`: steps, gaps, summary and findings of one trace, or of
every rank of a multi-rank run (a folder or glob holding more than one trace) side by side; a serving engine's
profile folder of one worker rank and its API server's trace is that one trace, with the front end's requests."""

from __future__ import annotations

import argparse
import json
import os
import sys

from .options import add_analysis_options, analysis_options, given_args
from .stdout import write_text


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    analyze = subparsers.add_parser("analyze", help="cut a trace into prefill, decode steps and idle gaps")
    define_arguments(analyze)
    analyze.set_defaults(handler=run_analyze)
    return analyze


def define_arguments(parser: argparse.ArgumentParser) -> None:
    """analyze's arguments (the warm path, app/cli_cached.py, parses with these same definitions)."""
    parser.add_argument(
        "trace",
        help="Kineto JSON (.json, .json.gz), Perfetto .pftrace or nsys SQLite export; or a folder/glob of rank traces",
    )
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    parser.add_argument(
        "--window",
        default=None,
        metavar="A:B",
        help="also say what the time from A to B ms (from the trace's start, the app's clock) holds: wall, busy and "
        "idle time and the kernels by name (the `window` object; the app's Selection panel)",
    )
    add_analysis_options(parser)


def run_analyze(args: argparse.Namespace) -> int:
    """Print the JSON contract (DESIGN.md) or its readable form. Raises TraceError/ValueError on bad input."""
    from stepscope.analysis.front_door import OpenedRun, is_run_source, open_folder, open_report, single_trace_of

    options = analysis_options(args)  # before reading: a bad value or --categories file fails fast
    window = parse_window(args.window) if args.window is not None else None
    if window is not None:
        if is_run_source(args.trace):
            raise ValueError("--window reads one trace, not a folder of ranks: name one rank's file")
        return _analyze_window(args, options, window)
    if is_run_source(args.trace):
        from stepscope.exporters.text_report import render_ranks_text

        # several ranks: the ranks object; one worker rank beside a serving engine's API server: that trace's object
        opened = open_folder(args.trace, options, **given_args(args))
        _print_notes(opened.notes)
        if isinstance(opened, OpenedRun):
            return _emit(opened.report, args.json, render_ranks_text)
        return _emit(opened.report, args.json, _render_text)
    from .read_progress import read_progress_for

    trace = single_trace_of(args.trace)
    shown = read_progress_for(os.path.basename(trace))  # None unless stderr is a terminal
    try:
        answer = open_report(trace, options, read_fraction=shown, progress=shown and shown.stage, **given_args(args))
    finally:
        if shown is not None:
            shown.done()
    _print_notes(answer.notes)
    if answer.report is not None and not args.json:  # made now: rendered from it, not parsed back from the text
        write_text(_render_text(answer.report))
        return 0
    return emit_answer(answer.text, args.json)  # the JSON text open_report made (and stored): written at once


def parse_window(text: str) -> tuple[float, float]:
    """ "A:B" (ms from the trace's start) as (A, B); ValueError with one line otherwise."""
    import math

    parts = text.split(":")
    try:
        if len(parts) != 2:
            raise ValueError
        lo, hi = float(parts[0]), float(parts[1])
    except ValueError:
        raise ValueError(f"--window {text!r}: give A:B, two times in ms from the trace's start (112:118)") from None
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi < lo:
        raise ValueError(f"--window {text!r}: A and B must be finite, A at most B")
    return lo, hi


def _analyze_window(args: argparse.Namespace, options, window: tuple[float, float]) -> int:
    """The usual answer with the `window` object added (DESIGN.md): the trace is opened whole, not answered from
    the result cache, since the window reads its events."""
    from stepscope.analysis.event_window import ms_to_ns, range_window, window_json, work_index
    from stepscope.analysis.front_door import open_trace, single_trace_of
    from .read_progress import read_progress_for

    trace = single_trace_of(args.trace)
    shown = read_progress_for(os.path.basename(trace))
    try:
        opened = open_trace(trace, options, read_fraction=shown, progress=shown and shown.stage, **given_args(args))
    finally:
        if shown is not None:
            shown.done()
    _print_notes(opened.notes)
    index = work_index(opened.timeline, opened.analysis)
    frame = range_window(index, ms_to_ns(index, window[0]), ms_to_ns(index, window[1]))
    return _emit({**opened.report, "window": window_json(frame)}, args.json, _render_text)


def emit_answer(text: str, as_json: bool) -> int:
    """A stored answer's JSON text as one line, or its readable form."""
    write_text(text + "\n" if as_json else _render_text(json.loads(text)))
    return 0


def _render_text(report: dict) -> str:
    from stepscope.exporters.text_report import render_text

    return render_text(report)


def _print_notes(notes) -> None:
    for note in notes:
        print(note, file=sys.stderr)


def _emit(report: dict, as_json: bool, render) -> int:
    write_text(json.dumps(report, separators=(",", ":")) + "\n" if as_json else render(report))
    return 0
