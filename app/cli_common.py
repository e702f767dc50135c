"""What the analyze and export commands share: the analysis options and reading + analysing a trace.

A module of its own because app.cli runs as __main__ under `python -m app.cli`: the
subcommand modules cannot import from it without loading it a second time.
"""

from __future__ import annotations

import argparse


def add_analysis_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gap-threshold-us", type=float, default=1.0, help="shortest idle interval reported")
    parser.add_argument("--step-regex", default=None, help="regex naming your own step annotations")


def read_and_analyze(args: argparse.Namespace) -> tuple:
    """(Timeline, Analysis) for args.trace with the command's options. Raises TraceError or ValueError."""
    from analysis import AnalysisOptions, analyze
    from trace_cache.timelines import load_trace_cached

    timeline = load_trace_cached(args.trace, use_cache=not getattr(args, "no_cache", False))
    options = AnalysisOptions(gap_threshold_ns=int(args.gap_threshold_us * 1000), step_regex=args.step_regex)
    return timeline, analyze(timeline, options)
