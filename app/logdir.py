"""Traces under a log directory (`--logdir DIR`), for opening big local files without the upload box.

Why: a browser upload copies hundreds of MB through the page and re-reads them each session; a trace
on the machine running Stepscope can be read from disk (and through the on-disk cache) instead. As in
TensorBoard, the app is started on a log directory and lists what is in it, newest first.

No Streamlit here, so the listing and the path checks are tested directly. Every path handed out is
relative to the root, and every path taken in is resolved (symlinks included) and refused unless it
lies inside the root: the picker can never open or list anything outside it.
"""

from __future__ import annotations

import os
import re
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path

from ..contracts.safe_read import open_regular

LOGDIR_ENV = "STEPSCOPE_LOGDIR"
SUFFIXES = (".json", ".gz", ".pftrace", ".perfetto-trace", ".sqlite", ".pb", ".trace")
MAX_FILES = 2000  # listed per folder walk; a huge tree is cut, not crawled for minutes
MAX_DEPTH = 6
_HEAD_BYTES = 1 << 16
_RANK_IN_JSON = re.compile(rb'"distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*(\d{1,6})')
_RANK_IN_NAME = re.compile(r"(?:^|[^a-z])rank[_-]?(\d{1,6})(?!\d)", re.IGNORECASE)
_sniff_memo: dict[tuple[str, int, int], tuple[str | None, int | None]] = {}


class OutsideLogdirError(ValueError):
    """A path that is not inside the log directory."""


@dataclass(frozen=True)
class TraceFile:
    rel_path: str  # relative to the root, "/"-separated
    size_bytes: int
    mtime_ns: int
    format: str  # "Kineto/Chrome JSON", "Perfetto", "Nsight SQLite"
    rank: int | None  # from the trace's distributedInfo, else from a "rankN" in its path

    @property
    def name(self) -> str:
        return self.rel_path.rsplit("/", 1)[-1]


def configured_logdir(argv: list[str] | None = None) -> Path | None:
    """The root from `--logdir DIR` (after `streamlit run app/streamlit_app.py --`), else STEPSCOPE_LOGDIR."""
    argv = sys.argv[1:] if argv is None else argv
    value = None
    for i, arg in enumerate(argv):
        if arg == "--logdir" and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--logdir="):
            value = arg.split("=", 1)[1]
    value = value or os.environ.get(LOGDIR_ENV)
    if not value:
        return None
    root = Path(value).expanduser().resolve()
    return root if root.is_dir() else None


def resolve_within(root: Path, rel: str | os.PathLike = "") -> Path:
    """The real path of `rel` under `root`; OutsideLogdirError when it is absolute, or escapes by .. or a link."""
    root = Path(root).resolve()
    text = os.fspath(rel)
    if "\x00" in text or os.path.isabs(text) or (os.path.splitdrive(text)[0]):
        raise OutsideLogdirError("not a path inside the log directory")
    path = (root / text).resolve()
    if path != root and not path.is_relative_to(root):
        raise OutsideLogdirError("not a path inside the log directory")
    return path


def list_folders(root: Path) -> list[str]:
    """The root ("") and its sub-folders (relative, sorted), hidden ones and links out of the root left out."""
    root = Path(root).resolve()
    out = []
    for folder, dirs, _ in _walk(root):
        out += [(folder / name).relative_to(root).as_posix() for name in dirs]
        if len(out) > MAX_FILES:
            break
    return ["", *sorted(out)]


def list_traces(root: Path, folder: str = "") -> list[TraceFile]:
    """Traces in `folder` (relative to root) and its sub-folders, newest first."""
    root = Path(root).resolve()
    start = resolve_within(root, folder)
    found = []
    for current, _, files in _walk(start):
        for name in files:
            if name.startswith(".") or not name.lower().endswith(SUFFIXES):
                continue
            path = current / name
            try:
                real = resolve_within(root, path.relative_to(root))
                st = real.stat()
            except (OSError, OutsideLogdirError):
                continue
            if not real.is_file():
                continue
            fmt, rank = _sniff(real, st)
            if fmt is None:
                continue
            rel = path.relative_to(root).as_posix()
            found.append(TraceFile(rel, st.st_size, st.st_mtime_ns, fmt, rank if rank is not None else _rank(rel)))
            if len(found) >= MAX_FILES:
                break
    return sorted(found, key=lambda t: (-t.mtime_ns, t.rel_path))


def listing_stamp(root: Path, folder: str = "") -> tuple:
    """Changes whenever a trace appears, goes or changes: callers refresh their listing on it."""
    return tuple((t.rel_path, t.size_bytes, t.mtime_ns) for t in list_traces(root, folder))


def _walk(start: Path):
    base_depth = len(start.parts)
    for folder, dirs, files in os.walk(start, followlinks=False):
        here = Path(folder)
        dirs[:] = [d for d in dirs if not d.startswith(".") and not (here / d).is_symlink()]
        if len(here.parts) - base_depth >= MAX_DEPTH:
            dirs[:] = []
        yield here, dirs, files


def _sniff(path: Path, st: os.stat_result) -> tuple[str | None, int | None]:
    """(format, rank from the content) from the first bytes, or (None, None) when not a trace."""
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _sniff_memo:
        if len(_sniff_memo) > 4 * MAX_FILES:
            _sniff_memo.clear()
        _sniff_memo[key] = _sniff_head(_head(path))
    return _sniff_memo[key]


def _head(path: Path) -> bytes:
    try:
        with open(open_regular(path), "rb") as handle:  # a FIFO or a device: refused, never blocks
            raw = handle.read(_HEAD_BYTES)
    except OSError:
        return b""
    if raw[:2] == b"\x1f\x8b":
        try:
            return zlib.decompressobj(wbits=31).decompress(raw, _HEAD_BYTES)
        except zlib.error:
            return b""
    return raw


def _sniff_head(head: bytes) -> tuple[str | None, int | None]:
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text[:1] in (b"{", b"[") and (b'"traceEvents"' in head or b'"ph"' in head):
        match = _RANK_IN_JSON.search(head)
        return "Kineto/Chrome JSON", int(match.group(1)) if match else None
    if head.startswith(b"SQLite format 3\x00"):
        return "Nsight SQLite", None
    if _looks_like_perfetto(head):
        return "Perfetto", None
    return None, None


def _looks_like_perfetto(head: bytes) -> bool:
    """A Trace proto starts with packet fields: tag 0x0a and a varint length (the reader checks the rest)."""
    if len(head) < 3 or head[0] != 0x0A:
        return False
    length = shift = 0
    for pos in range(1, min(len(head), 11)):
        length |= (head[pos] & 0x7F) << shift
        shift += 7
        if not head[pos] & 0x80:
            nxt = pos + 1 + length
            return length > 0 and (nxt >= len(head) or head[nxt] == 0x0A)
    return False


def _rank(rel_path: str) -> int | None:
    match = _RANK_IN_NAME.search(rel_path)
    return int(match.group(1)) if match else None


def human_size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"
