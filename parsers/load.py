"""One entry point for every supported trace format; the reader is picked from the content.

The readers are imported when used: a big JSON trace's two-process decoding starts before numpy is loaded."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import TraceError
from .limits import ReadLimits, decode_container, read_trace_bytes
from .run_sidecar import attach_run_json
from .timeline import Timeline

_FORMATS = "not a Kineto/Chrome JSON trace, Perfetto protobuf trace or Nsight Systems SQLite export"


def load_trace(path: str | os.PathLike, limits: ReadLimits | None = None) -> Timeline:
    """Read a trace file of any supported format (plain or gzip) into a Timeline, with its run.json if any."""
    timeline = read_in_pieces(path, limits)
    if timeline is None:
        owned = [read_trace_bytes(Path(path), limits)]  # handed over: the reader frees it as soon as it can
        timeline = _parse(owned, limits)
    return attach_run_json(timeline, Path(path))


def read_in_pieces(path: str | os.PathLike, limits: ReadLimits | None = None) -> Timeline | None:
    """The Timeline of a big plain JSON trace within the limits, read piece by piece from disk by two
    processes (no whole-file buffer); None for any other file, or when anything about it is unusual: the
    caller then reads the whole file, which also words any error."""
    from .split_decode import MIN_SPLIT_BYTES, SplitNotPossibleError

    limits = limits or ReadLimits.from_env()
    try:
        st = os.stat(path)
    except OSError:
        return None
    too_big = st.st_size > min(limits.max_file_bytes, limits.max_decompressed_bytes)
    if not stat.S_ISREG(st.st_mode) or too_big or st.st_size < MIN_SPLIT_BYTES:
        return None
    from .chrome_trace import read_chrome_trace_file

    try:
        return read_chrome_trace_file(path, limits)
    except SplitNotPossibleError:
        return None


def parse_trace_bytes(
    data: bytes | bytearray, limits: ReadLimits | None = None, already_decompressed: bool = False
) -> Timeline:
    """Parse an in-memory trace (e.g. an upload). Raises TraceError with a one-line reason."""
    if not already_decompressed:
        data = decode_container(bytes(data), limits)
    return _parse([data], limits)


def _parse(owned: list[bytes | bytearray], limits: ReadLimits | None = None) -> Timeline:
    """Sniff the content and read it; `owned` holds the only reference the readers may drop early."""
    from .chrome_trace import looks_like_chrome_trace, read_chrome_trace

    data = owned[0]
    head = bytes(data[:4096])
    if not head.strip():
        raise TraceError("the file is empty")
    if looks_like_chrome_trace(head):
        del data
        return read_chrome_trace(owned, limits)
    from .nsys_reader import looks_like_sqlite, read_nsys_sqlite
    from .perfetto_reader import looks_like_perfetto, read_perfetto

    if looks_like_sqlite(head):
        return read_nsys_sqlite(data, limits)
    if looks_like_perfetto(data):
        return read_perfetto(data, limits)
    if b"\x00" in head[:512] or not _mostly_text(head):
        raise TraceError(f"unrecognised binary file: {_FORMATS}")
    raise TraceError(f"unrecognised text file: {_FORMATS}")


def _mostly_text(head: bytes) -> bool:
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start > len(head) - 4  # a multi-byte character cut at the end of the sniff window
    return True
