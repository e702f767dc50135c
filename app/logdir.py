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
import stat
import sys
import threading
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from stepscope.contracts import settings
from stepscope.contracts.safe_read import open_regular
from stepscope.exporters.safe_text import plain
from stepscope.parsers.ranks import FRONT_END_NAME, SERVING_WORKER_NAME

LOGDIR_ENV = "STEPSCOPE_LOGDIR"
SUFFIXES = (".json", ".gz", ".pftrace", ".perfetto-trace", ".sqlite", ".pb", ".trace")
MAX_FILES = 2000  # entries offered: traces in one listing, folders in the folder list (README); a huge tree is cut
MAX_DEPTH = 6
MAX_CANDIDATES = 100_000  # files with a trace suffix looked at (one stat each) in one listing; more are not
MAX_VISITED = 200_000  # entries of any kind (files, folders) a walk looks at: a tree of a million files is cut there
MAX_NEW_SNIFFS = 5000  # files read for the first time in one listing; the rest on the next refreshes
# Names a trace never has, skipped before any stat or read: what sits beside traces (run records) and in model
# folders under a log directory (configs, tokenizers, weight indexes), all JSON that a sniff would read.
NOT_TRACE_NAMES = frozenset(
    {
        "run.json",
        "sweep.json",
        "config.json",
        "generation_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "preprocessor_config.json",
        "package.json",
        "package-lock.json",
    }
)
NOT_TRACE_ENDINGS = (".index.json",)  # model.safetensors.index.json and the like
_HEAD_BYTES = 1 << 16
_RANK_IN_JSON = re.compile(rb'"distributedInfo"\s*:\s*\{[^{}]*?"rank"\s*:\s*(\d{1,6})')
_RANK_IN_NAME = re.compile(r"(?:^|[^a-z])rank[_-]?(\d{1,6})(?!\d)", re.IGNORECASE)
_RAW_NAME = "//"  # a key for a name that is not valid UTF-8: this, then its bytes in hex (no relative path has it)


class OutsideLogdirError(ValueError):
    """A path that is not inside the log directory."""


@dataclass(frozen=True)
class TraceFile:
    rel_path: str  # relative to the root, "/"-separated; a byte that is not UTF-8 is a surrogate (os.fsdecode)
    size_bytes: int
    mtime_ns: int
    format: str  # "Kineto/Chrome JSON", "Perfetto", "Nsight SQLite"
    rank: int | None  # from the trace's distributedInfo, else from a "rankN" in its path

    @property
    def name(self) -> str:
        return self.rel_path.rsplit("/", 1)[-1]

    @property
    def key(self) -> str:
        """What a widget or session state holds for this file (always valid UTF-8): entry_key(rel_path)."""
        return entry_key(self.rel_path)

    @property
    def shown(self) -> str:
        """The path as the page prints it: shown_name(rel_path)."""
        return shown_name(self.rel_path)


@dataclass(frozen=True)
class RunFolder:
    """A serving engine's profile folder in a listing (vLLM writes `rank<N>.<id>.pt.trace.json.gz` per worker and
    `<host>_<pid>.async_llm.<id>.pt.trace.json.gz` for its API server, by those names: parsers.ranks): one entry for
    the run, opened as `analyze DIR` opens the folder (its worker ranks, the API server's trace as their front end)."""

    rel_path: str  # the folder, relative to the root
    files: tuple[TraceFile, ...]

    @property
    def key(self) -> str:
        return entry_key(self.rel_path + "/")

    @property
    def shown(self) -> str:
        return shown_name(self.rel_path + "/")

    @property
    def size_bytes(self) -> int:
        return sum(f.size_bytes for f in self.files)

    @property
    def mtime_ns(self) -> int:
        return max(f.mtime_ns for f in self.files)

    @property
    def workers(self) -> int:
        return sum(1 for f in self.files if not FRONT_END_NAME.search(f.name))


@dataclass(frozen=True)
class Listing:
    traces: list[TraceFile]  # newest first, at most MAX_FILES
    notes: tuple[str, ...] = ()  # what was cut or is still to be looked at

    @property
    def entries(self) -> list[TraceFile | RunFolder]:
        """What the picker offers, newest first: each serving engine's profile folder as one run, other traces as
        files."""
        return group_runs(self.traces)


def group_runs(traces: list[TraceFile]) -> list[TraceFile | RunFolder]:
    """The traces with each folder holding an API server's trace and a worker rank's (by vLLM's names) as one
    RunFolder of every trace file directly in it; newest first."""
    by_folder: dict[str, list[TraceFile]] = {}
    for t in traces:
        by_folder.setdefault(t.rel_path.rpartition("/")[0], []).append(t)
    runs = {
        folder: RunFolder(folder, tuple(files))
        for folder, files in by_folder.items()
        if folder
        and any(FRONT_END_NAME.search(f.name) for f in files)
        and any(SERVING_WORKER_NAME.search(f.name) for f in files)
    }
    out: list[TraceFile | RunFolder] = [t for t in traces if t.rel_path.rpartition("/")[0] not in runs]
    out += list(runs.values())
    return sorted(out, key=lambda e: (-e.mtime_ns, e.rel_path))


def folder_files(root: Path, folder: Path) -> list[Path]:
    """The trace files of a run folder under the root (as `analyze DIR` lists them), each checked to lie inside the
    root (a link out of it is left out)."""
    from stepscope.parsers.ranks import find_trace_files

    root = Path(root).resolve()
    out = []
    for path in find_trace_files(resolve_within(root, os.path.relpath(folder, root))):
        try:
            resolve_within(root, os.path.relpath(path, root))
        except OutsideLogdirError:
            continue
        out.append(path)
    return out


def entry_key(rel: str) -> str:
    """A relative path as text a browser can carry: the path itself, or, when a name in it is not valid UTF-8
    (Python holds such bytes as lone surrogates, which Streamlit cannot send), "//" and the hex of its bytes."""
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        return _RAW_NAME + os.fsencode(rel).hex()
    return rel


def rel_of_key(key: str) -> str:
    """The relative path of an entry_key (ValueError when it is a "//" key that is not hex)."""
    if key.startswith(_RAW_NAME):
        return os.fsdecode(bytes.fromhex(key[len(_RAW_NAME) :]))
    return key


def shown_name(text: str) -> str:
    """A name for the page: each byte that is not valid UTF-8 as \\xNN, a bidirectional control as \\u202e
    (exporters.safe_text.plain), everything else as it is."""
    return plain(text)


def configured_logdir(argv: list[str] | None = None) -> Path | None:
    """The root from `--logdir DIR` (after `streamlit run app/streamlit_app.py --`), else STEPSCOPE_LOGDIR."""
    argv = sys.argv[1:] if argv is None else argv
    value = None
    for i, arg in enumerate(argv):
        if arg == "--logdir" and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--logdir="):
            value = arg.split("=", 1)[1]
    value = value or settings.raw(LOGDIR_ENV)
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
    """The root ("") and its sub-folders (see scan_folders)."""
    return scan_folders(root)[0]


def scan_folders(root: Path) -> tuple[list[str], tuple[str, ...]]:
    """(the root "" and its sub-folders, relative and sorted; notes on what was cut). Hidden folders and links
    are left out; at most MAX_FILES sub-folders (the first found, walking down) and MAX_VISITED entries looked at,
    files included: a folder of a million files costs one bounded walk, not a list of every name."""
    root = Path(root).resolve()
    out: list[str] = []
    visited = 0
    stack = [(str(root), 0)]
    while stack and len(out) < MAX_FILES and visited < MAX_VISITED:
        folder, depth = stack.pop()
        for entry in _entries(folder, MAX_VISITED - visited):
            visited += 1
            if entry.name.startswith(".") or not _is_folder(entry):
                continue
            out.append(os.path.relpath(entry.path, root).replace(os.sep, "/"))
            if depth + 1 < MAX_DEPTH:
                stack.append((entry.path, depth + 1))
            if len(out) >= MAX_FILES:
                break
    notes = []
    if len(out) >= MAX_FILES:
        notes.append(f"the first {MAX_FILES:,} folders are offered")
    elif visited >= MAX_VISITED:
        notes.append(f"the folder walk stopped after {MAX_VISITED:,} entries: the tree holds more")
    return ["", *sorted(out)], tuple(notes)


def _is_folder(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _entries(folder: str, most: int) -> list[os.DirEntry]:
    """At most `most` entries of a folder (none when it cannot be listed), read lazily: a folder of a million
    names is not read whole."""
    out = []
    try:
        with os.scandir(folder) as scan:
            for entry in scan:
                if len(out) >= most:
                    break
                out.append(entry)
    except OSError:
        pass
    return out


def list_traces(root: Path, folder: str = "") -> list[TraceFile]:
    """Traces in `folder` (relative to root) and its sub-folders, newest first (see scan_traces)."""
    return scan_traces(root, folder).traces


def scan_traces(root: Path, folder: str = "", sniffs: SniffCache | None = None) -> Listing:
    """Traces in `folder` and below, newest first, at most MAX_FILES of them, with notes on what was cut.

    Cheap enough to rerun every few seconds on a big tree: one stat per file with a trace suffix (at most
    MAX_CANDIDATES), newest first; a file's first bytes are read only when its (path, size, mtime, inode) is new
    to `sniffs` (the process's cache by default), at most MAX_NEW_SNIFFS per listing, and no more once MAX_FILES
    traces are found."""
    root = Path(root).resolve()
    sniffs = sniffs if sniffs is not None else _SNIFFS
    candidates, cut = _candidates(str(root), str(resolve_within(root, folder)))
    candidates.sort(key=lambda c: (-c[1].st_mtime_ns, c[0]))
    found: list[TraceFile] = []
    budget, pending, prefix = MAX_NEW_SNIFFS, 0, len(str(root).rstrip("/")) + 1
    for (path, st), known in zip(candidates, sniffs.get_many(candidates), strict=True):
        if known is None:
            if budget <= 0:
                pending += 1
                continue
            budget -= 1
            known = sniffs.put(path, st, _sniff_head(_head(Path(path))))
        fmt, rank = known
        if fmt is None:
            continue
        rel = path[prefix:]
        found.append(TraceFile(rel, st.st_size, st.st_mtime_ns, fmt, rank if rank is not None else _rank(rel)))
        if len(found) >= MAX_FILES:
            break
    notes = []
    if len(found) >= MAX_FILES:
        notes.append(f"only the newest {MAX_FILES:,} traces are listed: pick a sub-folder to see the others")
    if cut:
        notes.append(cut)
    if pending:
        notes.append(f"{pending:,} files not looked at yet: the list fills in as it refreshes")
    return Listing(found, tuple(notes))


def listing_stamp(root: Path, folder: str = "") -> tuple:
    """Changes whenever a trace appears, goes or changes: callers refresh their listing on it."""
    return tuple((t.rel_path, t.size_bytes, t.mtime_ns) for t in list_traces(root, folder))


def _candidates(root: str, start: str) -> tuple[list[tuple[str, os.stat_result]], str]:
    """(path, stat) of the regular files under `start` whose names look like traces, and a line saying where the
    walk was cut ("" when it was not): at most MAX_CANDIDATES such files, and at most MAX_VISITED entries of any
    kind looked at. Hidden entries, links to folders and names a trace never has (NOT_TRACE_NAMES) are skipped
    by name, before any stat; a link to a file is followed only when it stays inside the root. Strings and
    DirEntry stats, not Paths: a listing of 60k files is rerun every few seconds, and building a Path costs more
    than the stat."""
    out: list[tuple[str, os.stat_result]] = []
    folders = [(start, 0)]
    visited = 0
    while folders:
        folder, depth = folders.pop()
        entries = _entries(folder, MAX_VISITED - visited + 1)
        for entry in entries:
            visited += 1
            if visited > MAX_VISITED:
                return out, f"the walk stopped after {MAX_VISITED:,} entries: pick a sub-folder to see the others"
            found = _candidate(root, entry, depth, folders)
            if found is None:
                continue
            if len(out) >= MAX_CANDIDATES:
                return out, f"only {MAX_CANDIDATES:,} files were looked at: the folder holds more"
            out.append(found)
    return out, ""


def _candidate(root: str, entry: os.DirEntry, depth: int, folders: list) -> tuple[str, os.stat_result] | None:
    """(path, stat) of an entry that may be a trace, else None; a folder is queued on `folders` to be walked."""
    name = entry.name
    if name.startswith("."):
        return None
    try:
        if entry.is_dir(follow_symlinks=False):
            if depth < MAX_DEPTH:
                folders.append((entry.path, depth + 1))
            return None
        lower = name.lower()
        if not lower.endswith(SUFFIXES) or lower in NOT_TRACE_NAMES or lower.endswith(NOT_TRACE_ENDINGS):
            return None
        st = entry.stat(follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):  # listed under the link's name; its target must lie inside the root
            st = resolve_within(Path(root), os.path.relpath(entry.path, root)).stat()
    except (OSError, OutsideLogdirError):
        return None
    return (entry.path, st) if stat.S_ISREG(st.st_mode) else None


class SniffCache:
    """(format, rank) of files already read, keyed by (path, size, mtime_ns, inode): a file that changes is read
    again. Bounded (oldest entries go first) and safe to share between the server's session threads."""

    def __init__(self, max_entries: int = MAX_CANDIDATES) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple, tuple[str | None, int | None]] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _key(path: str, st: os.stat_result) -> tuple:
        return path, st.st_size, st.st_mtime_ns, st.st_ino

    def get(self, path: str, st: os.stat_result) -> tuple[str | None, int | None] | None:
        with self._lock:
            return self._entries.get(self._key(path, st))

    def get_many(self, files: list[tuple[str, os.stat_result]]) -> list[tuple[str | None, int | None] | None]:
        """get() for each (path, stat), under one lock."""
        with self._lock:
            entries = self._entries
            return [entries.get((p, st.st_size, st.st_mtime_ns, st.st_ino)) for p, st in files]

    def put(self, path: str, st: os.stat_result, value: tuple[str | None, int | None]):
        with self._lock:
            self._entries[self._key(path, st)] = value
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._entries)


_SNIFFS = SniffCache()  # the process's: every session lists the same files


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
