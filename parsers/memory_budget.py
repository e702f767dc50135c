"""The memory a trace read in pieces may use: STEPSCOPE_MEMORY_BUDGET_MB, by default a quarter of this machine's RAM.

Why a budget rather than a file-size limit: a plain JSON trace on disk is read in pieces (parsers/kineto), each piece
from the file into one reused buffer, and the frame, once written into the cache's entry, is mapped from there
(trace_cache/timelines.py), so the file's bytes are never held; what grows with the trace is its events (their
columns, the join's order, the analysis's derived frames) and its distinct names. So the budget bounds the events
such a read may hold, at BYTES_PER_EVENT each, with the bytes of its distinct strings priced as events (`weight`),
and a file over it is refused before its frame is built with one line that names the setting. Reads that must hold
the whole file (gzip, an upload, a file the pieces cannot be proved in) keep the file, decompression and event
limits (parsers.limits): those are the guards against decompression bombs and hostile counts.
"""

from __future__ import annotations

import os

from stepscope.contracts import settings
from .errors import TraceError

MiB = 1 << 20
BUDGET_ENV = "STEPSCOPE_MEMORY_BUDGET_MB"
# Peak resident memory of `analyze --json` (GNU time's %M, mapped entry pages included) over the events read in
# pieces, measured on bench/make_big_serving_trace.py's 5.2M-event trace: 815 MB, 157 bytes an event with the
# interpreter and libraries; rounded up so that the estimate errs on the side of refusing.
BYTES_PER_EVENT = 200
_FALLBACK_RAM = 8 << 30  # where the machine's memory cannot be read


def machine_memory_bytes() -> int:
    """This machine's physical memory (sysconf), else 8 GiB; no more than the process's address-space limit (a
    `ulimit -v`), so that the default budget stays within it too."""
    try:
        ram = int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        ram = _FALLBACK_RAM
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):
        return ram
    return ram if soft == resource.RLIM_INFINITY or soft <= 0 else min(ram, soft)


def memory_budget_bytes() -> int:
    """The budget in force: the setting (MB) when set, else a quarter of the machine's memory. A bad value is
    refused with one line (as the other limits are), never silently replaced."""
    raw = settings.raw(BUDGET_ENV)
    if raw is None:
        return machine_memory_bytes() // 4
    if not raw.isdigit() or int(raw) <= 0:
        raise TraceError(f"{BUDGET_ENV}={raw[:40]!r} is not a positive whole number of MB")
    return int(raw) * MiB


def events_within(budget_bytes: int) -> int:
    """The most events a read in pieces may hold within the budget."""
    return max(1, budget_bytes // BYTES_PER_EVENT)


def over_budget_error(events: int, budget_bytes: int, strings: int = 0) -> TraceError:
    """The one line for a trace whose events (and distinct strings' bytes, `string_bytes`) do not fit the budget."""
    names = f" and {strings / MiB:,.0f} MB of distinct names" if strings * STRING_COPIES >= MiB else ""
    return TraceError(
        f"the trace holds about {events:,} events{names}, more than the {budget_bytes // MiB:,} MB memory budget "
        f"holds (about {events_within(budget_bytes):,} events; raise {BUDGET_ENV} to allow it)"
    )


# Names are kept up to 16,384 characters, in several copies along a read in pieces (the decoder's strings, the
# piece's table, the other process's header, the joined table, the frame's categories, the Arrow dictionary of the
# cache entry and its mapped copy): so each distinct string is priced at STRING_COPIES times its length and a
# Python object's overhead, and a trace of long distinct names is refused like one of too many events.
STRING_COPIES = 8
STRING_OVERHEAD = 64


def string_bytes(strings) -> int:
    """What distinct strings cost a read, before the copies: their characters and a Python object's overhead each."""
    return sum(map(len, strings)) + STRING_OVERHEAD * len(strings)


def weight(events: int, strings: int) -> int:
    """Events and `strings` bytes (string_bytes) as a number of events at BYTES_PER_EVENT: what the budget bounds."""
    return events + -(-strings * STRING_COPIES // BYTES_PER_EVENT)
