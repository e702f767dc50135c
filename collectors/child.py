"""A profiled generation in a child process, so that a run cannot stall the process that asked for it.

The Run page used to call collectors.run in the Streamlit server's own process: a model that grew past the memory
or a generation that ran for minutes held every session of the server. Here the run is a child (`python -m
stepscope.collectors.child`, given the RunSpec as JSON on stdin) at a lower priority (nice), with an address-space
bound (STEPSCOPE_RUN_MEMORY_MB, default half of RAM) and a wall-clock bound (STEPSCOPE_RUN_TIMEOUT_S, default 900);
its progress comes back as one JSON line per stage on stdout, and the parent's `should_stop` ends it at once (the
Run page's Stop button). Every failure reaches the caller as one CollectorError line.
"""

from __future__ import annotations

import dataclasses
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from stepscope.collectors.errors import CollectorError
from stepscope.contracts import settings

NICE = 10
POLL_S = 0.25
_MAX_LINE = 1 << 16


def _package_root() -> Path:
    """The folder that holds the `stepscope` package: the checkout's root, or site-packages when installed."""
    here = Path(__file__).resolve()
    return here.parents[1] if (here.parents[1] / "stepscope").is_dir() else here.parents[2]


def run_in_child(
    spec,
    out_dir: str | os.PathLike,
    progress: Callable[[str, int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Path:
    """Run collectors.run.run_profiled_generation(spec, out_dir) in a child; the new run folder, else
    CollectorError (one line: the child's own error, a timeout, the memory bound, or "stopped")."""
    timeout_s = settings.run_timeout_s()
    memory_mb = settings.run_memory_mb()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(_package_root()), os.environ.get("PYTHONPATH", "")]))
    request = json.dumps({"spec": dataclasses.asdict(spec), "out_dir": str(out_dir), "memory_mb": memory_mb})
    child = subprocess.Popen(
        [sys.executable, "-m", "stepscope.collectors.child"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        # its own process group (a stop ends its helpers too), in the server's session: where the kernel groups
        # processes by session for scheduling (autogroup, on by default in many Linux distributions), a new session
        # would get an equal share of the CPU whatever its nice, taking half the machine from the server
        process_group=0,
    )
    try:
        assert child.stdin is not None
        child.stdin.write(request.encode())
        child.stdin.close()
        outcome = _follow(child, progress, should_stop, time.monotonic() + timeout_s)
    finally:
        _end(child)
    if outcome.get("done"):
        return Path(outcome["done"])
    if outcome.get("error"):
        raise CollectorError(outcome["error"])
    if outcome.get("stopped"):
        raise CollectorError("the run was stopped")
    if outcome.get("timeout"):
        raise CollectorError(f"the run took longer than STEPSCOPE_RUN_TIMEOUT_S={timeout_s} s and was ended")
    tail = (child.stderr.read(4096).decode(errors="replace") if child.stderr else "").strip().splitlines()
    if child.returncode in (-signal.SIGKILL, -signal.SIGSEGV) or any("MemoryError" in t for t in tail):
        raise CollectorError(f"the run passed STEPSCOPE_RUN_MEMORY_MB={memory_mb} and was ended")
    raise CollectorError(f"the run's process ended without an answer (exit {child.returncode}): {tail[-1:]}")


def _follow(child, progress, should_stop, deadline: float) -> dict:
    """Read the child's JSON lines until its answer, a stop, the deadline or its end."""
    assert child.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(child.stdout, selectors.EVENT_READ)
    buffer = b""
    while True:
        if should_stop is not None and should_stop():
            return {"stopped": True}
        if time.monotonic() > deadline:
            return {"timeout": True}
        if not selector.select(POLL_S):
            if progress is not None:
                progress("", 0, 0)  # a heartbeat: the page's Stop is seen between stages too
            continue
        chunk = os.read(child.stdout.fileno(), _MAX_LINE)
        if not chunk:
            child.wait()
            return {}
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            message = _message(line)
            if "progress" in message and progress is not None:
                stage, done, total = message["progress"]
                progress(str(stage), int(done), int(total))
            elif "done" in message or "error" in message:
                return message


def _message(line: bytes) -> dict:
    try:
        message = json.loads(line)
    except ValueError:
        return {}
    return message if isinstance(message, dict) else {}


def _end(child: subprocess.Popen) -> None:
    if child.poll() is None:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            child.kill()
    child.wait()


def _child_main() -> int:
    """In the child: bound itself, run, answer on stdout (one JSON line each)."""
    import resource

    os.nice(NICE)
    request = json.loads(sys.stdin.read())
    limit = int(request["memory_mb"]) << 20
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    real_stdout = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray prints of libraries go to stderr, never into the answer

    def say(message: dict) -> None:
        real_stdout.write(json.dumps(message) + "\n")

    from stepscope.collectors.run import RunSpec, _quiet_libraries, run_profiled_generation

    _quiet_libraries()
    try:
        spec = RunSpec(**request["spec"])
        folder = run_profiled_generation(spec, request["out_dir"], lambda s, d, t: say({"progress": [s, d, t]}))
    except CollectorError as exc:
        say({"error": str(exc)})
        return 2
    except MemoryError:
        say({"error": f"the run passed STEPSCOPE_RUN_MEMORY_MB={limit >> 20} and was ended"})
        return 2
    say({"done": str(folder)})
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())
