"""What a batch reads: trace files under a folder (recursively) or matching a glob, each keyed by its content hash.

The key is the sha256 of the file's bytes, as the app's parse cache uses, so the same trace copied to two
places is analysed once, and a second batch over the same folder knows what it has already done.
"""

from __future__ import annotations

import glob
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from parsers.ranks import NOT_TRACES, TRACE_SUFFIXES

HASH_CHUNK = 1 << 22


@dataclass(frozen=True)
class BatchInput:
    key: str  # sha256 of the file bytes
    path: str
    size_bytes: int
    copies: int = 1  # input paths with these same bytes (analysed once)


def sha256_of_file(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
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


def keyed_inputs(paths: list[Path]) -> tuple[list[BatchInput], list[tuple[str, str]]]:
    """One input per distinct content (the first path, or the first beside a run.json), and (path, reason)
    for files that could not be read."""
    by_key: dict[str, BatchInput] = {}
    unreadable: list[tuple[str, str]] = []
    for p in paths:
        try:
            key, size = sha256_of_file(p), p.stat().st_size
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
    """Memory to analyse one trace: ~2.5x the JSON (a 200 MB trace needs ~0.5 GB), gzip expanding ~10x, +300 MB."""
    expanded = size_bytes * (10 if path.endswith(".gz") else 1)
    return int(2.5 * expanded) + (300 << 20)
