"""The command line's one user-error type and its exit statuses."""

from __future__ import annotations

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130  # as shells report Ctrl-C


class UserError(Exception):
    """Anything the user can fix (a bad flag value, an unwritable output path): app.cli.main prints
    "error: <message>" on stderr and exits with EXIT_BAD_INPUT."""
