"""Every STEPSCOPE_* setting, read here and nowhere else (README's "Settings" lists them, from this table).

Why one module: a setting read in several places is read in several ways (one trims spaces, one does not; one
treats 0 as off, one as a limit), and a setting nobody lists is one nobody finds. Each is read when asked, not at
import, so a test or a server changing the environment is seen at once. Standard library only: every stage (the
collectors, the readers, the cache, the app) may import this.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Setting:
    name: str
    default: str  # as README shows it
    meaning: str


SETTINGS: tuple[Setting, ...] = (
    Setting("STEPSCOPE_CACHE_DIR", "~/.cache/stepscope", "the on-disk cache: parsed traces, answers, stat index"),
    Setting("STEPSCOPE_CACHE_MAX_MB", "2048", "the cache's size bound (least recently used entries go first)"),
    Setting("STEPSCOPE_MAX_FILE_MB", "2048", "largest trace file read whole (gzip, uploads), on disk"),
    Setting("STEPSCOPE_MAX_DECOMPRESSED_MB", "2048", "largest trace read whole, after gzip"),
    Setting("STEPSCOPE_MAX_EVENTS", "20000000", "most events a trace read whole may hold (set: every trace)"),
    Setting(
        "STEPSCOPE_MEMORY_BUDGET_MB",
        "a quarter of RAM",
        "memory a plain JSON trace read in pieces may use (any file size; events at 200 B each)",
    ),
    Setting("STEPSCOPE_PARSE_WORKERS", "2", "processes that decode a big JSON trace (1: one process)"),
    Setting("STEPSCOPE_TRACE_PROCESSOR", "(on PATH)", "the Perfetto trace_processor binary for Perfetto imports"),
    Setting("STEPSCOPE_LOGDIR", "(none)", "a folder of traces the app lists (`--logdir DIR`); runs go there too"),
    Setting("STEPSCOPE_RUNS_DIR", "the log directory, else runs", "where the Run page writes runs, if not the logdir"),
    Setting("STEPSCOPE_SAMPLES_DIR", "sample_traces", "the samples the app opens on"),
    Setting("STEPSCOPE_FLEET_ROOT", "the runs folder", "the folder under which Fleet opens batch outputs"),
    Setting("STEPSCOPE_ALLOW_REMOTE_RUNS", "0", "1: the Run page and path inputs stay when listening beyond loopback"),
    Setting("STEPSCOPE_MODELS_DIR", "your home folder", "local model folders the Run page may load must lie inside it"),
    Setting("STEPSCOPE_MAX_NEW_TOKENS", "1024", "bound on new tokens (Run page; CLI run unless --no-limits)"),
    Setting("STEPSCOPE_MAX_BATCH", "64", "bound on the batch (Run page; CLI run and sweep unless --no-limits)"),
    Setting(
        "STEPSCOPE_MAX_PROMPT_TOKENS",
        "8192",
        "bound on the prompt, counted or typed, and a sweep's longest (Run page; CLI unless --no-limits)",
    ),
    Setting(
        "STEPSCOPE_MAX_REQUESTS", "64", "bound on requests, warm-ups, sweep points and repeats (CLI unless --no-limits)"
    ),
    Setting("STEPSCOPE_RUN_TIMEOUT_S", "900", "a profiled run from the Run page is ended after this many seconds"),
    Setting("STEPSCOPE_RUN_MEMORY_MB", "half of RAM", "a profiled run from the Run page is ended past this memory"),
    Setting("STEPSCOPE_TIMING_LOG", "(none)", "a file the app appends stage timings to (bench/browser_open_bench.py)"),
    Setting("STEPSCOPE_DEBUG", "0", "1: the collectors print a traceback under their one-line error"),
)
NAMES = frozenset(s.name for s in SETTINGS)


def raw(name: str) -> str | None:
    """The setting's text, stripped; None when unset or empty."""
    if name not in NAMES:
        raise KeyError(f"{name} is not a Stepscope setting (contracts/settings.py lists them)")
    value = os.environ.get(name, "").strip()
    return value or None


def text(name: str, default: str | None = None) -> str | None:
    return raw(name) or default


def path(name: str, default: str | os.PathLike | None = None) -> Path | None:
    value = raw(name)
    if value is None:
        return None if default is None else Path(default).expanduser()
    return Path(value).expanduser()


def flag(name: str) -> bool:
    """On for 1, true, yes, on (any case); off otherwise."""
    return (raw(name) or "").lower() in ("1", "true", "yes", "on")


def positive_int(name: str, default: int) -> int:
    """A whole number above zero, else the default (a bad value never fails a read: it is the default)."""
    value = raw(name)
    if value is None or not value.isdigit() or int(value) <= 0:
        return default
    return int(value)


# Bounds on one run: the Run page's form maxima, its server-side check, and the CLI's `run` and `sweep` (unless
# --no-limits): one table, so the page and the command line refuse the same things.
RUN_BOUNDS = {
    "new_tokens": ("STEPSCOPE_MAX_NEW_TOKENS", 1024),
    "batch": ("STEPSCOPE_MAX_BATCH", 64),
    "prompt_tokens": ("STEPSCOPE_MAX_PROMPT_TOKENS", 8192),
    "requests": ("STEPSCOPE_MAX_REQUESTS", 64),
}
# A typed prompt is bounded before any tokenizer runs, by its UTF-8 bytes: a preset maps one byte to one token
# (exact); a model's tokenizer makes at most one token per byte, and English averages about 4 bytes a token, so
# 8 bytes a token refuses only prompts far past the bound.
TOKENIZER_BYTES_PER_TOKEN = 8


def run_bound(name: str) -> int:
    env, default = RUN_BOUNDS[name]
    return positive_int(env, default)


def run_limits_problem(counts: dict[str, int], prompt: str | None = None, tokenizer: bool = False) -> str | None:
    """Why a run of these sizes may not start (one line naming the setting that raises the bound), None when it
    may. `counts` maps RUN_BOUNDS names (requests also bounds warm-ups, sweep points, repeats) to values; a typed
    `prompt` is priced by its UTF-8 bytes, per byte (presets) or TOKENIZER_BYTES_PER_TOKEN (a model's tokenizer)."""
    for label, value in counts.items():
        name = label if label in RUN_BOUNDS else "requests"
        env, _ = RUN_BOUNDS[name]
        lowest = 0 if label in ("warmup",) else 1
        if not lowest <= value <= run_bound(name):
            return f"{label.replace('_', ' ')} must be {lowest}..{run_bound(name)} ({env} raises it)"
    if prompt is not None:
        size = len(prompt.encode("utf-8", "surrogatepass"))
        allowed = run_bound("prompt_tokens") * (TOKENIZER_BYTES_PER_TOKEN if tokenizer else 1)
        if size > allowed:
            per = f"{TOKENIZER_BYTES_PER_TOKEN} bytes a token" if tokenizer else "one token a byte"
            return (
                f"the prompt is {size:,} bytes, past the {allowed:,} that STEPSCOPE_MAX_PROMPT_TOKENS="
                f"{run_bound('prompt_tokens')} allows at {per} (STEPSCOPE_MAX_PROMPT_TOKENS raises it)"
            )
    return None


def run_timeout_s() -> int:
    """The wall-clock bound of a profiled run in its child process (collectors.child)."""
    return positive_int("STEPSCOPE_RUN_TIMEOUT_S", 900)


def run_memory_mb() -> int:
    """The memory bound (data segment) of a profiled run's child process: half of RAM unless set."""
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        ram = 8 << 30
    return positive_int("STEPSCOPE_RUN_MEMORY_MB", max(ram // 2 >> 20, 512))


def runs_dir(default: str | os.PathLike) -> Path:
    """Where runs are written and past runs listed: STEPSCOPE_RUNS_DIR, else the log directory (STEPSCOPE_LOGDIR:
    one folder of traces, as TensorBoard's --logdir is), else `default`."""
    return path("STEPSCOPE_RUNS_DIR") or path("STEPSCOPE_LOGDIR") or Path(default)
