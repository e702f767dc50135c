"""A big Chrome-trace JSON decoded in pieces (parsers/kineto/pieces.py) by this process and a second one.

Why: decoding and column building are most of a big trace's load time and run on one core. This process and
another take piece numbers from a shared queue (a pipe holding them all), so the work balances itself even while
this process spends time on other things (importing pandas for the frame, hashing the file). Each process reads
the pieces it takes straight from the file (parsers/kineto/file_pieces.py) and keeps only one piece of structs
alive at a time; the other sends each piece's columns back as it goes (parsers/kineto/channel.py: a shared file of
raw numpy buffers behind a msgpack header, no pickle), and this one maps them at the end.

The other process is a plain fork (multiprocessing's "fork" start) where this process runs no other thread: the
cheapest start, sharing the buffer of a trace already in memory. Otherwise it is a fresh interpreter started for
this read (`python -c`): a fork made while other threads run (a server's sessions) copies the locks they hold, and
the child could wait on one forever. Either way the other process ends with the read: nothing is left running.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from stepscope.contracts import settings
from stepscope.contracts.safe_read import open_regular
from . import pieces as piece_reading  # module attributes: what tests lower (MIN_SPLIT_BYTES) and replace
from .channel import PieceChannel
from .file_pieces import FileChangedError, FileSource
from .pieces import (
    HEAD_BYTES,
    TAIL_DECODER,
    DecodeStoppedError,
    Meanwhile,
    Piece,
    Progress,
    SplitNotPossibleError,
    array_start,
    joined,
    plan,
    prove,
)

if TYPE_CHECKING:
    import numpy as np

    from .columns import ColumnBuilder
    from .fields import TraceDoc

_QUIET_BLAS = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}  # no threads at import


def split_workers() -> int:
    """Processes to decode with: STEPSCOPE_PARSE_WORKERS (1: no second process), else 2 when there are 2+ CPUs."""
    return settings.positive_int("STEPSCOPE_PARSE_WORKERS", 2 if (os.cpu_count() or 1) >= 2 else 1)


def _queue(fd: int):
    """Piece numbers from the queue pipe until it is empty. Every number was written before the other process
    started, in one write, and a read of 4 bytes from a pipe holding them returns one number to one reader."""
    while True:
        raw = os.read(fd, 4)
        if len(raw) < 4:
            return
        yield struct.unpack("<I", raw)[0]


def decode_in_two(
    box: list[bytes | bytearray],
    max_events: int = 1 << 62,
    meanwhile: Meanwhile | None = None,
    progress: Progress | None = None,
) -> tuple[TraceDoc, ColumnBuilder, int]:
    """(the document's other fields, a column builder holding every event, the event count).

    `box` holds the file's bytes, and should hold the only reference: once every event is decoded
    the box is emptied, so the bytes are freed before the frame is built. Raises
    SplitNotPossibleError (the box still full) when the file is small or its layout cannot be proved,
    DecodeStoppedError when `meanwhile` returns True.
    """
    data = box[0]
    head, ordered = _decode_pieces(data, bytes(data[:HEAD_BYTES]), max_events, meanwhile, progress)
    del data
    result = joined(head, ordered, max_events)
    box.clear()  # every event is decoded: the file's bytes can go before the frame is built
    return result


def decode_file_in_two(
    path: str | os.PathLike,
    max_events: int = 1 << 62,
    meanwhile: Meanwhile | None = None,
    progress: Progress | None = None,
) -> tuple[TraceDoc, ColumnBuilder, int]:
    """decode_in_two for a file on disk, read piece by piece by the processes that decode them (no whole-file
    buffer). Raises SplitNotPossibleError when the file is small, not a plain JSON object, changes size while
    it is read, or cannot be read or split; the caller then reads it whole (and gets the precise error)."""
    try:
        fd = open_regular(path)  # a regular file only (a FIFO swapped in after the stat would block)
    except OSError:
        raise SplitNotPossibleError("cannot open the file") from None
    try:
        source = FileSource(fd, os.fstat(fd).st_size)
        head, ordered = _decode_pieces(source, source.head(HEAD_BYTES), max_events, meanwhile, progress)
        source.check_unchanged_size()
    except (OSError, FileChangedError) as exc:
        raise SplitNotPossibleError(f"the file could not be read in pieces: {exc}") from None
    finally:
        os.close(fd)
    return joined(head, ordered, max_events)


def _decode_pieces(
    data, head_bytes: bytes, max_events: int, meanwhile: Meanwhile | None, progress: Progress | None
) -> tuple[TraceDoc, list[Piece]]:
    """The document's keys before the events and the decoded pieces in file order (see pieces.py).
    `data`: the bytes or the FileSource; `head_bytes`: its first HEAD_BYTES."""
    if len(data) < piece_reading.MIN_SPLIT_BYTES:
        raise SplitNotPossibleError("not worth splitting")
    if not head_bytes[:64].lstrip().startswith(b"{"):
        raise SplitNotPossibleError("not a JSON object")
    first, head = array_start(head_bytes)
    pieces = plan(data, first)
    if progress is not None:  # the read in pieces has begun: the app's bar shows at once (and stills the page)
        progress(0.0)
    if split_workers() < 2 or len(pieces) < 2:
        own = None if progress is None else (lambda count: progress(count / len(pieces)))
        done = piece_reading.take_pieces(data, pieces, range(len(pieces)), max_events, progress=own)
    else:
        done = _decode_with_other(data, pieces, max_events, meanwhile, progress)
    return head, prove(data, pieces, done)


class _Other:
    """The other decoding process: a forked multiprocessing.Process or a fresh interpreter (subprocess.Popen)."""

    def __init__(self, process) -> None:
        self.process = process

    def wait(self) -> None:
        if isinstance(self.process, subprocess.Popen):
            self.process.wait()
        else:
            self.process.join()

    def stop(self) -> None:
        """End it now (its pieces are not needed, or this read failed)."""
        self.process.kill()
        self.wait()


def _decode_with_other(
    data, pieces: list, max_events: int, meanwhile: Meanwhile | None, progress: Progress | None
) -> dict[int, Piece | None]:
    """Both processes take pieces from the queue; the other's come back through a PieceChannel."""
    queue_read, queue_write = os.pipe()
    os.write(queue_write, b"".join(struct.pack("<I", i) for i in range(len(pieces))))
    os.close(queue_write)
    channel, other = PieceChannel(), None
    try:
        # The other process does not stop at the limit: this one counts its own pieces as they come (and stops both
        # once they alone are over it), and the join counts them all, so the refusal is always this process's words.
        other = _start_other(data, pieces, queue_read, channel)  # None: none could start, this one takes all
        channel.as_reader()
        if meanwhile is not None and meanwhile():
            raise DecodeStoppedError
        if "pandas" not in sys.modules:  # the frame needs it: imported while the other process decodes
            import pandas  # noqa: F401

        def own(count: int) -> None:  # this process's pieces and those the other has sent so far
            progress(min(1.0, (count + channel.sent_so_far()) / len(pieces)))

        own_progress = own if progress else None
        done = piece_reading.take_pieces(data, pieces, _queue(queue_read), max_events, progress=own_progress)
        if other is not None and len(done) < len(pieces):  # the other process took some: wait for them
            done.update(_received(channel))
            other.wait()
        elif other is not None:
            other.stop()  # it took none (still starting, say): not needed
        other = None
    except BaseException:
        if other is not None:
            other.stop()
        raise
    finally:
        channel.close()
        os.close(queue_read)
    return done


def _start_other(data, pieces: list, queue_read: int, channel: PieceChannel) -> _Other | None:
    """The other process, started (see the module); None when none can be started."""
    if threading.active_count() == 1:
        import multiprocessing

        process = multiprocessing.get_context("fork").Process(
            target=_share_forked, args=(data, pieces, queue_read, channel), name="stepscope-decode"
        )
        try:
            process.start()
        except OSError:
            return None
        return _Other(process)
    source, ours = _trace_descriptor(data)
    fds = [source, queue_read, *channel.child_fds()]
    root = Path(sys.modules[__name__.split(".")[0]].__file__ or "").resolve().parents[1]  # the folder holding it
    code = f"import sys; sys.path.insert(0, {str(root)!r}); from {__name__} import share_spawned; share_spawned()"
    request = msgspec.msgpack.encode({"size": len(data), "pieces": pieces, "fds": fds})
    process = None
    try:
        process = subprocess.Popen(
            [sys.executable, "-P", "-c", code],  # -P: nothing from the working folder
            pass_fds=fds,
            stdin=subprocess.PIPE,
            env={**os.environ, **_QUIET_BLAS},
        )
        process.stdin.write(request)
        process.stdin.close()
    except OSError:
        if process is not None:
            _Other(process).stop()
        return None
    finally:
        if ours:
            os.close(source)
    return _Other(process)


def _share_forked(data, pieces: list, queue_read: int, channel: PieceChannel) -> None:
    """The forked process's share: decode pieces from the queue and send each as it is done. Any failure ends it
    without a finishing record (the parent then falls back), quietly: nothing of it reaches the terminal."""
    try:
        channel.as_writer()
        piece_reading.take_pieces(data, pieces, _queue(queue_read), 1 << 62, publish=_sender(channel))
        channel.finish()
    except BaseException:
        pass


def share_spawned() -> None:
    """The fresh interpreter's share (see _start_other): the trace (its file, or a copy of the parent's buffer),
    the queue and the channel come as descriptors, the pieces on stdin."""
    try:
        request = msgspec.msgpack.decode(sys.stdin.buffer.read())
        source, queue_read, records_write, results = request["fds"]
        channel = PieceChannel.for_child(records_write, results)
        pieces = [(start, stop) for start, stop in request["pieces"]]
        data = FileSource(source, request["size"])
        piece_reading.take_pieces(data, pieces, _queue(queue_read), 1 << 62, publish=_sender(channel))
        channel.finish()
    except BaseException:
        pass


def _trace_descriptor(data: bytes | bytearray | FileSource) -> tuple[int, bool]:
    """A descriptor the fresh interpreter reads the trace from, and whether it is a copy for the caller to close:
    the file's own, or for a buffer (an upload, a gunzipped file) a memfd holding a copy of its bytes. The copy is
    the one cost a forked child does not have (it shares the buffer): 0.4 s for 219 MB on this project's busy
    2-core VM, against the child's half of a decode that takes seconds in one process."""
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


def _sender(channel: PieceChannel) -> Callable[[int, Piece | None], None]:
    def send(index: int, piece: Piece | None) -> None:
        if piece is None:
            channel.send(index, {"index": index, "parsed": False}, ())
        else:
            header, columns = _piece_header(index, piece)
            channel.send(index, header, columns.values())

    return send


def _received(channel: PieceChannel) -> dict[int, Piece | None]:
    """The other process's pieces once it is done. Raises SplitNotPossibleError when it did not finish (it died,
    or failed on a piece) or what it wrote is garbled."""
    got = channel.records()
    received = channel.received(got[0]) if got is not None and got[1] else None
    if received is None:
        raise SplitNotPossibleError("the other process could not decode its pieces")
    return {i: _rebuilt(header, columns) if header["parsed"] else None for i, (header, columns) in received.items()}


# --- a piece's columns as the other process sends them (channel.py) -------------------------------------------

# What a piece's header carries besides its columns and tables: the builder's labels and counts, by attribute.
_LABELS = ("string_ids", "process_names", "thread_names", "sort_order")
_COUNTS = ("duration_events", "invalid_utf8", "wide_ids")
_COUNTERS = ("unknown_categories", "skipped")


def _piece_header(index: int, piece: Piece) -> tuple[dict, dict[str, np.ndarray]]:
    import numpy as np

    b = piece.builder
    parts = b.parts.items()
    columns = {c: np.ascontiguousarray(v[0] if len(v) == 1 else np.concatenate(v[::-1])) for c, v in parts if v}
    header = {
        "index": index,
        "parsed": True,
        "count": piece.count,
        "tail": msgspec.json.encode(piece.tail) if piece.tail is not None else None,
        "columns": [[c, len(a), a.dtype.str] for c, a in columns.items()],
        "tables": {table: list(getattr(b, table)) for table in b.CODE_TABLES.values()},
        "labels": {name: [[*_tuple(k), v] for k, v in getattr(b, name).items()] for name in _LABELS},
        "counts": {name: getattr(b, name) for name in _COUNTS},
        "counters": {name: dict(getattr(b, name)) for name in _COUNTERS},
    }
    return header, columns


def _tuple(key) -> tuple:
    return key if isinstance(key, tuple) else (key,)


def _rebuilt(header: dict, columns: dict[str, np.ndarray]) -> Piece:
    from .columns import ColumnBuilder

    b = ColumnBuilder()
    for col, array in columns.items():
        b.parts[col].append(array)
    for table, strings in header["tables"].items():
        setattr(b, table, {s: i for i, s in enumerate(strings)})
    for name, rows in header["labels"].items():
        setattr(b, name, {(tuple(row[:-1]) if len(row) > 2 else row[0]): row[-1] for row in rows})
    for name, value in header["counts"].items():
        setattr(b, name, value)
    for name, counts in header["counters"].items():
        getattr(b, name).update(counts)
    tail = TAIL_DECODER.decode(header["tail"]) if header["tail"] is not None else None
    return Piece(b, header["count"], tail)
