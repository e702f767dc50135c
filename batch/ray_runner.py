"""Run batch work as Ray tasks: one trace per task, memory request sized from the file, retried on worker death.

The only module that imports Ray. ``address`` is "auto" (a running cluster, else a local one) or a cluster
address; a user with a Ray cluster points the batch at a shared folder every node can read.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

from .inputs import BatchInput, memory_need_bytes
from .work import analyze_one, error_result

MAX_RETRIES = 3


def _largest_node_memory(ray) -> int | None:
    sizes = [n.get("Resources", {}).get("memory") for n in ray.nodes() if n.get("Alive")]
    sizes = [int(s) for s in sizes if s]
    return max(sizes) if sizes else None


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast on a cluster address nobody answers at: Ray itself retries for minutes before giving up."""
    if address == "auto":
        return
    hostport = address.removeprefix("ray://").rsplit("/", 1)[0]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise ConnectionError(f"not a Ray address (auto, HOST:PORT or ray://HOST:PORT): {address[:100]}")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ConnectionError(f"no Ray cluster answers at {address[:100]}: {exc.strerror or exc}") from None


def run_ray(inputs: list[BatchInput], address: str = "auto", crash_once_dir: str | None = None) -> Iterator[dict]:
    try:
        import ray
    except ImportError:
        raise RuntimeError("Ray is not installed: pip install -r requirements-ray.txt") from None
    started_here = False
    if not ray.is_initialized():
        check_reachable(address)
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        except ConnectionError:
            if address != "auto":
                raise
            ray.init(include_dashboard=False, log_to_driver=False)  # no cluster running: start a local one
        started_here = True
    try:
        cap = _largest_node_memory(ray)
        task = ray.remote(max_retries=MAX_RETRIES, retry_exceptions=False)(analyze_one)
        refs = {}
        for item in inputs:
            need = memory_need_bytes(item.path, item.size_bytes)
            memory = min(need, cap) if cap else need
            ref = task.options(memory=memory).remote(item.key, item.path, item.size_bytes, item.copies, crash_once_dir)
            refs[ref] = item
        pending = list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=min(len(pending), 16), timeout=1.0)
            for ref in done:
                item = refs.pop(ref)
                try:
                    yield ray.get(ref)
                except Exception as exc:  # worker died more than MAX_RETRIES times, or the node went away
                    reason = " ".join(str(exc).split())[:200]
                    yield error_result(
                        item.key,
                        item.path,
                        item.size_bytes,
                        item.copies,
                        f"Ray task failed after {MAX_RETRIES} retries: {type(exc).__name__}: {reason}",
                    )
    finally:
        if started_here:
            ray.shutdown()
