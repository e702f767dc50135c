"""What the analyze and export commands share: the analysis options and reading + analysing a trace.

A module of its own because app.cli runs as __main__ under `python -m app.cli`: the
subcommand modules cannot import from it without loading it a second time.
"""

from __future__ import annotations

import argparse
import math

MAX_GAP_THRESHOLD_US = 1e9  # 1000 s: any longer "gap" threshold would hide everything


def add_analysis_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gap-threshold-us", type=float, default=1.0, help="shortest idle interval reported")
    parser.add_argument("--step-regex", default=None, help="regex naming your own step annotations")


def read_and_analyze(args: argparse.Namespace) -> tuple:
    """(Timeline, Analysis) for args.trace with the command's options. Raises TraceError or ValueError."""
    from analysis import AnalysisOptions, analyze
    from parsers import load_trace

    threshold = args.gap_threshold_us
    if not (math.isfinite(threshold) and 0 <= threshold <= MAX_GAP_THRESHOLD_US):
        raise ValueError(f"--gap-threshold-us must be a number of microseconds from 0 to 1e9, not {threshold}")
    if args.step_regex is not None and len(args.step_regex) > 500:
        raise ValueError("--step-regex is longer than 500 characters")
    timeline = load_trace(args.trace)
    options = AnalysisOptions(gap_threshold_ns=int(threshold * 1000), step_regex=args.step_regex)
    return timeline, analyze(timeline, options)
