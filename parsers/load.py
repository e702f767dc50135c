"""One entry point for every supported trace format; the reader is picked from the content.

`read_trace_file` is the one loader of a trace file: `load_trace` and the on-disk cache (trace_cache.timelines)
both read through it, the cache with its own check of whether the content is already known. Everything a read
needs travels as an argument (no module state): two sessions of one server reading at once share nothing.

The readers are imported when used: a big JSON trace's two-process decoding starts before numpy is loaded."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from .errors import TraceError
from .kineto.pieces import DecodeStoppedError, Meanwhile, Progress
from .limits import ReadLimits, decode_container, read_file_bytes, read_trace_bytes
from .timeline import Timeline

_FORMATS = "not a Kineto/Chrome JSON trace, Perfetto protobuf trace or Nsight Systems SQLite export"

# Asked once whether the caller already has this file's Timeline (its content is cached, say): with None while a
# big JSON file is decoded by two processes (the caller reads the file itself meanwhile, to hash it), or with the
# file's bytes as stored (gzip still compressed) when it is read whole, so that it is read once. True: stop.
ContentCheck = Callable[[bytes | bytearray | None], bool]


def load_trace(
    path: str | os.PathLike,
    limits: ReadLimits | None = None,
    *,
    meanwhile: Callable[[], object] | None = None,
    progress: Progress | None = None,
) -> Timeline:
    """Read a trace file of any supported format (plain or gzip) into a Timeline. The run.json beside it is the
    front door's to read (analysis/front_door.py, once per open). `meanwhile` and `progress`: as read_trace_file
    says (what meanwhile returns is not used here: there is no
    other source to stop for)."""

    def work() -> bool:
        if meanwhile is not None:
            meanwhile()
        return False

    return _read_file(Path(path), limits, work if meanwhile is not None else None, None, progress, False)


def read_trace_file(
    path: str | os.PathLike,
    limits: ReadLimits | None = None,
    *,
    meanwhile: Meanwhile | None = None,
    cached: ContentCheck | None = None,
    progress: Progress | None = None,
    whole: bool = False,
) -> Timeline | None:
    """The Timeline of a trace file of any supported format (plain or gzip), without its run.json; None only when
    `cached` (see ContentCheck) or `meanwhile` returned True.

    meanwhile: work for this process while a second one decodes a big JSON file (kineto.pieces.Meanwhile).
    progress: the fraction decoded so far, 0 to 1, as it goes (1 once the Timeline is built, whatever the format).
    whole: never read in pieces (a caller that must hash and parse the very same bytes).
    Raises TraceError with a one-line reason."""
    try:
        return _read_file(Path(path), limits, meanwhile, cached, progress, whole)
    except DecodeStoppedError:
        return None


def _read_file(
    path: Path,
    limits: ReadLimits | None,
    meanwhile: Meanwhile | None,
    cached: ContentCheck | None,
    progress: Progress | None,
    whole: bool,
) -> Timeline:
    """read_trace_file, raising DecodeStoppedError where it returns None."""
    limits = limits or ReadLimits.from_env()
    timeline = None if whole else read_in_pieces(path, limits, _while_decoding(cached, meanwhile), progress)
    if timeline is None:
        raw = _stored_bytes(path, limits)
        if cached is not None and cached(raw):
            raise DecodeStoppedError
        owned = [decode_container(raw, limits)]
        del raw
        timeline = _parse(owned, limits, meanwhile, progress)  # the reader drops the bytes as soon as it can
    if progress is not None:
        progress(1.0)
    return timeline


def read_in_pieces(
    path: str | os.PathLike,
    limits: ReadLimits | None = None,
    meanwhile: Meanwhile | None = None,
    progress: Progress | None = None,
) -> Timeline | None:
    """The Timeline of a big plain JSON trace within the limits, read piece by piece from disk by two
    processes (no whole-file buffer); None for any other file, or when anything about it is unusual: the
    caller then reads the whole file, which also words any error. Raises kineto.pieces.DecodeStoppedError
    when `meanwhile` returns True."""
    from .kineto.pieces import MIN_SPLIT_BYTES, SplitNotPossibleError

    limits = limits or ReadLimits.from_env()
    try:
        st = os.stat(path)
    except OSError:
        return None
    # Bounded by the memory budget (its events), not by the whole-file limits: the file's bytes are never held.
    too_big = limits.memory_budget_bytes is None and st.st_size > min(
        limits.max_file_bytes, limits.max_decompressed_bytes
    )
    if not stat.S_ISREG(st.st_mode) or too_big or st.st_size < MIN_SPLIT_BYTES:
        return None
    from .kineto.reader import read_chrome_trace_file

    try:
        return read_chrome_trace_file(path, limits, meanwhile, progress)
    except SplitNotPossibleError:
        return None


def parse_trace_bytes(
    data: bytes | bytearray, limits: ReadLimits | None = None, already_decompressed: bool = False
) -> Timeline:
    """Parse an in-memory trace (e.g. an upload). Raises TraceError with a one-line reason."""
    if not already_decompressed:
        data = decode_container(bytes(data), limits)
    return _parse([data], limits)


def _while_decoding(cached: ContentCheck | None, meanwhile: Meanwhile | None) -> Meanwhile | None:
    """What runs while the second process decodes: the content check first (a hit stops the decoding at once),
    then the caller's other work."""
    if cached is None:
        return meanwhile

    def work() -> bool:
        return cached(None) or bool(meanwhile is not None and meanwhile())

    return work


def _stored_bytes(path: Path, limits: ReadLimits) -> bytes | bytearray:
    """The file's bytes as stored (gzip still compressed); what is wrong with it in read_trace_bytes's words."""
    try:
        if os.stat(path).st_size <= limits.max_file_bytes and path.is_file():
            return read_file_bytes(path, limits.max_file_bytes)
    except OSError:
        pass
    read_trace_bytes(path, limits)  # raises the one-line TraceError for what is wrong
    raise TraceError(f"cannot read {path.name}")  # it became readable in between: treat as a failure


def _parse(
    owned: list[bytes | bytearray],
    limits: ReadLimits | None = None,
    meanwhile: Meanwhile | None = None,
    progress: Progress | None = None,
) -> Timeline:
    """Sniff the content and read it; `owned` holds the only reference the readers may drop early."""
    from .kineto.reader import looks_like_chrome_trace, read_chrome_trace

    data = owned[0]
    head = bytes(data[:4096])
    if not head.strip():
        raise TraceError("the file is empty")
    if looks_like_chrome_trace(head):
        del data
        return read_chrome_trace(owned, limits, meanwhile, progress)
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
