"""`python -m app.cli export TRACE --perfetto OUT.pftrace`: analyse a trace and write it for ui.perfetto.dev."""

from __future__ import annotations

import argparse

from stepscope.parsers.trace_processor import trace_processor_status
from .errors import UserError
from .options import add_analysis_options


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
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
    """Load, analyse, write; print where it went and what it holds. Raises TraceError/ValueError/UserError."""
    from stepscope.exporters.perfetto_trace import write_perfetto
    from .compare import open_for_command

    opened = open_for_command(args.trace, args)
    try:
        written = write_perfetto(opened.timeline, opened.analysis, args.perfetto)
    except OSError as exc:
        raise UserError(f"cannot write {args.perfetto}: {exc.strerror or exc}") from None
    print(
        f"wrote {written.path} ({written.bytes_written / 2**20:.1f} MB): {written.slices} slices on "
        f"{written.tracks} tracks, {written.steps} steps, {written.gaps} gaps; open it in https://ui.perfetto.dev"
    )
    return 0
