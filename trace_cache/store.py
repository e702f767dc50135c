"""A bounded, content-addressed folder of cache entries: atomic writes, least-recently-used eviction.

Why a folder of plain files: batch workers and the app may write the same entry at once; each writer
writes a private temporary file and renames it over the entry, so a reader sees either no entry or a
whole one (rename is atomic on one file system), and the last writer wins with identical content.
A hit refreshes the entry's mtime, which is what eviction orders by (atime is often not kept).
Entries are Arrow IPC or JSON only; nothing here is ever unpickled. Standard library (and contracts.safe_read) only.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from stepscope.contracts import settings
from stepscope.contracts.safe_read import read_regular

CACHE_DIR_ENV = "STEPSCOPE_CACHE_DIR"
CACHE_MAX_ENV = "STEPSCOPE_CACHE_MAX_MB"
DEFAULT_MAX_BYTES = 2 << 30  # 2 GiB
KINDS = ("timelines", "results", "stat")  # one sub-folder each
_TMP_PREFIX = ".tmp-"
_STALE_TMP_S = 3600.0  # a temporary file this old belongs to a writer that died
MAX_ENTRY_READ_BYTES = 1 << 30  # a result (JSON) entry: far above any real one (a 20M-event trace's is ~100 MB)


def default_cache_dir() -> Path:
    """STEPSCOPE_CACHE_DIR, else $XDG_CACHE_HOME/stepscope, else ~/.cache/stepscope."""
    explicit = settings.raw(CACHE_DIR_ENV)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "stepscope"


def default_max_bytes() -> int:
    """STEPSCOPE_CACHE_MAX_MB (a positive whole number of MB), else 2 GiB."""
    return settings.positive_int(CACHE_MAX_ENV, DEFAULT_MAX_BYTES >> 20) << 20


class CacheStore:
    """Entries live at ROOT/KIND/NAME; NAME is derived from a content key by the caller."""

    def __init__(self, root: str | os.PathLike | None = None, max_bytes: int | None = None) -> None:
        self.root = Path(root) if root is not None else default_cache_dir()
        self.max_bytes = max_bytes if max_bytes is not None else default_max_bytes()

    def entry(self, kind: str, name: str) -> Path:
        if kind not in KINDS or not name or "/" in name or name.startswith("."):
            raise ValueError(f"bad cache entry {kind}/{name}")
        return self.root / kind / name

    def get(self, kind: str, name: str) -> Path | None:
        """The entry's path when present and a regular file (its use time refreshed), else None. Anything else at
        an entry's name (a FIFO, a link to a device, a folder) is nothing this store wrote: it is removed."""
        path = self.entry(kind, name)
        try:
            if not stat.S_ISREG(os.lstat(path).st_mode):
                self.discard(kind, name)
                return None
            os.utime(path)
        except OSError:  # absent, or evicted by another process just now
            return None
        return path

    def read_bytes(self, kind: str, name: str, max_bytes: int = MAX_ENTRY_READ_BYTES) -> bytes | None:
        """The entry's bytes, or None when it is absent, not a regular file or over `max_bytes`."""
        path = self.get(kind, name)
        if path is None:
            return None
        try:
            return read_regular(path, max_bytes)
        except OSError:
            return None

    def discard(self, kind: str, name: str) -> None:
        """Remove an entry found corrupt or stale, so it is rebuilt."""
        with contextlib.suppress(OSError):
            self.entry(kind, name).unlink()

    def put_bytes(self, kind: str, name: str, data: bytes) -> Path | None:
        return self.put(kind, name, lambda handle: handle.write(data))

    def put(self, kind: str, name: str, write: Callable) -> Path | None:
        """Write an entry through `write(binary file handle)` atomically; None if the cache is not writable.

        A cache that cannot be written (read-only home, full disk) never fails the caller's work.
        """
        path = self.entry(kind, name)
        tmp = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=path.parent)
            with os.fdopen(fd, "wb") as handle:
                write(handle)
            os.replace(tmp, path)
            tmp = None
        except OSError:
            return None
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
        self.evict(keep=path)
        return path

    def temporary(self, kind: str) -> tuple[int, str]:
        """An open temporary file (descriptor, path) beside KIND's entries, to be placed as one or removed (a
        writer that dies leaves it to the stale-file sweep). Raises OSError when the cache is not writable."""
        folder = self.root / kind
        if kind not in KINDS:
            raise ValueError(f"bad cache kind {kind}")
        folder.mkdir(parents=True, exist_ok=True)
        return tempfile.mkstemp(prefix=_TMP_PREFIX, dir=folder)

    def place(self, kind: str, name: str, written: Path) -> bool:
        """Make a file written by `temporary` the entry KIND/NAME (atomically); False when that fails."""
        path = self.entry(kind, name)
        try:
            os.replace(written, path)
        except OSError:
            return False
        self.evict(keep=path)
        return True

    def entries(self) -> list[tuple[float, int, Path]]:
        """(mtime, size, path) of every entry, temporary files excluded (stale ones are removed)."""
        out = []
        now = time.time()
        for kind in KINDS:
            try:
                scan = os.scandir(self.root / kind)
            except OSError:
                continue
            with scan:
                for item in scan:
                    try:
                        st = item.stat()
                    except OSError:
                        continue
                    if item.name.startswith(_TMP_PREFIX):
                        if now - st.st_mtime > _STALE_TMP_S:
                            with contextlib.suppress(OSError):
                                os.unlink(item.path)
                        continue
                    out.append((st.st_mtime, st.st_size, Path(item.path)))
        return out

    def size_bytes(self) -> int:
        return sum(size for _, size, _ in self.entries())

    def evict(self, keep: Path | None = None) -> list[Path]:
        """Remove least recently used entries until the total is within the bound; return what went. `keep` (the
        entry just written) stays even when it alone is over the bound: a trace's entry bigger than the cache is
        kept until the next entry comes, so its second open is still a hit."""
        entries = self.entries()
        total = sum(size for _, size, _ in entries)
        removed = []
        for _, size, path in sorted(entries, key=lambda e: e[0]):
            if total <= self.max_bytes:
                break
            if path == keep:
                continue
            with contextlib.suppress(OSError):
                path.unlink()
                removed.append(path)
            total -= size
        return removed
