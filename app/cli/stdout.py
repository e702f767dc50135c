"""A command's answer written to standard output whole, or a BrokenPipeError when the reader has left.

Why: under PYTHONUNBUFFERED (containers and CI set it) sys.stdout's text layer writes straight to the raw file,
and one raw write to a pipe may take only part of a big answer: 64 KB when the reader leaves while it is written
(`analyze --json | head -c 1`), or a part cut short by a signal. The text layer then drops the rest without an
error, so the command would end with status 0 and part of its answer. Here the bytes go out in a loop until all
are taken, and a reader that left is a BrokenPipeError (main() turns it into status 141, as a shell reports a
SIGPIPE)."""

from __future__ import annotations

import select
import sys


def write_text(text: str) -> None:
    out = getattr(sys.stdout, "buffer", None)
    if out is None:  # a text-only stream (a test's StringIO): it takes all of it
        sys.stdout.write(text)
        return
    sys.stdout.flush()  # anything the text layer holds goes first
    view = memoryview(text.encode(sys.stdout.encoding or "utf-8", sys.stdout.errors or "strict"))
    while view:
        taken = out.write(view)
        if taken is None:  # a non-blocking stdout that is full: wait until it takes more
            select.select([], [out.fileno()], [])
            continue
        view = view[taken:]
    out.flush()
