"""A big plain JSON trace read piece by piece straight from its file, for two_processes.py.

Why not read the whole file first: copying 100+ MB into a fresh buffer costs about twice the copy itself
(every page of new memory is faulted in and zeroed), it happens before the second process can start, and
the buffer doubles the memory. Here each process reads only the pieces it decodes (pread: no shared file
offset), into one buffer of its own that it reuses, so the reading is shared by both processes and runs
while the other one decodes. Where the pieces are cut is still proved by parsing (see pieces.py).
"""

from __future__ import annotations

import os
import re

_WINDOW = 1 << 16  # bytes read at a time when looking for a cut (doubling up to _MAX_WINDOW)
_MAX_WINDOW = 4 << 20
_OVERLAP = 256  # a cut's '}' ',' '{' spanning two windows is found in the next one


class FileChangedError(Exception):
    """The file is shorter or longer than when it was opened: the pieces would not be one file's."""


class FileSource:
    """One open file of a known size; `framed` returns a piece between the bytes a decode needs around it."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd, self.size = fd, size
        self._buffer = bytearray()

    def __len__(self) -> int:
        return self.size

    def head(self, n: int) -> bytes:
        return os.pread(self.fd, min(n, self.size), 0)

    def next_cut(self, pattern: re.Pattern[bytes], start: int) -> int | None:
        """The offset of the ',' of the first match of `pattern` ('}' ',' '{') at or after `start`, or None."""
        window = _WINDOW
        while start < self.size:
            chunk = os.pread(self.fd, min(window, self.size - start), start)
            match = pattern.search(chunk)
            if match is not None:
                return start + chunk.index(b",", match.start())
            if start + len(chunk) >= self.size or not chunk:
                return None
            start += max(len(chunk) - _OVERLAP, 1)
            window = min(window * 2, _MAX_WINDOW)
        return None

    def framed(self, start: int, stop: int, before: bytes, after: bytes) -> memoryview:
        """before + the file's bytes [start, stop) + after, in this process's reused buffer.

        The view is only good until the next call; a decode's results (msgspec Raw values included) must be
        consumed before it. A new buffer is made rather than the old one resized, since a Raw value still
        alive elsewhere would pin it."""
        length = len(before) + (stop - start) + len(after)
        if len(self._buffer) < length:
            self._buffer = bytearray(max(length, len(self._buffer) * 5 // 4))
        view = memoryview(self._buffer)[:length]
        view[: len(before)] = before
        got, body = 0, view[len(before) : length - len(after)]
        while got < len(body):
            n = os.preadv(self.fd, [body[got:]], start + got)
            if n <= 0:
                raise FileChangedError("the file became shorter while it was read")
            got += n
        view[length - len(after) :] = after
        return view

    def check_unchanged_size(self) -> None:
        """Raise FileChangedError if the file has bytes beyond the size it had when opened."""
        if os.pread(self.fd, 1, self.size):
            raise FileChangedError("the file grew while it was read")
