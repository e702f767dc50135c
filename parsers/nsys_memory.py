"""Device memory from an Nsight Systems export made with `--cuda-memory-usage=true`: the memory table.

CUDA_GPU_MEMORY_USAGE_EVENTS holds one row per CUDA allocation and free (start, deviceId, bytes, memKind,
memoryOperationType), with no totals: `allocated` is each device's running sum from the start of the capture. These
are the driver's allocations, so under PyTorch they are what its caching allocator reserves, not its tensors: the
reader says so in a warning. Operation and kind are read from the export's own enum tables when present
(ENUM_CUDA_DEV_MEM_EVENT_OPER: Allocation / Deallocation; ENUM_CUDA_MEM_KIND: Device, Device Static, Pinned, ...),
else from the values nsys writes (0 allocation, 1 deallocation; kinds 2 and 5 are device memory). Only device
memory is kept: pinned and pageable host memory are another pool.
"""

from __future__ import annotations

import sqlite3

import numpy as np
import pandas as pd

from .memory_table import CUDA_DEVICE_TYPE, UNKNOWN, memory_frame, totals_from_changes
from .numbers import int64_column

MEMORY_USAGE_TABLE = "CUDA_GPU_MEMORY_USAGE_EVENTS"
_OPERATION_ENUM = "ENUM_CUDA_DEV_MEM_EVENT_OPER"
_KIND_ENUM = "ENUM_CUDA_MEM_KIND"
_DEFAULT_FREE_OPERATIONS = (1,)
_DEFAULT_DEVICE_KINDS = (2, 5)  # Device, Device Static
DRIVER_LEVEL = (
    "device memory from the export's CUDA allocations (cudaMalloc/cudaFree, counted from the capture's start): "
    "what a caching allocator reserves, not the tensors it hands out"
)


def read_memory_usage(conn: sqlite3.Connection, tables: set[str]) -> tuple[pd.DataFrame | None, list[str]]:
    """(the memory table or None, warnings) of an export; None when it has no memory usage rows it can read."""
    if MEMORY_USAGE_TABLE not in tables:
        return None, []
    cols = {row[1] for row in conn.execute(f"PRAGMA table_info({MEMORY_USAGE_TABLE})")}
    if not {"start", "bytes", "memoryOperationType"} <= cols:
        return None, [f"{MEMORY_USAGE_TABLE} lacks start, bytes or memoryOperationType: memory not read"]
    device = "deviceId" if "deviceId" in cols else "0"
    kind = "memKind" if "memKind" in cols else "NULL"
    try:
        raw = pd.read_sql_query(
            f"SELECT start, bytes, memoryOperationType AS operation, {device} AS device, {kind} AS kind "
            f"FROM {MEMORY_USAGE_TABLE}",
            conn,
        )
    except (sqlite3.Error, pd.errors.DatabaseError, OverflowError):
        return None, [f"{MEMORY_USAGE_TABLE} cannot be read: memory not read"]
    start, start_ok = int64_column(raw["start"])
    size, size_ok = int64_column(raw["bytes"])
    operation = int64_column(raw["operation"])[0]
    kind_codes, kind_ok = int64_column(raw["kind"])
    frees = _ids(conn, tables, _OPERATION_ENUM, ("dealloc", "free", "release"), _DEFAULT_FREE_OPERATIONS)
    device_kinds = _ids(conn, tables, _KIND_ENUM, ("device",), _DEFAULT_DEVICE_KINDS)
    on_device = ~kind_ok | np.isin(kind_codes, device_kinds)  # no kind column: all of it
    keep = start_ok & size_ok & (size >= 0) & on_device
    if not keep.any():
        return None, []
    start, size = start[keep], size[keep]
    change = np.where(np.isin(operation[keep], frees), -size, size)
    devices = int64_column(raw["device"])[0][keep]
    order = np.argsort(start, kind="stable")
    start, change, devices = start[order], change[order], devices[order]
    types = np.full(len(start), CUDA_DEVICE_TYPE, dtype=np.int64)
    table = memory_frame(
        {
            "ts": start,
            "device_type": types,
            "device": devices,
            "bytes": change,
            "allocated": totals_from_changes(types, devices, change),
            "reserved": np.full(len(start), UNKNOWN, dtype=np.int64),
        }
    )
    return table, [f"{len(start)} {DRIVER_LEVEL}"]


def _ids(conn: sqlite3.Connection, tables: set[str], enum: str, words: tuple[str, ...], default: tuple) -> list[int]:
    """The enum's ids whose label or name holds one of `words` (e.g. the free operations); `default` without it."""
    if enum not in tables:
        return list(default)
    try:
        rows = conn.execute(f"SELECT * FROM {enum}").fetchall()
    except sqlite3.Error:
        return list(default)
    found = []
    for row in rows:
        text = " ".join(str(v) for v in row[1:]).lower()
        if isinstance(row[0], int) and any(w in text for w in words):
            found.append(row[0])
    return found
