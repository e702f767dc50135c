"""A CPU run's roofline device: measured figures, measured once and stored, so every door gives one answer.

A CPU has no datasheet row: its memory bandwidth and matmul throughput are measured. Measured on the spot in each
process, they drift by 10-20% from one process to the next, and so would every CPU roofline figure. So they are
measured once and kept: the collectors store the capture machine's own figures in run.json (`machine`); for a
run.json without them, this machine's figures are measured the first time and stored in the cache folder
(STEPSCOPE_CACHE_DIR/machine/), one file per host, and labelled as this machine's, not the capture machine's.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import hashlib
import json
import os
import platform
import socket
import tempfile
from pathlib import Path

from ...contracts.run_record import RunRecord
from .hardware import Hardware

MACHINE_KEY = "machine"  # run.json: {"memory_bytes_per_s", "flops_per_s", "how", "host"} of the capture machine


def capture_machine(record: RunRecord | None, name: str) -> Hardware | None:
    """The capture machine's measured figures from its run.json, or None when it has none."""
    raw = record.extra.get(MACHINE_KEY) if record is not None else None
    if not isinstance(raw, dict):
        return None
    bandwidth, flops = raw.get("memory_bytes_per_s"), raw.get("flops_per_s")
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < 1e18 for v in (bandwidth, flops)):
        return None
    host = str(raw.get("host") or "the capture machine")[:100]
    how = str(raw.get("how") or "measured at capture")[:200]
    return Hardware(
        name=name,
        memory_bytes_per_s=float(bandwidth),
        flops_per_s=float(flops),
        kind="cpu",
        memory_name="DRAM",
        source=f"the capture machine ({host}), {how}, stored in run.json",
    )


def this_machine(name: str) -> Hardware:
    """This machine's figures, measured the first time and read back after (one file per host in the cache
    folder); measured again only when the file is missing or unreadable."""
    path = _stored_path()
    stored = _read(path)
    if stored is None:
        import datetime as dt

        from .cpu_calibration import measure_matmul_throughput, measure_memory_bandwidth

        stored = {
            "host": socket.gethostname()[:100],
            "cpu": _cpu_identity(),
            "memory_bytes_per_s": measure_memory_bandwidth(),
            "flops_per_s": measure_matmul_throughput(),
            "measured": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
        _write(path, stored)
    return Hardware(
        name=name,
        memory_bytes_per_s=float(stored["memory_bytes_per_s"]),
        flops_per_s=float(stored["flops_per_s"]),
        kind="cpu",
        memory_name="DRAM",
        source=f"this machine ({stored['host']}), measured once on {stored['measured']}: not the capture machine's "
        "own figures (its run.json has none)",
    )


def cpu_hardware(record: RunRecord | None, name: str) -> Hardware:
    """The capture machine's stored figures when run.json has them, else this machine's."""
    return capture_machine(record, name) or this_machine(name)


@functools.cache
def _measured() -> dict:
    """This machine measured (about half a second), at most once per process: a cache folder that cannot be
    written must not make every open measure again and drift."""
    from .cpu_calibration import measure_matmul_throughput, measure_memory_bandwidth

    return {
        "host": socket.gethostname()[:100],
        "cpu": _cpu_identity(),
        "memory_bytes_per_s": measure_memory_bandwidth(),
        "flops_per_s": measure_matmul_throughput(),
        "measured": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def _cpu_identity() -> str:
    return f"{platform.machine()} {platform.processor() or ''} {os.cpu_count()} cores".strip()[:200]


def _stored_path() -> Path:
    from ...trace_cache.store import default_cache_dir

    ident = f"{socket.gethostname()}|{_cpu_identity()}"
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in socket.gethostname())[:60] or "host"
    return default_cache_dir() / "machine" / f"cpu-{safe}-{hashlib.sha256(ident.encode()).hexdigest()[:12]}.json"


def _read(path: Path) -> dict | None:
    try:
        if not path.is_file() or path.stat().st_size > 65536:
            return None
        raw = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    ok = isinstance(raw, dict) and all(
        isinstance(raw.get(k), int | float) and not isinstance(raw.get(k), bool) and raw[k] > 0
        for k in ("memory_bytes_per_s", "flops_per_s")
    )
    return raw if ok and isinstance(raw.get("host"), str) and isinstance(raw.get("measured"), str) else None


def _write(path: Path, figures: dict) -> None:
    """Atomically (temporary file + rename); a cache folder that cannot be written only costs a re-measure."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(figures, handle)
        os.replace(tmp, path)
        tmp = None
    except OSError:
        pass
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def stored_figures_digest() -> str:
    """What this machine's stored figures contribute to a result key: a hash of the stored file ("none" before
    the first measurement). Read without measuring: the key must be cheap."""
    path = _stored_path()
    try:
        if path.is_file() and path.stat().st_size <= 65536:
            return "sha256-" + hashlib.sha256(path.read_bytes()).hexdigest()[:24]
    except OSError:
        pass
    return "none"
