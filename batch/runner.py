"""A batch end to end: find inputs, skip what the output already has, run the rest, write tables as it goes."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from .inputs import discover, keyed_inputs
from .tables import TableSet
from .work import error_result

FLUSH_EVERY = 64  # results
FLUSH_SECONDS = 20.0


@dataclass(frozen=True)
class BatchReport:
    inputs: int  # distinct contents found
    skipped: int  # already in the output (resume)
    analysed: int
    errors: int
    seconds: float
    runner: str


class Progress:
    """A live count and rate on one terminal line (stderr), at most a few updates a second."""

    def __init__(
        self, total: int, stream: TextIO | None = None, callback: Callable[[int, int, int], None] | None = None
    ) -> None:
        self.total, self.stream, self.callback = total, stream, callback
        self.done = self.errors = 0
        self.started = self.last = time.perf_counter()

    def step(self, ok: bool) -> None:
        self.done += 1
        self.errors += not ok
        now = time.perf_counter()
        if self.callback:  # e.g. the app's progress bar: (done, total, errors)
            self.callback(self.done, self.total, self.errors)
        if self.stream and (now - self.last > 0.25 or self.done == self.total):
            self.last = now
            rate = self.done / max(now - self.started, 1e-9)
            print(
                f"\r{self.done}/{self.total} traces, {rate:.1f}/s, {self.errors} errors",
                end="",
                file=self.stream,
                flush=True,
            )

    def close(self) -> None:
        if self.stream and self.total:
            print(file=self.stream, flush=True)


def run_batch(
    source: str,
    out_dir: str,
    workers: int | None = None,
    ray_address: str | None = None,
    progress: TextIO | None = sys.stderr,
    crash_once_dir: str | None = None,
    on_progress: Callable[[int, int, int], None] | None = None,
) -> BatchReport:
    started = time.perf_counter()
    tables = TableSet(out_dir)
    inputs, unreadable = keyed_inputs(discover(source))
    todo = [i for i in inputs if i.key not in tables.done_keys]
    meter = Progress(len(todo), progress, on_progress)
    if ray_address:
        from .ray_runner import run_ray

        results = run_ray(todo, ray_address, crash_once_dir)
        runner = "ray"
    else:
        from .local_runner import pool_size, run_local

        results = run_local(todo, pool_size(todo, workers), crash_once_dir) if todo else iter(())
        runner = "local"
    analysed = errors = 0
    last_flush = time.perf_counter()
    try:
        for result in results:
            tables.add(result)
            ok = result["trace"]["status"] == "ok"
            analysed += 1
            errors += not ok
            meter.step(ok)
            if len(tables.pending["traces"]) >= FLUSH_EVERY or time.perf_counter() - last_flush > FLUSH_SECONDS:
                tables.flush()
                last_flush = time.perf_counter()
    finally:
        tables.flush()  # what finished is kept even when the batch is interrupted
        meter.close()
    for path, reason in unreadable:  # files that vanished or cannot be opened: keyed by path, not content
        import hashlib

        key = "unreadable:" + hashlib.sha256(path.encode()).hexdigest()
        if key not in tables.done_keys:
            tables.add(error_result(key, path, 0, 1, reason))
            errors += 1
    tables.flush()
    return BatchReport(len(inputs), len(inputs) - len(todo), analysed, errors, time.perf_counter() - started, runner)
