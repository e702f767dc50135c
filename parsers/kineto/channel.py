"""The second decoding process's pieces, handed to this one as it goes (for two_processes.py).

The second process appends each decoded piece to an unnamed shared file (memfd; a temporary file where there is
none) right after decoding it: a msgpack header (string tables, counts) padded to 8 bytes, then its integer
columns, each padded to 8 bytes so that every one starts aligned whatever its type (the header says each column's
name, length and numpy type). A 24-byte record per piece (number, offset, header length) goes through a pipe, in
one atomic write, and a last record says it finished. This process maps the file once the other is done: the
columns are read-only views of it, not copies. So the other process's pieces cost this one nothing while it
decodes its own, and nothing is copied at the end.

The second process is a forked child, or a fresh interpreter that gets the pipe's write end and the shared file as
descriptors: `child_fds` here, `for_child` there. What a header holds is two_processes.py's business (its column
builder); this module moves bytes.
"""

from __future__ import annotations

import contextlib
import os
import select
import struct
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    import numpy as np

RECORD = struct.Struct("<QQQ")  # piece number, header offset, header length (MAX_PIECES of them fit a pipe)
_FINISHED = (1 << 64) - 1  # the piece number of the record that says every piece taken was written


class PieceChannel:
    """One decode's channel: created here, the write side handed to the second process."""

    def __init__(self) -> None:
        self.records_read, self.records_write = os.pipe()
        try:
            self.fd = os.memfd_create("stepscope-pieces", getattr(os, "MFD_CLOEXEC", 0))
            self._file = None
        except (AttributeError, OSError):
            import tempfile

            self._file = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
            self.fd = self._file.fileno()
        self._end = 0
        self._raw = bytearray()  # records read so far

    @classmethod
    def for_child(cls, records_write: int, fd: int) -> PieceChannel:
        """The write side in a process that got the two descriptors from the decode helper."""
        channel = cls.__new__(cls)
        channel.records_read, channel.records_write, channel.fd, channel._file = -1, records_write, fd, None
        channel._end, channel._raw = 0, bytearray()
        return channel

    def child_fds(self) -> list[int]:
        """The descriptors the second process writes to: the record pipe's write end, the shared file."""
        return [self.records_write, self.fd]

    def as_writer(self) -> None:
        os.close(self.records_read)
        self.records_read = -1

    def as_reader(self) -> None:
        os.close(self.records_write)
        self.records_write = -1

    def send(self, index: int, header: dict, columns) -> None:
        """Append one piece (its header and its integer columns, in order, each padded to 8 bytes) and write its
        record."""
        blob = msgspec.msgpack.encode(header)
        start = self._end
        self._write(blob + b"\0" * (-len(blob) % 8))  # padded: the columns after it start 8-byte aligned
        for array in columns:
            data = memoryview(array).cast("B")
            self._write(data)
            if len(data) % 8:
                self._write(b"\0" * (-len(data) % 8))
        os.write(self.records_write, RECORD.pack(index, start, len(blob)))

    def finish(self) -> None:
        """Say that every piece this process took has been sent."""
        os.write(self.records_write, RECORD.pack(_FINISHED, 0, 0))

    def _write(self, data) -> None:
        view = memoryview(data)
        while view:
            n = os.pwrite(self.fd, view, self._end)
            self._end += n
            view = view[n:]

    def sent_so_far(self) -> int:
        """How many pieces the other process has sent, reading only what the pipe already holds (for progress)."""
        while select.select([self.records_read], [], [], 0)[0]:
            chunk = os.read(self.records_read, 1 << 16)
            if not chunk:
                break
            self._raw += chunk
        return len(self._raw) // RECORD.size

    def records(self) -> tuple[list[tuple[int, int, int]], bool] | None:
        """Every record the other process wrote, once every write end is closed, and whether it finished; None
        when they are not whole records."""
        while chunk := os.read(self.records_read, 1 << 16):
            self._raw += chunk
        if len(self._raw) % RECORD.size:
            return None
        records = [RECORD.unpack_from(self._raw, i) for i in range(0, len(self._raw), RECORD.size)]
        finished = bool(records) and records[-1][0] == _FINISHED
        return (records[:-1] if finished else records), finished

    def received(self, records: list[tuple[int, int, int]]) -> dict[int, tuple[dict, dict[str, np.ndarray]]] | None:
        """Each piece's header and columns (read-only views of the mapped file), by piece number; None if garbled."""
        import mmap

        import numpy as np

        size = os.fstat(self.fd).st_size
        region = mmap.mmap(self.fd, size, access=mmap.ACCESS_READ) if size else b""
        out: dict[int, tuple[dict, dict[str, np.ndarray]]] = {}
        try:
            for index, offset, blob_length in records:
                header = msgspec.msgpack.decode(region[offset : offset + blob_length])
                columns, position = {}, offset + blob_length + (-blob_length % 8)
                for name, length, code in header.get("columns", ()):
                    dtype = _INTEGER_TYPES[code]
                    nbytes = dtype.itemsize * length
                    if position + nbytes > size:
                        return None
                    columns[name] = np.frombuffer(region, dtype=dtype, count=length, offset=position)
                    position += nbytes + (-nbytes % 8)
                out[index] = header, columns
        except (msgspec.DecodeError, AttributeError, KeyError, TypeError, ValueError):
            return None
        return out

    def close(self) -> None:
        for fd in (self.records_read, self.records_write):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.records_read = self.records_write = -1
        if self._file is not None:
            self._file.close()
        else:
            with contextlib.suppress(OSError):
                os.close(self.fd)  # a mapping made from it stays valid


class _IntegerTypes(dict):
    """numpy's little-endian integer types by their `dtype.str` (a piece's columns are one of these, nothing else)."""

    def __missing__(self, code):
        import numpy as np

        self.update({np.dtype(t).str: np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64)})
        if code not in self:
            raise KeyError(code)
        return self[code]


_INTEGER_TYPES = _IntegerTypes()
