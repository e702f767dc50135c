"""One profiled run per device at a time: two runs on one GPU (or CPU) would distort each other's timings."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

from .errors import CollectorError


def _lock_name(device: torch.device) -> str:
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return f"cuda{index}"
    return device.type


@contextlib.contextmanager
def device_lock(runs_dir: Path, device: torch.device, on_wait: Callable[[str], None]) -> Iterator[None]:
    """Hold an exclusive flock on ``runs_dir/.lock-DEVICE``; tell ``on_wait`` why we block if we must."""
    name = _lock_name(device)
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CollectorError(f"cannot create the runs folder {runs_dir}: {exc}") from exc
    with open(runs_dir / f".lock-{name}", "a+") as lock_file:
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            on_wait(f"waiting for another run on {name} to finish")
            fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)
