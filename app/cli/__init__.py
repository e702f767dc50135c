"""Command line: `python -m app.cli analyze|roofline|export|sweep|batch ...`.

One subcommand per module (analyze, roofline, export, sweep; batch lives in batch/cli.py); each registers its
parser and a handler that returns the exit status. Anything the user can fix ends here, in `main`, as exit status 2
and one line on stderr starting with "error:"; a traceback would be a bug.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from app.cli.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, UserError

__all__ = ["EXIT_BAD_INPUT", "UserError", "build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from parsers import TraceError

    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except MemoryError:
        print("error: out of memory while reading the trace", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (UserError, TraceError, ValueError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_BAD_INPUT


def build_parser() -> argparse.ArgumentParser:
    from app.cli import analyze, export, roofline, sweep
    from batch.cli import add_batch_parser

    parser = argparse.ArgumentParser(prog="python -m app.cli", description="Stepscope: where every token's time goes.")
    sub = parser.add_subparsers(dest="command", required=True)
    analyze.add_parser(sub)
    roofline.add_parser(sub)
    export.add_parser(sub)
    sweep.add_parser(sub)
    add_batch_parser(sub)
    return parser
