"""`python -m app.cli scanner`: the compiled scanner of big JSON traces, compiled now (and repaired).

Without it, the first big JSON trace a machine reads compiles the scanner in the foreground (parsers/kineto/
compiled.py); `scanner` clears Numba's cache folder of the scanner and compiles it at once (about a minute of one
core, once per machine and source), so it also repairs a damaged cache or retries a compile that failed.

    python -m app.cli scanner
"""

from __future__ import annotations

import argparse

from .errors import UserError


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the subcommand on app.cli's subparsers."""
    p = subparsers.add_parser("scanner", help="compile the scanner of big JSON traces now (once per machine)")
    p.set_defaults(handler=run_scanner)
    return p


def run_scanner(args: argparse.Namespace) -> int:
    """Clear and compile; one line saying where. Raises UserError when it cannot be compiled here."""
    del args
    from ...parsers.kineto import compiled

    if not compiled.installed():
        raise UserError("the compiled scanner needs numba (pip install -r requirements.txt)")
    try:
        seconds = compiled.compile_now()
    except (RuntimeError, OSError) as exc:  # the compiler's own failure: one line; msgspec reads every trace meanwhile
        raise UserError(f"the compiled scanner could not be compiled: {' '.join(str(exc).split())[:200]}") from None
    print(f"compiled the scanner in {seconds:.1f} s into {compiled.folder()}: big JSON traces are read with it")
    return 0
