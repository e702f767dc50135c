"""Read a trace file's bytes within size limits, unzipping gzip safely.

Limits default to sizes that fit a 24 GiB machine with room for analysis; they
can be raised with STEPSCOPE_MAX_FILE_MB / STEPSCOPE_MAX_DECOMPRESSED_MB or
per call. A gzip bomb stops at the decompression limit instead of eating RAM.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from parsers import inflate
from parsers.errors import TraceError

MiB = 1 << 20
GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 16 * MiB


@dataclass(frozen=True)
class ReadLimits:
    max_file_bytes: int
    max_decompressed_bytes: int

    @classmethod
    def from_env(cls) -> ReadLimits:
        return cls(
            max_file_bytes=_env_mb("STEPSCOPE_MAX_FILE_MB", 2048) * MiB,
            max_decompressed_bytes=_env_mb("STEPSCOPE_MAX_DECOMPRESSED_MB", 4096) * MiB,
        )


def _env_mb(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise TraceError(f"{name}={raw!r} is not a whole number of MB") from None
    if value <= 0:
        raise TraceError(f"{name} must be positive")
    return value


def read_trace_bytes(path: str | os.PathLike, limits: ReadLimits | None = None) -> bytes | bytearray:
    """Return the file's content, gunzipped when it is gzip, never beyond the limits."""
    limits = limits or ReadLimits.from_env()
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise TraceError(f"cannot open {path.name}: {exc.strerror or exc}") from None
    if not path.is_file():
        raise TraceError(f"{path.name} is not a regular file")
    if size > limits.max_file_bytes:
        raise TraceError(
            f"{path.name} is {size / MiB:.0f} MB, over the {limits.max_file_bytes / MiB:.0f} MB limit "
            "(raise STEPSCOPE_MAX_FILE_MB to allow it)"
        )
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceError(f"cannot read {path.name}: {exc.strerror or exc}") from None
    return decode_container(data, limits)


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
    out = bytearray()
    view = memoryview(data)
    while view:
        inflater = inflate.decompressobj(wbits=31)  # ISA-L when installed: same interface, faster
        pending = view
        try:
            while pending and not inflater.eof:
                budget = max_out - len(out) + 1
                out += inflater.decompress(pending, min(budget, _CHUNK))
                if len(out) > max_out:
                    raise TraceError(
                        f"gzip expands beyond the {max_out / MiB:.0f} MB decompression limit "
                        "(raise STEPSCOPE_MAX_DECOMPRESSED_MB to allow it)"
                    )
                pending = inflater.unconsumed_tail
            if not inflater.eof:
                out += inflater.flush()
        except inflate.ERRORS as exc:
            raise TraceError(f"corrupt gzip data: {exc}") from None
        if not inflater.eof:
            raise TraceError("truncated gzip: the file ends before the compressed stream does")
        rest = inflater.unused_data
        view = memoryview(rest) if rest.strip(b"\x00") else memoryview(b"")
    return out
