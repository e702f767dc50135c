"""The Timeline's memory table: one row per allocation, free or memory sample, whatever the trace format.

Columns (all int64, sorted by ts, stable):

| column | meaning |
|---|---|
| ts | ns on the trace's own clock |
| device_type | c10::DeviceType of the memory: 0 CPU, 1 CUDA (ROCm's HIP reads as CUDA, as PyTorch reports it) |
| device | the device's ordinal, -1 for the host |
| bytes | the change this event made: + allocated, - freed; 0 where the trace gives only totals |
| allocated | the device's total allocated after the event, -1 where the trace does not say |
| reserved | what the device's allocator holds after the event (PyTorch's caching allocator), -1 where unknown |

Kineto's `[memory]` events carry all of these (older traces only `Bytes`); Nsight Systems has allocations and
frees without totals (summed here per device); Perfetto has counter samples (totals, no `bytes`). A trace without
memory events has no table (`Timeline.memory` is None), never an empty one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy and pandas load on use: the cache module imports the column names before a big parse
    import numpy as np
    import pandas as pd

MEMORY_COLUMNS = ("ts", "device_type", "device", "bytes", "allocated", "reserved")
CPU_DEVICE_TYPE, CUDA_DEVICE_TYPE = 0, 1
DEVICE_TYPE_NAMES = {0: "cpu", 1: "cuda", 6: "hip", 12: "xpu", 13: "mps"}  # c10::DeviceType, those seen in traces
UNKNOWN = -1
COUNTED_TOTALS = "memory events without totals: allocated counted from the trace's start"  # a warning's words


def device_label(device_type: int, device: int) -> str:
    """ "cpu", "cuda:0", ...: how PyTorch names a device."""
    name = DEVICE_TYPE_NAMES.get(int(device_type), f"device type {int(device_type)}")
    return name if device < 0 or name == "cpu" else f"{name}:{int(device)}"


def memory_frame(columns: dict[str, np.ndarray]) -> pd.DataFrame | None:
    """The table from its int64 columns (any order of rows); None when there are no rows."""
    import numpy as np
    import pandas as pd

    if not len(columns["ts"]):
        return None
    ts = np.asarray(columns["ts"], dtype=np.int64)
    in_order = len(ts) < 2 or bool((ts[1:] >= ts[:-1]).all())
    order = None if in_order else np.argsort(ts, kind="stable")
    data = {}
    for col in MEMORY_COLUMNS:
        values = np.asarray(columns[col], dtype=np.int64)
        data[col] = values if order is None else values[order]
    return pd.DataFrame(data, copy=False)


def with_counted_totals(table: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """(the table, rows filled): every device whose events carry no totals at all gets, as `allocated`, the
    running sum of its changes from the trace's start (totals_from_changes)."""
    import numpy as np

    allocated = table["allocated"].to_numpy()
    key = _device_key(table["device_type"].to_numpy(), table["device"].to_numpy())
    without = ~np.isin(key, np.unique(key[allocated != UNKNOWN]))
    if not without.any():
        return table, 0
    filled = allocated.copy()
    device_type, device, change = (table[c].to_numpy()[without] for c in ("device_type", "device", "bytes"))
    filled[without] = totals_from_changes(device_type, device, change)
    return table.assign(allocated=filled), int(without.sum())


def _device_key(device_type: np.ndarray, device: np.ndarray) -> np.ndarray:
    import numpy as np

    return np.asarray(device_type, dtype=np.int64) * (1 << 32) + np.asarray(device, dtype=np.int64)


def totals_from_changes(device_type: np.ndarray, device: np.ndarray, change: np.ndarray) -> np.ndarray:
    """Each device's running total of `change` (rows in time order): what a trace of allocations and frees
    without totals (Nsight Systems, old Kineto) says was allocated, counted from the trace's start."""
    import numpy as np

    change = np.asarray(change, dtype=np.int64)
    key = _device_key(device_type, device)
    order = np.argsort(key, kind="stable")  # each device's rows together, in time order
    sorted_key, running = key[order], np.cumsum(change[order])
    first = np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1]])
    before = np.repeat(running[first] - change[order][first], np.diff(np.r_[first, len(order)]))
    out = np.empty_like(change)
    out[order] = running - before
    return out
