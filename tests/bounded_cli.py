"""Run the command line as the issue's bar has it: a child process under `ulimit -v 3000000` (3 GB of address
space), killed after 20 s, its own cache folder. `assert_sane_outcome` is the bar itself: exit 0, or exit 2 and
exactly one `error:` line that is neither an internal error nor out of memory. `in_child` runs one call in a forked
child with a wall limit: a regex that backtracks holds the GIL, so a thread could not even time it out.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import ROOT

ADDRESS_SPACE_BYTES = 3_000_000 * 1024  # ulimit -v counts kB
WALL_S = 20.0
BAD_WORDS = ("internal error", "out of memory", "Traceback")


@dataclass(frozen=True)
class Outcome:
    status: int  # 124 when it ran past the wall limit, as timeout(1) says
    stdout: str
    stderr: str

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("error:")]


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))


def run_bounded(*args: str | os.PathLike, cache_dir: Path, timeout: float = WALL_S, env: dict | None = None) -> Outcome:
    """`python -m app.cli ARGS` with the issue's limits; status 124 when killed at the wall limit."""
    environ = {**os.environ, "STEPSCOPE_CACHE_DIR": str(cache_dir), **(env or {})}
    argv = [sys.executable, "-m", "app.cli", *map(os.fspath, args)]
    try:
        done = subprocess.run(
            argv, cwd=ROOT, capture_output=True, timeout=timeout, env=environ, preexec_fn=_limit_memory, check=False
        )
    except subprocess.TimeoutExpired as exc:
        return Outcome(124, _text(exc.stdout), _text(exc.stderr))
    return Outcome(done.returncode, _text(done.stdout), _text(done.stderr))


def _text(raw: bytes | None) -> str:
    return (raw or b"").decode("utf-8", "replace")


def assert_sane_outcome(outcome: Outcome) -> None:
    """Exit 0 with no error line, or exit 2 with exactly one `error:` line that is a user error."""
    assert outcome.status in (0, 2), (outcome.status, outcome.stderr[-2000:])
    for word in BAD_WORDS:
        assert word not in outcome.stderr, outcome.stderr[-2000:]
    if outcome.status == 2:
        assert len(outcome.error_lines) == 1 and outcome.stdout == "", outcome.stderr[-2000:]
    else:
        assert not outcome.error_lines, outcome.stderr[-2000:]


def in_child(seconds: float, fn, *args):
    """fn(*args) in a forked child: its value, or its exception raised here; AssertionError when it is still
    running after `seconds` (the child is killed)."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)

    def call() -> None:
        try:
            send.send(("value", fn(*args)))
        except BaseException as exc:  # handed to the parent, which raises it
            send.send(("error", exc))

    child = context.Process(target=call, daemon=True)
    child.start()
    try:
        if not receive.poll(seconds):
            raise AssertionError(f"{getattr(fn, '__name__', fn)} was still running after {seconds} s")
        kind, value = receive.recv()
    finally:
        child.kill()
        child.join()
    if kind == "error":
        raise value
    return value
