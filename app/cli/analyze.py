"""`python -m app.cli analyze TRACE [--json]`: steps, gaps, summary and findings of one trace."""

from __future__ import annotations

import argparse
import json
import sys

from app.cli.options import add_analysis_options, read_and_analyze


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    analyze = subparsers.add_parser("analyze", help="cut a trace into prefill, decode steps and idle gaps")
    analyze.add_argument("trace", help="Kineto JSON (.json, .json.gz), Perfetto .pftrace or nsys SQLite export")
    analyze.add_argument("--json", action="store_true", help="print the result as one JSON object")
    add_analysis_options(analyze)
    analyze.set_defaults(handler=run_analyze)
    return analyze


def run_analyze(args: argparse.Namespace) -> int:
    """Print the JSON contract (DESIGN.md) or its readable form. Raises TraceError/ValueError on bad input."""
    from analysis.report import contract

    timeline, result = read_and_analyze(args)
    report = contract(timeline, result)
    if args.json:
        json.dump(report, sys.stdout, separators=(",", ":"))
        sys.stdout.write("\n")
    else:
        from app.text_report import render_text

        sys.stdout.write(render_text(report))
    return 0
