"""Who can reach the app, and what they may do from there.

Streamlit's own default listens on every interface, and nothing in the app asks who is there: anyone who
reaches the port could start generation runs on the GPU, fill the disk with runs and sweeps, and point
"Local model folder" at any path. So the app listens on 127.0.0.1 (.streamlit/config.toml); listening
elsewhere is an explicit `--server.address`, warned about at start. Beyond localhost the Run page and
every path input are off unless STEPSCOPE_ALLOW_REMOTE_RUNS=1; path inputs stay inside configured roots;
runs are bounded (tokens, batch) and one at a time (collectors' device lock).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from stepscope.contracts import settings

LOCAL_ADDRESSES = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
ALLOW_REMOTE_ENV = "STEPSCOPE_ALLOW_REMOTE_RUNS"
MODELS_DIR_ENV = "STEPSCOPE_MODELS_DIR"
_warned = False


def listen_address() -> str:
    """The address Streamlit serves on ("" means every interface, Streamlit's own default)."""
    try:
        import streamlit as st

        return str(st.get_option("server.address") or "")
    except Exception:  # outside a Streamlit runtime: nothing is listening
        return "127.0.0.1"


def reachable_beyond_localhost() -> bool:
    return listen_address().strip() not in LOCAL_ADDRESSES


def remote_runs_allowed() -> bool:
    """Runs and path inputs: always on localhost; beyond it only when the operator set the env var."""
    return not reachable_beyond_localhost() or settings.flag(ALLOW_REMOTE_ENV)


def warn_if_exposed() -> str | None:
    """The start-up warning when the app listens beyond localhost (printed once per process), else None."""
    global _warned
    if not reachable_beyond_localhost():
        return None
    address = listen_address() or "every interface"
    text = (
        f"Stepscope listens on {address}: anyone who reaches the port can read the traces it lists. "
        + ("Runs and path inputs are ON (" if remote_runs_allowed() else "Runs and path inputs are off (set ")
        + f"{ALLOW_REMOTE_ENV}=1{')' if remote_runs_allowed() else ' to allow them)'}."
    )
    if not _warned:
        print(f"warning: {text}", file=sys.stderr)
        _warned = True
    return text


def model_roots() -> list[Path]:
    """Folders a "Local model folder" may be in: STEPSCOPE_MODELS_DIR (os.pathsep-separated), else the home folder."""
    raw = settings.raw(MODELS_DIR_ENV)
    roots = [Path(p).expanduser() for p in raw.split(os.pathsep) if p.strip()] if raw else [Path.home()]
    return [r.resolve() for r in roots]


def inside_roots(path: str | Path, roots: list[Path]) -> bool:
    """Whether `path`, with every symlink and '..' resolved, lies inside one of the roots."""
    try:
        resolved = Path(path).expanduser().resolve()
    except (OSError, RuntimeError, ValueError):
        return False
    return any(resolved == root or root in resolved.parents for root in roots)


def run_bound(name: str) -> int:
    return settings.run_bound(name)


def run_spec_problem(
    new_tokens: int, batch: int, prompt_tokens: int, model: str | None, prompt: str | None = None
) -> str | None:
    """Why a run may not start (bounds, a typed prompt past the bound, a model path outside the roots), None when
    it may. The bounds are contracts.settings', the same the CLI's `run` applies."""
    counts = {"new_tokens": new_tokens, "batch": batch, "prompt_tokens": prompt_tokens}
    problem = settings.run_limits_problem(counts, prompt, tokenizer=model is not None)
    if problem:
        return problem
    if model is not None:
        roots = model_roots()
        if not inside_roots(model, roots):
            return (
                f"the model folder must be inside {', '.join(map(str, roots))} "
                f"({MODELS_DIR_ENV} sets the allowed folders)"
            )
    return None
