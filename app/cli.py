"""Command line: `python -m app.cli analyze TRACE [--json]`.

Bad input ends with exit status 2 and one line on stderr starting with "error:";
a traceback would be a bug, so every expected failure is caught here.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from app.cli_common import add_analysis_options, read_and_analyze

EXIT_BAD_INPUT = 2


def main(argv: Sequence[str] | None = None) -> int:
    from app.cli_cached import serve_cached_analyze

    served = serve_cached_analyze(sys.argv[1:] if argv is None else argv)  # a cached result: no heavy imports
    if served is not None:
        return served
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        print("error: out of memory while reading the trace", file=sys.stderr)
        return EXIT_BAD_INPUT
    except UserFacingError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


class UserFacingError(Exception):
    """Raised by command handlers for anything the user can fix."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m app.cli", description="Stepscope: where every token's time goes.")
    sub = parser.add_subparsers(dest="command", required=True)
    analyze = sub.add_parser("analyze", help="cut a trace into prefill, decode steps and idle gaps")
    analyze.add_argument("trace", help="Kineto JSON (.json, .json.gz), Perfetto .pftrace or nsys SQLite export")
    analyze.add_argument("--json", action="store_true", help="print the result as one JSON object")
    analyze.add_argument("--no-cache", action="store_true", help="do not use the cache (STEPSCOPE_CACHE_DIR)")
    add_analysis_options(analyze)
    analyze.set_defaults(handler=_analyze)

    from app.cli_export import add_export_parser
    from app.cli_roofline import add_roofline_parser

    add_roofline_parser(sub)
    add_export_parser(sub)
    return parser


def _analyze(args: argparse.Namespace) -> int:
    from analysis.report import contract
    from parsers import TraceError

    notes: list[str] = []
    try:
        timeline, result = read_and_analyze(args)
        result = _with_roofline(args.trace, timeline, result, notes)
    except (TraceError, ValueError) as exc:
        raise UserFacingError(str(exc)) from None
    report = contract(timeline, result)
    text = json.dumps(report, separators=(",", ":"))
    for note in notes:
        print(note, file=sys.stderr)
    if not args.no_cache:
        from app.cli_cached import remember_analyze

        remember_analyze(args.trace, args.gap_threshold_us, args.step_regex, text, notes)
    if args.json:
        sys.stdout.write(text + "\n")
    else:
        from app.text_report import render_text

        sys.stdout.write(render_text(report))
    return 0


def _with_roofline(trace_path: str, timeline, result, notes: list[str]):
    """Expected-vs-measured findings when a run.json beside the trace names the model and the GPU is known."""
    from analysis.roofline import roofline_for_trace, timeline_device, with_roofline

    try:
        roofline = roofline_for_trace(trace_path, result, *timeline_device(timeline))
    except ValueError as exc:  # the run.json beside the trace is optional: never fail the analysis over it
        notes.append(f"note: no roofline: {' '.join(str(exc).split())}")
        return result
    return result if roofline is None else with_roofline(result, roofline)


if __name__ == "__main__":
    sys.exit(main())
