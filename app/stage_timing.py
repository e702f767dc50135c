"""Optional stage timings for benchmarks: with STEPSCOPE_TIMING_LOG=FILE, each timed stage appends one JSON line
({"stage", "start", "end"} in time.time() seconds) to FILE; without it, nothing is written and the cost is nil.

bench/browser_open_bench.py reads them to split the browser's time to first timeline into parse, analysis and
figure build, measured in the same run as the click.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable

from stepscope.contracts import settings

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
        name = name.partition(" ")[0]  # "segment 1234567": the stage's word
        name = self.names.get(name, name)
        if self.current is not None and self.current[0] == name:
            return  # analysis's own stages (segment, measure, anatomy) are one "analysis" in the log
        self.done()
        self.current = (name, time.time())

    def done(self) -> None:
        if self.current is None:
            return
        name, start = self.current
        self.current = None
        target = settings.raw(TIMING_ENV)
        if target:
            with contextlib.suppress(OSError), open(target, "a") as log:
                log.write(json.dumps({"stage": name, "start": start, "end": time.time()}) + "\n")


# What each of the front door's stages (analysis.front_door.Progress) says while it runs; "segment" names the
# events read, which the stage's word carries ("segment 1234567").
STAGE_WORDS = {
    "read": "Reading the trace",
    "segment": "Cutting {detail} events into steps",
    "measure": "Measuring steps, gaps and findings",
    "anatomy": "Step anatomy: categories and layers",
    "model": "The model's expected figures",
    "report": "Writing the answer",
    "draw": "Drawing the figures",
}


class StageLog:
    """The stages of one long open as they go: the one running now, and what each finished one took, so that a
    user watching a 20-second open sees which part is slow (the page's progress line, the CLI's)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.started = clock()
        self.took: list[tuple[str, float]] = []
        self.current: tuple[str, str, float] | None = None  # (stage, detail, start)

    def __call__(self, stage: str) -> None:
        word, _, detail = stage.partition(" ")
        self.finish()
        self.current = (word, detail, self.clock())

    def finish(self) -> None:
        if self.current is not None:
            word, _, start = self.current
            self.took.append((word, self.clock() - start))
            self.current = None

    def elapsed(self) -> float:
        return self.clock() - self.started

    def message(self) -> str:
        """ "Cutting 1,234,567 events into steps… (read 8.1 s)": what runs now, then what ran and took how long."""
        done = self.took_text()
        if self.current is None:
            return done
        word, detail, _ = self.current
        detail = f"{int(detail):,}" if detail.isdigit() else "the"
        now = STAGE_WORDS.get(word, word).format(detail=detail)
        return f"{now}…" + (f" ({done})" if done else "")

    def took_text(self) -> str:
        return ", ".join(f"{word} {_seconds(took)}" for word, took in self.took)


def _seconds(took: float) -> str:
    return f"{took * 1000:.0f} ms" if took < 0.1 else f"{took:.1f} s"
