"""Optional stage timings for benchmarks: with STEPSCOPE_TIMING_LOG=FILE, each timed stage appends one JSON line
({"stage", "start", "end"} in time.time() seconds) to FILE; without it, nothing is written and the cost is nil.

bench/browser_open_bench.py reads them to split the browser's time to first timeline into parse, analysis and
figure build, measured in the same run as the click.
"""

from __future__ import annotations

import contextlib
import json
import time

from ..contracts import settings

TIMING_ENV = "STEPSCOPE_TIMING_LOG"


@contextlib.contextmanager
def stage(name: str):
    target = settings.raw(TIMING_ENV)
    if not target:
        yield
        return
    start = time.time()
    try:
        yield
    finally:
        with contextlib.suppress(OSError), open(target, "a") as log:
            log.write(json.dumps({"stage": name, "start": start, "end": time.time()}) + "\n")


def mark(name: str) -> None:
    """A moment rather than a stage (start == end), e.g. when a page's script starts."""
    with stage(name):
        pass


class StageTimer:
    """A progress callback that times the stages a long call reports (the front door's "read", "analyse", ...):
    each stage lasts until the next one starts, or until done(). `names` renames them for the log."""

    def __init__(self, names: dict[str, str] | None = None) -> None:
        self.names = names or {}
        self.current: tuple[str, float] | None = None

    def stage(self, name: str) -> None:
        self.done()
        self.current = (self.names.get(name, name), time.time())

    def done(self) -> None:
        if self.current is None:
            return
        name, start = self.current
        self.current = None
        target = settings.raw(TIMING_ENV)
        if target:
            with contextlib.suppress(OSError), open(target, "a") as log:
                log.write(json.dumps({"stage": name, "start": start, "end": time.time()}) + "\n")
