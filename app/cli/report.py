"""`report TRACE [--vs OTHER] -o report.html`: one self-contained HTML file to share (see exporters.report_html)."""

from __future__ import annotations

import argparse

from .errors import UserError
from .options import add_analysis_options


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    report = subparsers.add_parser(
        "report",
        help="write one self-contained HTML report (opens offline, no Python needed to read it)",
        description="Analyse TRACE (and OTHER with --vs: TRACE is the baseline A) and write one HTML file with the "
        "summary cards, the step overview, per-step charts, gaps by cause, findings and the comparison. plotly.js "
        "is inside: the file opens offline and loads nothing from the network. At most 8 MB.",
    )
    report.add_argument("trace", help="any trace Stepscope reads (Kineto JSON, Perfetto, nsys SQLite)")
    report.add_argument("--vs", metavar="OTHER", default=None, help="a second trace to compare against TRACE")
    report.add_argument("-o", "--output", required=True, metavar="REPORT.html", help="where to write the report")
    add_analysis_options(report)
    report.set_defaults(handler=run_report)
    return report


def run_report(args: argparse.Namespace) -> int:
    """Load, analyse, build, write atomically. Raises TraceError/ValueError/UserError."""
    from stepscope.exporters.report_html import build_report, report_trace, write_report
    from .compare import open_for_command

    traces = [report_trace(open_for_command(path, args)) for path in [args.trace] + ([args.vs] if args.vs else [])]
    html = build_report(*traces)
    try:
        written = write_report(html, args.output)
    except OSError as exc:
        raise UserError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    print(f"wrote {args.output} ({written / 1e6:.1f} MB); it opens offline in any browser")
    return 0
