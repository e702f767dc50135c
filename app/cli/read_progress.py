"""How much of a big trace is read, and which stage of its analysis runs, shown on the terminal while it opens
(`analyze`).

Only where stderr is a terminal: a pipe or a file (scripts, tests, CI) sees nothing but the answer and, on failure,
the one `error:` line. The line is rewritten in place each whole percent, then at each stage with what each stage
before it took ("Cutting 1,234,567 events into steps… (read 8.1 s)"), and cleared before the answer is written.
"""

from __future__ import annotations

import sys
from typing import TextIO

from ..stage_timing import StageLog


class ReadProgress:
    """A read_fraction hook (analysis.front_door.ReadFraction) that writes `reading TRACE: 42%` to a terminal, and
    a Progress hook (`stage`) that writes the stage messages of app.stage_timing.StageLog."""

    def __init__(self, name: str, stream: TextIO) -> None:
        self.name, self.stream, self.shown = name, stream, -1
        self.log = StageLog()

    def stage(self, name: str) -> None:
        self.log(name)
        if name != "read":
            self.stream.write(f"\r\033[K{self.log.message()}")
            self.stream.flush()

    def done(self) -> None:
        """Clear the line: the answer follows on the same terminal."""
        self.stream.write("\r\033[K")
        self.stream.flush()

    def __call__(self, fraction: float) -> None:
        percent = max(0, min(100, int(fraction * 100)))
        if percent == self.shown:
            return
        self.shown = percent
        if percent >= 100:
            self.stream.write("\r\033[K")  # read: the line goes, the answer follows
        else:
            self.stream.write(f"\rreading {self.name}: {percent}%")
        self.stream.flush()


def read_progress_for(name: str, stream: TextIO | None = None) -> ReadProgress | None:
    """The hook for reading `name`, or None when the stream is not a terminal."""
    stream = stream or sys.stderr
    try:
        if not stream.isatty():
            return None
    except (AttributeError, ValueError):  # closed or not a real stream
        return None
    shown = "".join(c if c.isprintable() else "?" for c in name[:80])  # a file name may hold escape sequences
    return ReadProgress(shown, stream)
