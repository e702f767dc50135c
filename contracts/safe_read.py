"""Open and read a file named by a user or found in a folder, only when it is a regular file, within a size bound.

Why: a name can point at something that is not a file. A FIFO blocks `open()` until a writer comes (forever,
for a `run.json` that is a pipe), `/dev/zero` or `/dev/urandom` never end, and a check by path before opening
(`Path.is_file()`) can be raced by a rename. So the descriptor itself is checked: it is opened with O_NONBLOCK
(a FIFO then opens at once instead of blocking), fstat says what it is, anything but a regular file is refused,
and the read stops one byte past the bound (a file that grows while it is read is refused too). Every reader
of a file by name uses this module: run.json sidecars, categories files, model configs, sweep records, rank
members and trace files, log-directory entries and cache entries.

Standard library only (contracts/ imports nothing else of Stepscope's, and everyone may import contracts/).
Both refusals are OSErrors, with a `strerror` that words them, so callers' existing OSError handling applies.
"""

from __future__ import annotations

import errno
import os
import stat

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
_READ_CHUNK = 1 << 20


class NotRegularFileError(OSError):
    """The name is a folder, a pipe, a device or a socket, not a regular file."""


class FileTooLargeError(OSError):
    """The file is larger than the reader's bound (or grew past it while it was read)."""


def kind_of(mode: int) -> str:
    """What a stat mode is, in words ("a FIFO (named pipe)", ...)."""
    return next((words for test, words in _KINDS if test(mode)), "not a regular file")


def open_regular(path: str | os.PathLike) -> int:
    """A read-only descriptor (blocking again, close-on-exec) of `path` when it is a regular file (symlinks
    followed); NotRegularFileError otherwise, and the OSError of open() when it cannot be opened."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFileError(errno.EINVAL, f"not a regular file: {kind_of(mode)}", os.fspath(path))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)  # no effect on a regular file's reads; leaves nothing unusual for the caller
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: str | os.PathLike, max_bytes: int) -> bytes:
    """The whole content of a regular file of at most `max_bytes`; NotRegularFileError, FileTooLargeError or the
    OSError of opening or reading it otherwise."""
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        if size > max_bytes:
            raise FileTooLargeError(errno.EFBIG, _too_large(size, max_bytes), os.fspath(path))
        chunks, got = [], 0
        while got <= max_bytes:  # st_size may be 0 for files whose size is not known ahead (/proc)
            chunk = os.read(fd, min(_READ_CHUNK, max_bytes + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        if got > max_bytes:
            raise FileTooLargeError(errno.EFBIG, _too_large(got, max_bytes), os.fspath(path))
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_regular_text(path: str | os.PathLike, max_bytes: int) -> str:
    """read_regular decoded as UTF-8 (UnicodeDecodeError, a ValueError, when it is not)."""
    return read_regular(path, max_bytes).decode("utf-8")


def _too_large(size: int, max_bytes: int) -> str:
    return f"larger than the {_amount(max_bytes)} this file may hold ({_amount(size)} or more)"


def _amount(n: int) -> str:
    if n >= 1 << 20:
        return f"{n / (1 << 20):.0f} MB"
    return f"{n / 1024:.0f} kB" if n >= 1024 else f"{n} bytes"
