"""Which device a run uses, its default dtype, its human name and how much memory it has free."""

from __future__ import annotations

import os
import platform

import torch

from .errors import CollectorError


def resolve_device(requested: str) -> torch.device:
    """auto -> cuda when a GPU is visible, else cpu; cuda without a GPU is a clear error, not a crash."""
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested == "cpu":
        return torch.device("cpu")
    if requested.startswith("cuda"):
        if not torch.cuda.is_available():
            build = "a CPU-only build of torch" if torch.version.cuda is None else "no visible GPU"
            raise CollectorError(f"device {requested} asked for, but CUDA is not available ({build})")
        return torch.device(requested)
    raise CollectorError(f"unknown device {requested!r}; use auto, cpu or cuda")


def default_dtype(device: torch.device) -> torch.dtype:
    """bf16 on GPUs (what deployments run), fp32 on CPUs (bf16 matmuls are slow or emulated there)."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


DTYPES = {
    "auto": None,
    "fp32": torch.float32,
    "float32": torch.float32,
    "bf16": torch.bfloat16,
    "bfloat16": torch.bfloat16,
    "fp16": torch.float16,
    "float16": torch.float16,
}


def parse_dtype(name: str, device: torch.device) -> torch.dtype:
    if name not in DTYPES:
        raise CollectorError(f"unknown dtype {name!r}; use one of {', '.join(DTYPES)}")
    return DTYPES[name] or default_dtype(device)


def cpu_model_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{cpu_model_name()} ({os.cpu_count()} logical cores)"


def free_memory_bytes(device: torch.device) -> int | None:
    """Memory a new model can use: free GPU memory, or MemAvailable for the CPU (None if unknown)."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def release_device_memory(device: torch.device) -> str | None:
    """Hand cached GPU memory back after a run; None when done, else one line saying why it could not be.

    After a CUDA error (an illegal address, a launch failure) the context is broken and
    ``torch.cuda.empty_cache()`` itself raises; the caller has a run to report, and a capture set has
    more runs to try, so the cleanup never raises.
    """
    if device.type != "cuda":
        return None
    try:
        torch.cuda.empty_cache()
    except Exception as exc:  # whatever a broken CUDA context raises
        first_line = (str(exc).strip().splitlines() or [""])[0][:200]
        return f"{type(exc).__name__}: {first_line}"
    return None
