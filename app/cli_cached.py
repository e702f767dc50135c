"""The command line's cache: answer `analyze` from a cached result before anything heavy is imported.

Why a separate front door: building the full command parser imports the subcommands, and through
them pandas and numpy (about 0.3 s); a cached result needs none of that. This module parses the
analyze arguments with a small parser of its own and gives up (returns None) on anything it does not
know, so the full command line handles it. Imports the standard library and trace_cache only.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import sys
from collections.abc import Sequence


def analyze_options(gap_threshold_us: float, step_regex: str | None) -> dict:
    """The analysis options that key a cached result, as the analyze command turns its flags into them."""
    return {"gap_threshold_ns": int(gap_threshold_us * 1000), "step_regex": step_regex}


def cacheable_options(args: argparse.Namespace) -> dict | None:
    """The cache key's options for a full `analyze` run, or None when it used an option the key does not
    cover (--categories, --model: their results are never cached, so they are never served stale)."""
    if getattr(args, "no_cache", False) or getattr(args, "categories", None) or getattr(args, "model", None):
        return None
    return analyze_options(args.gap_threshold_us, args.step_regex)


def _fast_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(add_help=False, exit_on_error=False, allow_abbrev=False)
    parser.add_argument("trace")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--gap-threshold-us", type=float, default=1.0)
    parser.add_argument("--step-regex", default=None)
    parser.add_argument("--no-cache", action="store_true")
    return parser


def serve_cached_analyze(argv: Sequence[str]) -> int | None:
    """Print a cached `analyze` result and return 0, or return None to let the full command run."""
    argv = list(argv)
    if not argv or argv[0] != "analyze" or any(a in ("-h", "--help") for a in argv):
        return None
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # a usage error is the full parser's to report
            args, unknown = _fast_parser().parse_known_args(argv[1:])
    except (argparse.ArgumentError, SystemExit, ValueError):
        return None
    if unknown or args.no_cache or not os.path.isfile(args.trace):  # a folder or glob: the full command
        return None
    if not math.isfinite(args.gap_threshold_us):  # inf, nan: the full command's check words the error
        return None
    from ..trace_cache.results import cached_result

    try:
        result = cached_result(args.trace, analyze_options(args.gap_threshold_us, args.step_regex), known_only=True)
    except Exception:  # a miss, whatever went wrong: the full command runs and reports it properly
        return None
    if result is None:
        return None
    for note in result.notes:
        print(note, file=sys.stderr)
    if args.json:
        sys.stdout.write(result.text + "\n")
    else:
        from ..exporters.text_report import render_text

        sys.stdout.write(render_text(json.loads(result.text)))
    return 0


def remember_analyze(args: argparse.Namespace, report: dict, notes: list[str]) -> None:
    """Store what a full `analyze --json` prints (the same text as json.dump of `report`), for the next run on the
    same file and options, when every option the run used is part of the cache key."""
    options = cacheable_options(args)
    if options is None or not os.path.isfile(args.trace):
        return
    from ..trace_cache.results import store_result

    with contextlib.suppress(OSError, ValueError):
        store_result(args.trace, options, json.dumps(report, separators=(",", ":")), notes)
