"""The start every collector shares: torch and the target device, or one line saying why not."""

from __future__ import annotations

from typing import Any

from .errors import CollectorError


def torch_and_device(device_spec: str, purpose: str) -> tuple[Any, Any]:
    """(the torch module, the resolved torch.device). Imported here so the app can list presets without torch."""
    try:
        import torch

        from .devices import resolve_device
    except ImportError as exc:
        raise CollectorError(f"{purpose}: torch and transformers must be installed ({exc})") from exc
    return torch, resolve_device(device_spec)
