"""The one exception type the collectors raise, so callers (CLI, Streamlit app) catch a single thing."""

from __future__ import annotations


class CollectorError(Exception):
    """A run could not be made; the message is one line meant for the user, never a traceback."""

    def __init__(self, message: str) -> None:
        one_line = " ".join(str(message).split())
        super().__init__(one_line)
        self.message = one_line

    def __str__(self) -> str:
        return self.message
