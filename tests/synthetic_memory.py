"""Builders for SYNTHETIC `[memory]` events, shaped like torch.profiler's with profile_memory=True (tests only).

A SYNTHETIC generation with memory: every forward allocates its activations and frees them, and leaves
`kv_bytes` more behind (its KV cache growth), so a test knows exactly what the memory analysis must find."""

from __future__ import annotations

CPU, CUDA = 0, 1  # c10::DeviceType


def memory_event(
    ts: float, change: int, allocated: int, reserved: int = 0, device_type: int = CUDA, device: int = 0
) -> dict:
    """One `[memory]` instant as Kineto writes it (current layout: totals after the event)."""
    return {
        "ph": "i",
        "cat": "cpu_instant_event",
        "s": "t",
        "name": "[memory]",
        "pid": 100,
        "tid": 100,
        "ts": ts,
        "args": {
            "Total Reserved": reserved,
            "Total Allocated": allocated,
            "Bytes": change,
            "Addr": 140000000000000 + int(ts * 1000),
            "Device Id": device if device_type != CPU else -1,
            "Device Type": device_type,
        },
    }


def memory_for_steps(
    step_windows: list[tuple[float, float]],
    kv_bytes: int,
    activation_bytes: int = 1 << 20,
    resident_bytes: int = 100 << 20,
    reserved_bytes: int = 512 << 20,
    device_type: int = CUDA,
) -> tuple[list[dict], list[int]]:
    """SYNTHETIC memory events for steps given as (start_us, end_us): inside each step an activation buffer is
    allocated and freed and `kv_bytes` stay allocated. Returns the events and each step's allocated total at its
    end (the truth)."""
    events, ends = [], []
    allocated = resident_bytes
    for start, end in step_windows:
        third = (end - start) / 3
        allocated += activation_bytes
        events.append(memory_event(start + third, activation_bytes, allocated, reserved_bytes, device_type))
        allocated += kv_bytes
        events.append(memory_event(start + 1.5 * third, kv_bytes, allocated, reserved_bytes, device_type))
        allocated -= activation_bytes
        events.append(memory_event(start + 2 * third, -activation_bytes, allocated, reserved_bytes, device_type))
        ends.append(allocated)
    return events, ends
