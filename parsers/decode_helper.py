"""A helper process that forks the second decoding process for a process that runs other threads.

Why: a big JSON trace is decoded by two processes (parsers.split_decode). Forking the second from a process with
other threads (the Streamlit server runs each session in one, and keeps its own) copies only the calling thread,
with every lock as it was: one another thread held at that moment (in malloc, logging, an extension) stays held in
the child, which can then wait on it forever. So such a process asks this helper instead: a fresh interpreter,
started once, that has imported the decoder (numpy included, with no BLAS threads) and runs nothing else, a single
thread at every fork. Each request carries file descriptors (SCM_RIGHTS over a Unix socket): the trace (its file,
or a memfd copy of a buffer), the queue of piece numbers, and the write side of the PieceChannel; the helper forks
a child that decodes from them exactly as a forked child would (split_decode.decode_for_parent). Nothing comes
back through the socket: the child reports through the channel, so a helper that is gone only means the asking
process takes every piece itself, and the next request starts a new helper.

The app starts the helper when it starts (`start`), so that a first open does not wait for the helper's imports
(a few tenths of a second); a request sent before the helper is ready waits in the socket while the asking process
decodes. The helper leaves when the process that started it closes its end (it exits, say). This process's helper
is the one piece of state here, behind a lock: it belongs to the process, like its threads.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

from .file_pieces import FileSource

_MAX_REQUEST = 1 << 20  # a request's header: up to MAX_PIECES pairs of offsets
_FDS = 4  # the trace, the queue, the channel's record pipe and its shared file
_QUIET_BLAS = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}  # no threads at import


class _Helper:
    """A started helper: its process, this process's end of its socket, and which process started it."""

    def __init__(self, process: subprocess.Popen, sock: socket.socket) -> None:
        self.process, self.socket, self.owner = process, sock, os.getpid()

    def usable(self) -> bool:
        return self.owner == os.getpid() and self.process.poll() is None  # a forked copy of its owner does not own it

    def close(self) -> None:
        if self.owner != os.getpid():
            return
        self.socket.close()  # the helper leaves when it sees its socket closed
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


class _ThisProcess:
    """This process's helper, behind a lock: sessions' threads may start it or ask it at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.helper: _Helper | None = None

    def running(self) -> _Helper | None:
        """The helper, started if need be (the caller holds the lock); None when none can be started."""
        if self.helper is not None and not self.helper.usable():
            self.forget()
        if self.helper is None:
            self.helper = _start()
        return self.helper

    def forget(self) -> None:
        if self.helper is not None:
            self.helper.close()
            self.helper = None


_THIS_PROCESS = _ThisProcess()


def start() -> bool:
    """Start this process's helper unless it runs; whether one runs. Cheap when it does (the app calls it on every
    page run)."""
    with _THIS_PROCESS.lock:
        return _THIS_PROCESS.running() is not None


def stop() -> None:
    """Stop this process's helper (tests; a process leaving needs not: the helper sees it go)."""
    with _THIS_PROCESS.lock:
        _THIS_PROCESS.forget()


def submit(request: dict, fds: list[int]) -> bool:
    """Ask the helper to fork a child that decodes for this process (see split_decode.decode_for_parent); the
    descriptors are duplicated into the helper, so the caller closes its own as usual. False when no helper
    could take it: then nobody else takes pieces from the queue."""
    import msgspec

    blob = msgspec.msgpack.encode(request)
    with _THIS_PROCESS.lock:
        helper = _THIS_PROCESS.running()
        if helper is None:
            return False
        try:
            socket.send_fds(helper.socket, [blob], fds)
            return True
        except OSError:  # the helper is gone: the next request starts another
            _THIS_PROCESS.forget()
            return False


def trace_descriptor(data: bytes | bytearray | FileSource) -> tuple[int, bool]:
    """A descriptor the helper's child reads the trace from, and whether it is a copy for the caller to close once
    sent: the file's own, or for a buffer (an upload, a gunzipped file) a memfd holding a copy of its bytes. The
    copy is the one cost a forked child does not have (it shares the buffer): 0.4 s for 219 MB on this project's
    busy 2-core VM, against the child's half of a decode that takes seconds in one process."""
    if isinstance(data, FileSource):
        return data.fd, False
    try:
        fd = os.memfd_create("stepscope-trace", getattr(os, "MFD_CLOEXEC", 0))
    except (AttributeError, OSError):
        import tempfile

        fd, name = tempfile.mkstemp(prefix="stepscope-trace-")
        os.unlink(name)
    view = memoryview(data).cast("B")
    while view:
        view = view[os.write(fd, view[: 1 << 30]) :]
    return fd, True


def _start() -> _Helper | None:
    """A new helper, or None when it cannot be started."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    root = Path(sys.modules[__name__.split(".")[0]].__file__ or "").resolve().parents[1]  # the folder holding it
    code = f"import sys; sys.path.insert(0, {str(root)!r}); from {__name__} import serve; serve(int(sys.argv[1]))"
    try:
        process = subprocess.Popen(
            [sys.executable, "-P", "-c", code, str(theirs.fileno())],  # -P: nothing from the working folder
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            env={**os.environ, **_QUIET_BLAS},
        )
    except OSError:
        ours.close()
        return None
    finally:
        theirs.close()
    return _Helper(process, ours)


def serve(fd: int) -> None:
    """The helper's loop: a child per request, until the process that started it closes its end."""
    import signal

    import msgspec

    from . import chrome_trace, scanner, split_decode  # noqa: F401 - imported once here, not in every child

    scanner.build_later()  # the app starts the helper when it starts: the scanner's build, if it has none yet
    if scanner.built():
        scanner.load()  # loaded once here: every child has it

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the children
    sock = socket.socket(fileno=fd)
    while True:
        try:
            blob, fds, _, _ = socket.recv_fds(sock, _MAX_REQUEST, _FDS)
        except OSError:
            return
        if not blob:
            return  # the asking process is gone
        try:
            pid = os.fork() if len(fds) == _FDS else -1
        except OSError:
            pid = -1  # no child: the asking process takes every piece itself
        if pid == 0:
            code = 1
            try:
                sock.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                split_decode.decode_for_parent(msgspec.msgpack.decode(blob), fds)
                code = 0
            except BaseException:  # no finishing record: the asking process falls back
                pass
            finally:
                os._exit(code)
        for received in fds:
            os.close(received)
