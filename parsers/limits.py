"""Read a trace file's bytes within size limits, unzipping gzip safely.

Limits default to sizes that fit a 24 GiB machine running the app alongside other
work; they can be raised with STEPSCOPE_MAX_FILE_MB / STEPSCOPE_MAX_DECOMPRESSED_MB /
STEPSCOPE_MAX_EVENTS or per call. They bound every read that holds the whole file; a plain
JSON file read in pieces from disk holds none of it, and is bounded by the memory budget
instead (STEPSCOPE_MEMORY_BUDGET_MB, parsers/memory_budget.py). A gzip bomb stops at the decompression limit
instead of eating RAM, and a file of millions of tiny events is refused by count
before its frame is built (memory grows with events, not bytes). Gzip files of many
members are read in fixed input chunks, so their cost stays linear.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from stepscope.contracts import settings
from stepscope.contracts.safe_read import NotRegularFileError, open_regular
from . import inflate
from .errors import TraceError

MiB = 1 << 20
GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 16 * MiB
_IN_CHUNK = 1 * MiB
DEFAULT_MAX_DECOMPRESSED_MB = 2048
DEFAULT_MAX_EVENTS = 20_000_000
MAX_EVENTS_ENV = "STEPSCOPE_MAX_EVENTS"


@dataclass(frozen=True)
class ReadLimits:
    max_file_bytes: int
    max_decompressed_bytes: int
    max_events: int = DEFAULT_MAX_EVENTS
    # A plain JSON file read in pieces from disk: bounded by the memory budget (bytes) and the events it holds,
    # not by the three limits above. None (limits a caller built by hand): the three limits bound it too.
    memory_budget_bytes: int | None = None
    piece_events: int | None = None

    @classmethod
    def from_env(cls) -> ReadLimits:
        from .memory_budget import events_within, memory_budget_bytes

        max_events = _env_mb(MAX_EVENTS_ENV, DEFAULT_MAX_EVENTS)
        budget = memory_budget_bytes()
        piece_events = events_within(budget)
        if settings.raw(MAX_EVENTS_ENV) is not None:  # an event limit set on purpose bounds every read
            piece_events = min(piece_events, max_events)
        return cls(
            max_file_bytes=_env_mb("STEPSCOPE_MAX_FILE_MB", 2048) * MiB,
            max_decompressed_bytes=_env_mb("STEPSCOPE_MAX_DECOMPRESSED_MB", DEFAULT_MAX_DECOMPRESSED_MB) * MiB,
            max_events=max_events,
            memory_budget_bytes=budget,
            piece_events=piece_events,
        )

    @property
    def events_in_pieces(self) -> int:
        """The most events a read in pieces may hold."""
        return self.max_events if self.piece_events is None else self.piece_events


def check_event_count(count: int, limits: ReadLimits | None, what: str = "events") -> None:
    """Refuse a trace with more events than the limit, before any per-event memory is spent on it."""
    limit = (limits or ReadLimits.from_env()).max_events
    if count > limit:
        raise TraceError(
            f"the trace holds about {count:,} {what}, over the {limit:,} event limit "
            f"(raise {MAX_EVENTS_ENV} to allow it)"
        )


def _env_mb(name: str, default: int) -> int:
    """A limit from its setting (contracts/settings.py): a bad value is refused with one line, not ignored, so a
    mistyped limit never reads a file its operator meant to refuse."""
    raw = settings.raw(name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise TraceError(f"{name}={raw[:40]!r} is not a whole number") from None
    if value <= 0:
        raise TraceError(f"{name} must be positive")
    return value


def read_trace_bytes(path: str | os.PathLike, limits: ReadLimits | None = None) -> bytes | bytearray:
    """Return the file's content, gunzipped when it is gzip, never beyond the limits."""
    limits = limits or ReadLimits.from_env()
    path = Path(path)
    try:
        fd = open_regular(path)  # a FIFO or a device is refused here, without blocking
    except NotRegularFileError:
        raise TraceError(f"{path.name} is not a regular file") from None
    except OSError as exc:
        raise TraceError(f"cannot open {path.name}: {exc.strerror or exc}") from None
    try:
        with open(fd, "rb", buffering=0) as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > limits.max_file_bytes:
                raise TraceError(
                    f"{path.name} is {size / MiB:.0f} MB, over the {limits.max_file_bytes / MiB:.0f} MB limit "
                    "(raise STEPSCOPE_MAX_FILE_MB to allow it)"
                )
            data = _read_all(fh, limits.max_file_bytes)
    except OSError as exc:
        raise TraceError(f"cannot read {path.name}: {exc.strerror or exc}") from None
    return decode_container(data, limits)


def read_file_bytes(path: str | os.PathLike, max_bytes: int | None = None) -> bytearray:
    """The whole file in a bytearray: writable, so the JSON reader can decode its pieces in place (no copies).
    Only a regular file is read (contracts.safe_read), and never more than one byte past `max_bytes` (the file
    limit by default), so a file that grows while it is read is cut there and refused by the size check."""
    limit = ReadLimits.from_env().max_file_bytes if max_bytes is None else max_bytes
    with open(open_regular(path), "rb", buffering=0) as fh:
        return _read_all(fh, limit)


def _read_all(fh, max_bytes: int) -> bytearray:
    size = min(os.fstat(fh.fileno()).st_size, max_bytes + 1)
    data = bytearray(size)
    got = fh.readinto(data) if size else 0
    while got < size:  # short reads (or a file that grew): read on
        n = fh.readinto(memoryview(data)[got:])
        if not n:
            del data[got:]  # the file shrank while it was read
            break
        got += n
    while got <= max_bytes and (more := fh.read(min(_IN_CHUNK, max_bytes + 1 - got))):  # it grew: read on
        data += more  # (in chunks: read(n) would reserve n bytes at once)
        got += len(more)
    return data


def decode_container(data: bytes, limits: ReadLimits | None = None) -> bytes | bytearray:
    """Gunzip when the bytes are gzip (any number of members); pass anything else through."""
    limits = limits or ReadLimits.from_env()
    if len(data) > limits.max_file_bytes:
        raise TraceError(f"input is {len(data) / MiB:.0f} MB, over the {limits.max_file_bytes / MiB:.0f} MB limit")
    if not data.startswith(GZIP_MAGIC):
        if len(data) > limits.max_decompressed_bytes:
            raise TraceError(f"input is over the {limits.max_decompressed_bytes / MiB:.0f} MB limit")
        return data
    return _gunzip(data, limits.max_decompressed_bytes)


def _gunzip(data: bytes, max_out: int) -> bytearray:
    """Inflate every gzip member in turn, in linear time however many members there are.

    zlib copies the input left over after a member (unused_data); feeding the whole rest of the file
    each time would make a file of many tiny members quadratic. Input is fed in chunks that start small
    and double while a member lasts, so each copy is at most about twice what the member consumed.
    """
    out = bytearray()
    view = memoryview(data)
    pos, n = 0, len(view)
    while pos < n:
        if view[pos] == 0:  # zero padding after the last member is allowed; anything after it is not
            if bytes(view[pos:]).strip(b"\x00"):
                raise TraceError(f"corrupt gzip data: zero bytes at byte {pos} followed by more data")
            break
        if bytes(view[pos : pos + 2]) != GZIP_MAGIC[:2]:  # said here: ISA-L waits for more bytes where zlib fails
            raise TraceError(f"corrupt gzip data near byte {pos}: not the start of a gzip member")
        inflater = inflate.decompressobj(wbits=31)  # ISA-L when installed: same interface, faster
        feed = 256
        while not inflater.eof:
            if pos >= n:
                raise TraceError("truncated gzip: the file ends before the compressed stream does")
            chunk = view[pos : pos + feed]
            pending: bytes | memoryview = chunk
            while True:
                budget = min(max_out - len(out) + 1, _CHUNK)
                try:
                    piece = inflater.decompress(pending, budget)
                except inflate.ERRORS as exc:
                    raise TraceError(f"corrupt gzip data near byte {pos}: {exc}") from None
                out += piece
                if len(out) > max_out:
                    raise TraceError(
                        f"gzip expands beyond the {max_out / MiB:.0f} MB decompression limit "
                        "(raise STEPSCOPE_MAX_DECOMPRESSED_MB to allow it)"
                    )
                if inflater.eof:
                    break
                pending = inflater.unconsumed_tail
                if not pending and len(piece) < budget:
                    break  # this chunk is used up and no output is held back
            pos += len(chunk) - len(inflater.unused_data) if inflater.eof else len(chunk)
            feed = min(feed * 2, _IN_CHUNK)
    return out
