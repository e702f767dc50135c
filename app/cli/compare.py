"""`compare A B [--format text|json|markdown] [--gate EXPR ...]`: the Compare page's table on the command line.

Exit status: 0 when every gate holds (or none was given), 1 when B regresses against A on a gate (one line per
failed gate on stderr), 2 for bad input or a bad gate expression (one "error:" line). Gates are parsed before
the traces are read, so a typo fails in a moment, not after a minute of parsing. Any metric of the registry
(analysis.metrics) can be gated; `--help` lists them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .errors import UserError
from .options import add_analysis_options, analysis_options, given_args
from .stdout import write_text

EXIT_GATE_FAILED = 1


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from stepscope.analysis.gate import GATE_SYNTAX, gate_help

    compare = subparsers.add_parser(
        "compare",
        help="compare trace B against baseline A: metrics, deltas, ratios, one sentence; gate CI on regressions",
        description="Compare trace B against baseline A (delta = B - A, ratio = B / A). With --gate, exit 1 when "
        f"a gate fails: {GATE_SYNTAX}. A metric null in A or B fails its gate. Metrics: {gate_help()}.",
    )
    compare.add_argument("a", metavar="A", help="the baseline trace")
    compare.add_argument("b", metavar="B", help="the changed trace")
    compare.add_argument("--format", choices=("text", "json", "markdown"), default=None, help="output form (text)")
    compare.add_argument("--json", action="store_true", help="short for --format json")
    compare.add_argument(
        "--gate",
        action="append",
        default=[],
        metavar="EXPR",
        help="e.g. itl_p50_ms<=1.05x, kernels_per_decode_step<=+10, gpu_busy_pct>=-2 (repeatable)",
    )
    add_analysis_options(compare)
    compare.set_defaults(handler=run_compare)
    return compare


def open_for_command(path: str, args: argparse.Namespace):
    """One trace of compare, report or export through the front door, with the command's options; its notes go
    to stderr. Raises TraceError or ValueError."""
    from stepscope.analysis.front_door import is_run_source, open_folder_trace, open_trace, single_trace_of
    from stepscope.parsers.ranks import FRONT_END_NAME, find_trace_files

    run = is_run_source(path)
    if run and any(FRONT_END_NAME.search(p.name) for p in find_trace_files(path)):  # a serving engine's folder
        # as `analyze DIR` reads it: its worker with the API server's trace as front end (else its first rank)
        opened = open_folder_trace(path, analysis_options(args), **given_args(args), name=Path(path).name or path)
    else:
        chosen = single_trace_of(path)
        name = None
        if run:  # a run of several ranks, as `analyze DIR` reads it: its first rank stands for it
            name = f"{Path(path).name or path} (rank file {Path(chosen).name})"
            print(f"note: {path} holds a run of several traces; comparing {Path(chosen).name}", file=sys.stderr)
        opened = open_trace(chosen, analysis_options(args), **given_args(args), name=name)
    for note in opened.notes:
        print(note, file=sys.stderr)
    return opened


def run_compare(args: argparse.Namespace) -> int:
    from stepscope.analysis.compare import compare
    from stepscope.analysis.gate import evaluate_gates, parse_gates
    from stepscope.exporters.compare_formats import comparison_json, comparison_markdown, comparison_text

    if args.json and args.format not in (None, "json"):
        raise UserError(f"--json and --format {args.format} disagree")
    fmt = args.format or ("json" if args.json else "text")
    gates = parse_gates(args.gate)  # GateError is a ValueError: exit 2 before any trace is read
    a, b = open_for_command(args.a, args), open_for_command(args.b, args)
    result = compare(a.analysis, b.analysis, a.name, b.name)
    checked = evaluate_gates(gates, a.analysis.summary, b.analysis.summary)
    if fmt == "json":
        out = comparison_json(result, a.report["summary"], b.report["summary"], checked)
        write_text(json.dumps(out, separators=(",", ":"), allow_nan=False) + "\n")
    elif fmt == "markdown":
        write_text(comparison_markdown(result, checked))
    else:
        write_text(comparison_text(result, checked))
    failed = [r for r in checked if not r.ok]
    for r in failed:
        print(f"gate failed: {r.expr}: {r.detail}", file=sys.stderr)
    return EXIT_GATE_FAILED if failed else 0
