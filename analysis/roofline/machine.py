"""A CPU run's roofline device: measured figures, measured once and stored, so every door gives one answer.

A CPU has no datasheet row: its memory bandwidth and matmul throughput are measured. Measured on the spot in each
process, they drift by 10-20% from one process to the next (and by 2.5x while other work competes for the cores), and
so would every CPU roofline figure. So they are measured once and kept: the collectors store the capture machine's
own figures in run.json (`machine`); for a run.json without them, this machine's figures are measured the first time
(several rounds, the best kept, the load noted: contracts/machine_figures.py) and stored in the cache folder
(STEPSCOPE_CACHE_DIR/machine/), one file per host, and labelled as this machine's, not the capture machine's. Figures
stored while the machine was under load are measured again by the first open that finds it quiet, and the better of
the two kept: the stored file changes, and with it every answer's key (stored_figures_digest).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import platform
import socket
import tempfile
from pathlib import Path

from stepscope.contracts.machine_figures import best_of, load_now, measure, read_figures, under_load
from stepscope.contracts.run_record import RunRecord
from .hardware import Hardware

MACHINE_KEY = "machine"  # run.json: {"memory_bytes_per_s", "flops_per_s", "how", "host", "load_avg", "under_load"}


def capture_machine(record: RunRecord | None, name: str) -> Hardware | None:
    """The capture machine's measured figures from its run.json, or None when it has none."""
    raw = read_figures(record.extra.get(MACHINE_KEY) if record is not None else None)
    if raw is None:
        return None
    host = str(raw.get("host") or "the capture machine")[:100]
    how = str(raw.get("how") or "measured at capture")[:200]
    loaded = " (taken under load: the machine's true figures are higher)" if raw.get("under_load") is True else ""
    return Hardware(
        name=name,
        memory_bytes_per_s=float(raw["memory_bytes_per_s"]),
        flops_per_s=float(raw["flops_per_s"]),
        kind="cpu",
        memory_name="DRAM",
        source=f"the capture machine ({host}), {how}{loaded}, stored in run.json",
    )


def this_machine(name: str) -> Hardware:
    """This machine's figures, measured the first time and read back after (one file per host in the cache
    folder); measured again when the file is missing or unreadable, or was measured under load and the machine is
    quiet now (the better figures kept)."""
    path = _stored_path()
    stored = _read(path)
    if stored is None or (stored.get("under_load", True) and not under_load(load_now())):
        fresh = _measured()
        stored = fresh if stored is None else best_of(stored, fresh)
        _write(path, stored)
    loaded = ", under load (measured again once the machine is quiet)" if stored.get("under_load", True) else ""
    return Hardware(
        name=name,
        memory_bytes_per_s=float(stored["memory_bytes_per_s"]),
        flops_per_s=float(stored["flops_per_s"]),
        kind="cpu",
        memory_name="DRAM",
        source=f"this machine ({stored['host']}), measured on {stored['measured']} ({stored.get('how', '')}"
        f"{loaded}): not the capture machine's own figures (its run.json has none)",
    )


def cpu_hardware(record: RunRecord | None, name: str) -> Hardware:
    """The capture machine's stored figures when run.json has them, else this machine's."""
    return capture_machine(record, name) or this_machine(name)


def _measured() -> dict:
    """This machine measured with numpy (a few seconds: several rounds, the load noted)."""
    from .cpu_calibration import measure_matmul_throughput, measure_memory_bandwidth

    figures = measure(
        measure_memory_bandwidth, measure_matmul_throughput, "numpy copy of 64 MiB and float32 1024^3 matmul"
    )
    return {
        **figures,
        "cpu": _cpu_identity(),
        "measured": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def _cpu_identity() -> str:
    return f"{platform.machine()} {platform.processor() or ''} {os.cpu_count()} cores".strip()[:200]


def _stored_path() -> Path:
    from stepscope.trace_cache.store import default_cache_dir

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
    raw = read_figures(raw)
    return raw if raw is not None and _is_this_machines(raw) else None


def _is_this_machines(raw: dict) -> bool:
    """Whether a stored record has the shape _measured writes and names this host and CPU: the file's name is a hash
    of both, but a record copied from another machine's cache (or edited to JSON of another shape) must be measured
    again, never labelled as this machine's."""
    if not (isinstance(raw.get("measured"), str) and isinstance(raw.get("how", ""), str)):
        return False
    if not isinstance(raw.get("under_load", False), bool):
        return False
    return raw.get("host") == socket.gethostname()[:100] and raw.get("cpu") == _cpu_identity()


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
