"""What a batch reads: trace files under a folder (recursively) or matching a glob, each keyed by its content hash.

The key is the sha256 of the file's bytes, as the app's parse cache uses, so the same trace copied to two
places is analysed once, and a second batch over the same folder knows what it has already done.

A folder whose trace files all name a rank (vLLM ``rank-N``, SGLang ``TP-N-...``, torchrun ``rank_N``; the
patterns of parsers/ranks.py), two or more, distinct, is one multi-rank run: one input, keyed by the hashes of
its files, analysed together (one row per rank). A serving engine's profile folder (vLLM's worker ranks and its API
server's ``<host>_<pid>.async_llm.<id>...`` trace, by vLLM's names) is one input too, read as ``analyze DIR`` reads
it: one row per worker rank, with the run's request figures (issue 41).
"""

from __future__ import annotations

import glob
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from stepscope.contracts.safe_read import open_regular
from stepscope.parsers.errors import TraceError
from stepscope.parsers.ranks import (
    FRONT_END_NAME,
    NOT_TRACES,
    SERVING_WORKER_NAME,
    TRACE_SUFFIXES,
    find_trace_files,
    rank_from_name,
)

HASH_CHUNK = 1 << 22


@dataclass(frozen=True)
class BatchInput:
    key: str  # sha256 of the file bytes
    path: str
    size_bytes: int
    copies: int = 1  # input paths with these same bytes (analysed once)


def sha256_of_file(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(open_regular(path), "rb") as handle:  # a FIFO or a device swapped in: refused, never blocks
        for chunk in iter(lambda: handle.read(HASH_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def discover(source: str) -> list[Path]:
    """Trace files: every file with a trace suffix under a folder (recursive), or the files a glob matches."""
    root = Path(source)
    if root.is_dir():
        paths = [p for p in root.rglob("*") if p.is_file()]
    elif root.is_file():
        paths = [root]
    else:
        paths = [Path(p) for p in glob.glob(source, recursive=True) if Path(p).is_file()]
    return sorted(
        p for p in paths if p.name not in NOT_TRACES and not p.name.startswith(".") and p.name.endswith(TRACE_SUFFIXES)
    )


def rank_run_folders(paths: list[Path]) -> list[Path]:
    """Folders whose trace files (all of them, as analyze DIR reads them) name two or more distinct ranks."""
    by_folder: dict[Path, list[Path]] = {}
    for p in paths:
        by_folder.setdefault(p.parent, []).append(p)
    runs = []
    for folder, files in sorted(by_folder.items()):
        ranks = [rank_from_name(p.name) for p in files]
        if len(files) < 2 or any(r is None for r in ranks) or len({r[0] for r in ranks}) != len(files):
            continue
        try:
            if sorted(find_trace_files(folder)) == sorted(files):
                runs.append(folder)
        except (OSError, TraceError):  # an unlistable folder: its files stay single inputs
            continue
    return runs


def serving_folders(paths: list[Path]) -> list[Path]:
    """Folders holding an API server's trace and a worker rank's (vLLM's names, parsers.ranks), every trace file of
    the folder (as analyze DIR reads it) among `paths`."""
    by_folder: dict[Path, list[Path]] = {}
    for p in paths:
        by_folder.setdefault(p.parent, []).append(p)
    runs = []
    for folder, files in sorted(by_folder.items()):
        front = any(FRONT_END_NAME.search(p.name) for p in files)
        if not front or not any(SERVING_WORKER_NAME.search(p.name) for p in files):
            continue
        try:
            if sorted(find_trace_files(folder)) == sorted(files):
                runs.append(folder)
        except (OSError, TraceError):
            continue
    return runs


def run_key(files: list[Path]) -> tuple[str, int]:
    """(key, total bytes) of a rank run: the sha256 over its files' names and content hashes."""
    digest = hashlib.sha256(b"rank-run\n")
    size = 0
    for p in sorted(files, key=lambda q: q.name):
        digest.update(f"{p.name}:{sha256_of_file(p)}\n".encode())
        size += p.stat().st_size
    return digest.hexdigest(), size


def keyed_inputs(paths: list[Path]) -> tuple[list[BatchInput], list[tuple[str, str]]]:
    """One input per distinct content (the first path, or the first beside a run.json), a rank-run folder as
    one input, and (path, reason) for files that could not be read."""
    by_key: dict[str, BatchInput] = {}
    unreadable: list[tuple[str, str]] = []
    runs = sorted(set(rank_run_folders(paths)) | set(serving_folders(paths)))
    in_runs = set(runs)
    items = [(folder, [p for p in paths if p.parent == folder]) for folder in runs]
    items += [(p, None) for p in paths if p.parent not in in_runs]
    for p, run_files in items:
        try:
            key, size = run_key(run_files) if run_files else (sha256_of_file(p), p.stat().st_size)
        except OSError as exc:
            unreadable.append((str(p), f"cannot read the file: {exc.strerror or exc}"))
            continue
        seen = by_key.get(key)
        if seen is None:
            by_key[key] = BatchInput(key, str(p), size)
        else:  # the copy beside a run.json is the one whose device, model and mode are known
            better = (p.parent / "run.json").is_file() and not (Path(seen.path).parent / "run.json").is_file()
            by_key[key] = BatchInput(key, str(p) if better else seen.path, size, seen.copies + 1)
    return list(by_key.values()), unreadable


def memory_need_bytes(path: str, size_bytes: int) -> int:
    """Memory to analyse one input: ~2.5x the JSON (a 200 MB trace needs ~0.5 GB), gzip expanding ~10x, +300 MB."""
    expanded = size_bytes * (10 if path.endswith(".gz") or Path(path).is_dir() else 1)  # a rank folder: gzip
    return int(2.5 * expanded) + (300 << 20)
