"""A frame's columns written in place into an Arrow IPC file: its layout first, its values after, through a mapping.

Why: the frame of a big trace used to be built in memory and then copied into the cache's Arrow file; on a trace
of millions of events those are two passes over hundreds of MB of fresh memory, and a trace bigger than the memory
budget cannot be held at all. Here pyarrow writes the IPC file (schema, dictionaries, the record batch's metadata,
the footer) from placeholder arrays of the right types and lengths whose values it is never asked to write: the
file has holes where the values go. The blocks are then reserved (posix_fallocate: a full disk fails here, never
later as a fault on the mapping), the file is mapped writable, and the caller writes each column straight into its
place. Read back (memory-mapped, validated) it is an ordinary IPC file: trace_cache maps it as any entry.

The placeholders are slices of one anonymous mapping that is never written: pyarrow hands the writer every data
buffer as a pyarrow Buffer, and those whose address lies inside the placeholder are skipped (a seek) instead of
copied. Their positions, in the record batch's buffer order, are where the columns go.
"""

from __future__ import annotations

import contextlib
import io
import mmap
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa


@dataclass(frozen=True)
class ColumnSpec:
    """One frame column: int64 values, or the codes (int8/16/32) of a categorical with these categories."""

    name: str
    dtype: np.dtype
    categories: list[str] | None = None


class _HoleWriter(io.RawIOBase):
    """A file for pyarrow's IPC writer that leaves a hole wherever it is given placeholder bytes."""

    def __init__(self, fd: int, start: int, placeholder: tuple[int, int]) -> None:
        self.fd, self.position, self.placeholder = fd, start, placeholder
        self.holes: list[tuple[int, int]] = []  # (offset, length) of each skipped buffer, in order

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def write(self, data) -> int:
        import pyarrow as pa

        size = data.size if isinstance(data, pa.Buffer) else len(memoryview(data).cast("B"))
        lo, hi = self.placeholder
        if isinstance(data, pa.Buffer) and size and lo <= data.address < hi:
            self.holes.append((self.position, size))
        else:
            view = memoryview(data).cast("B")
            done = 0
            while done < size:
                done += os.pwrite(self.fd, view[done:], self.position + done)
        self.position += size
        return size


class ColumnFile:
    """The IPC file of `specs` x `rows` at `start` in the open file `fd`, its values to be written in place.

    `metadata`: the schema's metadata (trace_cache's entry keeps the Timeline's meta there). After `open`, each
    column's writable array is `array(name)`; `close()` unmaps (the written pages stay in the page cache). `end`
    is the offset just past the IPC file, where anything the caller appends goes."""

    def __init__(self, fd: int, specs: list[ColumnSpec], rows: int, metadata: dict | None = None, start: int = 0):
        self.fd, self.specs, self.rows, self.start = fd, specs, rows, start
        self.metadata = metadata
        self.end = start
        self._map: mmap.mmap | None = None
        self._arrays: dict[str, np.ndarray] = {}

    def open(self) -> None:
        """Write the layout (holes for the values), reserve its blocks and map it. Raises OSError (a full disk)."""
        import pyarrow as pa
        import pyarrow.ipc as ipc

        biggest = max([np.dtype(s.dtype).itemsize * self.rows for s in self.specs] + [8])
        placeholder = mmap.mmap(-1, biggest)  # never written: never backed by memory
        base = pa.py_buffer(placeholder)
        try:
            writer = _HoleWriter(self.fd, self.start, (base.address, base.address + biggest))
            table = pa.table({s.name: _placeholder_array(s, self.rows, base) for s in self.specs})
            if self.metadata is not None:
                table = table.replace_schema_metadata(self.metadata)
            with ipc.new_file(writer, table.schema) as ipc_writer:
                ipc_writer.write_table(table)
            del table, base
        finally:
            placeholder.close()
        if len(writer.holes) != len(self.specs):
            raise OSError("the IPC writer laid the columns out in an unexpected way")
        self.end = writer.position
        os.posix_fallocate(self.fd, self.start, self.end - self.start)  # ENOSPC here, not a SIGBUS later
        page = mmap.ALLOCATIONGRANULARITY
        first = self.start // page * page
        self._map = mmap.mmap(self.fd, self.end - first, offset=first)
        for spec, (offset, length) in zip(self.specs, writer.holes, strict=True):
            dtype = np.dtype(spec.dtype)
            if length < dtype.itemsize * self.rows:
                raise OSError("the IPC writer laid a column out shorter than its values")
            self._arrays[spec.name] = np.frombuffer(self._map, dtype=dtype, count=self.rows, offset=offset - first)

    def array(self, name: str) -> np.ndarray:
        return self._arrays[name]

    def close(self) -> None:
        self._arrays.clear()
        if self._map is not None:
            with contextlib.suppress(BufferError):  # an array view still alive elsewhere: the mapping goes with it
                self._map.close()
            self._map = None


def _placeholder_array(spec: ColumnSpec, rows: int, base: pa.Buffer) -> pa.Array:
    import pyarrow as pa

    dtype = np.dtype(spec.dtype)
    values = pa.Array.from_buffers(pa.from_numpy_dtype(dtype), rows, [None, base.slice(0, dtype.itemsize * rows)])
    if spec.categories is None:
        return values
    return pa.DictionaryArray.from_arrays(values, pa.array(spec.categories, type=pa.string()), safe=False)


def frame_of_table(table: pa.Table, columns: list[str]) -> pd.DataFrame:
    """The frame of an IPC table read from a mapping: numpy views of its buffers (no copy), dictionaries as
    categoricals (codes in the file's type)."""
    import pandas as pd
    import pyarrow as pa

    data = {}
    for name in columns:
        col = table.column(name)
        chunk = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
        if pa.types.is_dictionary(chunk.type):
            codes = chunk.indices.to_numpy(zero_copy_only=True)
            data[name] = pd.Categorical.from_codes(codes, categories=chunk.dictionary.to_pylist(), validate=False)
        else:
            data[name] = chunk.to_numpy(zero_copy_only=True)
    return pd.DataFrame(data, copy=False)
