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
    except Exception as exc:  # a bug, never expected: still one line (the fuzz test fails on this text)
        print(f"error: {INTERNAL_ERROR} ({_where(exc)}): {' '.join(str(exc).split())[:200]}", file=sys.stderr)
        return EXIT_BAD_INPUT


INTERNAL_ERROR = "internal error, please report it"


def _where(exc: BaseException) -> str:
    """The exception's type and the innermost project frame, so a report says where it broke."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "site-packages" not in f.filename]
    last = frames[-1] if frames else None
    return f"{type(exc).__name__}" + (f" at {last.filename.rsplit('/', 2)[-2:][-1]}:{last.lineno}" if last else "")


class UserFacingError(Exception):
    """Raised by command handlers for anything the user can fix."""


class _OneLineParser(argparse.ArgumentParser):
    """Bad options end like bad input: one line starting `error:`, exit 2 (argparse's own prints usage first)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"error: {' '.join(message.split())} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT)


def _parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(prog="python -m app.cli", description="Stepscope: where every token's time goes.")
    sub = parser.add_subparsers(dest="command", required=True)
    analyze = sub.add_parser("analyze", help="cut a trace into prefill, decode steps and idle gaps")
    analyze.add_argument("trace", help="Kineto JSON (.json, .json.gz), Perfetto .pftrace or nsys SQLite export")
    analyze.add_argument("--json", action="store_true", help="print the result as one JSON object")
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

    try:
        timeline, result = read_and_analyze(args)
        result = _with_roofline(args.trace, timeline, result)
    except (TraceError, ValueError) as exc:
        raise UserFacingError(str(exc)) from None
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


if __name__ == "__main__":
    sys.exit(main())
