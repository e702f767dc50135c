"""`python -m app.cli export TRACE --perfetto OUT.pftrace`: analyse a trace and write it for ui.perfetto.dev.

Kept apart from app/cli.py so the export wiring is two lines there. The handler
reports its own failures (status 2, one "error:" line) instead of raising
app.cli's exception class: under `python -m app.cli` that module is __main__,
and a second import of it would have a different class.
"""

from __future__ import annotations

import argparse
import sys

from app.cli_common import add_analysis_options, read_and_analyze
from parsers.perfetto_reader import trace_processor_status

EXIT_BAD_INPUT = 2


def add_export_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the `export` subcommand on app.cli's subparsers."""
    export = subparsers.add_parser(
        "export",
        help="write a trace with its steps, gaps and per-step counters as a Perfetto trace",
        description="Analyse TRACE and write a Perfetto protobuf trace that opens in ui.perfetto.dev. "
        + trace_processor_status()
        + ".",
    )
    export.add_argument("trace", help="any trace Stepscope reads (Kineto JSON, Perfetto, nsys SQLite)")
    export.add_argument("--perfetto", required=True, metavar="OUT.pftrace", help="where to write the Perfetto trace")
    add_analysis_options(export)
    export.set_defaults(handler=run_export)
    return export


def run_export(args: argparse.Namespace) -> int:
    """Load, analyse, write; print where it went and what it holds."""
    from exporters import write_perfetto
    from parsers import TraceError

    try:
        timeline, result = read_and_analyze(args)
        written = write_perfetto(timeline, result, args.perfetto)
    except (TraceError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:
        print(f"error: cannot write {args.perfetto}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(
        f"wrote {written.path} ({written.bytes_written / 2**20:.1f} MB): {written.slices} slices on "
        f"{written.tracks} tracks, {written.steps} steps, {written.gaps} gaps; open it in https://ui.perfetto.dev"
    )
    return 0
