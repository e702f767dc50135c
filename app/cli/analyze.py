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
    result = _with_roofline(args.trace, timeline, result)
    report = contract(timeline, result)
    if args.json:
        json.dump(report, sys.stdout, separators=(",", ":"))
        sys.stdout.write("\n")
    else:
        from app.text_report import render_text

        sys.stdout.write(render_text(report))
    return 0


def _with_roofline(trace_path: str, timeline, result):
    """Expected-vs-measured findings when a run.json beside the trace names the model and the GPU is known."""
    from analysis.roofline import roofline_for_trace, timeline_device, with_roofline

    try:
        roofline = roofline_for_trace(trace_path, result, *timeline_device(timeline))
    except ValueError as exc:  # the run.json beside the trace is optional: never fail the analysis over it
        print(f"note: no roofline: {' '.join(str(exc).split())}", file=sys.stderr)
        return result
    return result if roofline is None else with_roofline(result, roofline)
