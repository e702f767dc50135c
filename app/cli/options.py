"""What the analyze and export commands share: the analysis options and reading + analysing a trace."""

from __future__ import annotations

import argparse


def add_analysis_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gap-threshold-us", type=float, default=1.0, help="shortest idle interval reported")
    parser.add_argument("--step-regex", default=None, help="regex naming your own step annotations")


def read_and_analyze(args: argparse.Namespace) -> tuple:
    """(Timeline, Analysis) for args.trace with the command's options. Raises TraceError or ValueError."""
    from analysis import AnalysisOptions, analyze
    from parsers import load_trace

    timeline = load_trace(args.trace)
    options = AnalysisOptions(gap_threshold_ns=int(args.gap_threshold_us * 1000), step_regex=args.step_regex)
    return timeline, analyze(timeline, options)
