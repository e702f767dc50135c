"""Command line: `stepscope analyze|compare|report|export|roofline|run|sweep|batch|app ...`
(or `python -m app.cli ...`).

The entry point lives in app.cli.main; this file only re-exports it, so that `python -m app.cli` (which
imports this package before running __main__) loads no code twice.
"""

from .main import EXIT_BAD_INPUT, UserError, build_parser, main

__all__ = ["EXIT_BAD_INPUT", "UserError", "build_parser", "main"]
