"""`python -m app.cli scanner`: the compiled scanner of big JSON traces, built now.

Without it, the first big JSON trace a machine reads is decoded with msgspec and the scanner is then built in the
background for the reads after it (parsers/scanner.py); `scanner` builds it at once, in the foreground (about ten
seconds of one core, once per machine and source), and says what it found.

    python -m app.cli scanner
"""

from __future__ import annotations

import argparse
import time

from .errors import UserError


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the subcommand on app.cli's subparsers."""
    p = subparsers.add_parser("scanner", help="build the compiled scanner of big JSON traces now (once per machine)")
    p.set_defaults(handler=run_scanner)
    return p


def run_scanner(args: argparse.Namespace) -> int:
    """Build unless built; one line saying which. Raises UserError when it cannot be built here."""
    del args
    from ...parsers import scanner

    if scanner.built() and scanner.load() is not None:
        print("the compiled scanner is built: big JSON traces are read with it")
        return 0
    if not scanner.installed():
        raise UserError("the compiled scanner needs numba and llvmlite (pip install -r requirements.txt)")
    start = time.perf_counter()
    try:
        scanner.build()
    except Exception as exc:  # the compiler's own failure: one line, and msgspec reads every trace meanwhile
        raise UserError(f"the compiled scanner could not be built: {' '.join(str(exc).split())[:200]}") from None
    print(f"built the compiled scanner in {time.perf_counter() - start:.1f} s: big JSON traces are read with it")
    return 0
