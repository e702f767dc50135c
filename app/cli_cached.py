"""The command line's warm path: answer `analyze` from the result cache before anything heavy is imported.

Why a path of its own: building the full command parser imports the subcommands, and through them pandas and
numpy (about 0.3 s); a cached answer needs none of that. It parses with analyze's own argument definitions
(app/cli/analyze.py), builds the same options object and key as the front door (analysis/result_key.py) and
asks the same cache; it gives up (returns None) on anything it cannot answer that way, so the full command runs:
a --categories file, a --model or --gpu (keyed there, after the imports), a folder, an unknown file, a usage error.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import sys
from collections.abc import Sequence


def serve_cached_analyze(argv: Sequence[str]) -> int | None:
    """Print a cached `analyze` answer and return 0, or return None to let the full command run."""
    argv = list(argv)
    if not argv or argv[0] != "analyze" or any(a in ("-h", "--help") for a in argv):
        return None
    from .cli.analyze import define_arguments

    parser = argparse.ArgumentParser(add_help=False, exit_on_error=False, allow_abbrev=False)
    define_arguments(parser)
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # a usage error is the full parser's to report
            args, unknown = parser.parse_known_args(argv[1:])
    except (argparse.ArgumentError, SystemExit, ValueError):
        return None
    if unknown or args.no_cache or args.categories or args.model or args.gpu or args.window is not None:
        return None
    if not os.path.isfile(args.trace):
        return None
    if not math.isfinite(args.gap_threshold_us):  # inf, nan: the full command's check words the error
        return None
    try:
        answer = _cached(args)
    except Exception:  # a miss, whatever went wrong: the full command runs and reports it properly
        return None
    if answer is None:
        return None
    for note in answer.notes:
        print(note, file=sys.stderr)
    from .cli.analyze import emit_answer

    return emit_answer(answer.text, args.json)


def _cached(args: argparse.Namespace):
    from stepscope.analysis.front_door import NOTHING_GIVEN, USE_CACHE, answer_key, cached_answer
    from stepscope.analysis.options import AnalysisOptions
    from stepscope.parsers.limits import ReadLimits

    options = AnalysisOptions.from_us(args.gap_threshold_us, step_regex=args.step_regex, batch=args.batch)
    key = answer_key(args.trace, options, NOTHING_GIVEN, ReadLimits.from_env())
    return None if key is None else cached_answer(args.trace, key, USE_CACHE, known_only=True)
