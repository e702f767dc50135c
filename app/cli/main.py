"""The command line's entry point: `stepscope ...` and `python -m app.cli ...`.

One subcommand per module (analyze, compare, report, export, roofline, run, profile-server, sweep, app; batch comes from
batch.cli); each registers its parser and a handler that returns the exit status. Anything the user can
fix ends here, in `main`, as exit status 2 and one line on stderr starting with "error:" (argparse's own
usage errors included); a traceback would be a bug.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from .errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, UserError

__all__ = ["EXIT_BAD_INPUT", "UserError", "build_parser", "main"]


EXIT_BROKEN_PIPE = 141  # as a shell reports a writer stopped by SIGPIPE
COLLECT_MODULES = ("torch", "transformers")  # the `collect` extra: run and sweep need them


class OneLineErrorParser(argparse.ArgumentParser):
    """argparse prints its usage and then the error; a script reading stderr wants the one line."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {' '.join(message.split())} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


def main(argv: Sequence[str] | None = None) -> int:
    from ..cli_cached import serve_cached_analyze

    try:
        served = serve_cached_analyze(sys.argv[1:] if argv is None else argv)  # a cached result: no heavy imports
    except BrokenPipeError:  # the reader of a cached answer left early, as below
        return _reader_left()
    if served is not None:
        return served
    args = build_parser().parse_args(argv)
    from stepscope.parsers import TraceError

    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `stepscope analyze T --json | head`: the reader left early; no traceback for that
        return _reader_left()
    except MemoryError:
        print("error: out of memory while reading the trace", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ModuleNotFoundError as exc:
        if exc.name not in COLLECT_MODULES:
            raise
        print(f"error: `{args.command}` needs {exc.name}: pip install 'stepscope[collect]'", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (UserError, TraceError, ValueError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:  # a bug, never expected: still one line (the fuzz test fails on this text)
        print(f"error: {INTERNAL_ERROR} ({_where(exc)}): {' '.join(str(exc).split())[:200]}", file=sys.stderr)
        return EXIT_BAD_INPUT


def _reader_left() -> int:
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python flushes stdout again at exit
    return EXIT_BROKEN_PIPE


INTERNAL_ERROR = "internal error, please report it"
ONE_SHOT_COMMANDS = ("analyze", "compare", "report", "export", "roofline")


def run() -> NoReturn:
    """The process entry point (`stepscope`, `python -m app.cli`): main(), then, for the one-shot commands, leave
    without tearing down.

    Why: after a big trace the interpreter would spend a tenth of a second or more freeing a million-row frame
    and every object one by one at exit, work the operating system does at once. Output is flushed first; the
    one-shot commands register no exit handlers that matter (cache entries are written before main() returns).
    The other commands (run, sweep, batch, app) exit normally: Ray, for one, stops its cluster at exit."""
    # numpy's OpenBLAS starts a thread per core that busy-waits about a tenth of a second after the import,
    # taking a core from the trace's decoding; with a short timeout idle threads sleep at once (BLAS calls,
    # e.g. the CPU roofline calibration's matmul, still use every core).
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
    one_shot = bool(sys.argv[1:2]) and sys.argv[1] in ONE_SHOT_COMMANDS
    if one_shot:
        # One or two traces, then exit: the cycle collector's passes over a million-row analysis (and over
        # pandas' import) find almost nothing and cost about 5% of the run; memory is returned at exit anyway.
        gc.disable()
    code = main()
    if not one_shot:  # run, sweep, batch (Ray's exit handlers stop its local cluster), app: a normal exit
        sys.exit(code)
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # the reader left before the last bytes: as a shell reports SIGPIPE
        code = code or EXIT_BROKEN_PIPE
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    os._exit(code)


def _where(exc: BaseException) -> str:
    """The exception's type and the innermost project frame, so a report says where it broke."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "site-packages" not in f.filename]
    last = frames[-1] if frames else None
    return f"{type(exc).__name__}" + (f" at {Path(last.filename).name}:{last.lineno}" if last else "")


def _prog() -> str:
    """`stepscope` when run as the installed command, `python -m app.cli` otherwise."""
    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    return "stepscope" if name.startswith("stepscope") else "python -m app.cli"


def build_parser() -> argparse.ArgumentParser:
    from stepscope.batch.cli import add_batch_parser
    from . import analyze, compare, export, profile_server, report, roofline, run, sweep, webapp

    parser = OneLineErrorParser(prog=_prog(), description="Stepscope: where every token's time goes.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineErrorParser)
    analyze.add_parser(sub)
    compare.add_parser(sub)
    report.add_parser(sub)
    export.add_parser(sub)
    roofline.add_parser(sub)
    run.add_parser(sub)
    profile_server.add_parser(sub)
    sweep.add_parser(sub)
    add_batch_parser(sub)
    webapp.add_parser(sub)
    return parser
