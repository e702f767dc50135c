"""Run batch work in a local process pool sized to the cores and to memory; a worker that dies is replaced.

A dead worker breaks a ProcessPoolExecutor for every task in it, so at most ``IN_FLIGHT_PER_WORKER * workers``
tasks are in flight at a time (enough that workers never wait while the caller writes tables): when the pool
breaks, exactly those are resubmitted to a fresh pool, each counting one attempt. A trace
that kills its worker ``MAX_ATTEMPTS`` times becomes an error row; the others lose nothing.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from .inputs import BatchInput, memory_need_bytes
from .work import analyze_one, error_result

MAX_ATTEMPTS = 3
IN_FLIGHT_PER_WORKER = 2


def available_memory_bytes() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2


def pool_size(inputs: list[BatchInput], requested: int | None = None) -> int:
    """Workers: as asked, else the cores, but never more than memory allows for the largest trace."""
    if requested:
        return max(1, requested)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    need = max((memory_need_bytes(i.path, i.size_bytes) for i in inputs), default=1)
    return max(1, min(cores, len(inputs) or 1, available_memory_bytes() // need))


def run_local(inputs: list[BatchInput], workers: int, crash_once_dir: str | None = None) -> Iterator[dict]:
    """Yield one result per input, in completion order."""
    queue = list(reversed(inputs))
    attempts: dict[str, int] = {}
    context = multiprocessing.get_context("spawn")  # no inherited threads or locks from the parent
    while queue:
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            in_flight = {}
            broken = False
            while (queue or in_flight) and not broken:
                while queue and len(in_flight) < IN_FLIGHT_PER_WORKER * workers:
                    item = queue.pop()
                    attempts[item.key] = attempts.get(item.key, 0) + 1
                    future = pool.submit(analyze_one, item.key, item.path, item.size_bytes, item.copies, crash_once_dir)
                    in_flight[future] = item
                done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
                for future in done:
                    item = in_flight.pop(future)
                    try:
                        yield future.result()
                    except BrokenProcessPool:
                        broken = True
                        in_flight[future] = item  # resubmitted below with the others of the broken pool
            if broken:
                for item in in_flight.values():
                    if attempts[item.key] >= MAX_ATTEMPTS:
                        yield error_result(
                            item.key,
                            item.path,
                            item.size_bytes,
                            item.copies,
                            f"worker process died {MAX_ATTEMPTS} times analysing this trace",
                        )
                    else:
                        queue.append(item)
