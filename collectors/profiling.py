"""The torch.profiler session of a run: which activities, which options, and the decode-step cap.

The cap keeps traces a sane size: only the first K decode steps of each request are
recorded. After the K-th decode of the last request the profiler stops; after the K-th
decode of an earlier request collection is paused and resumed at the next request.
"""

from __future__ import annotations

import gzip
import os
import shutil
from dataclasses import dataclass

import torch
from torch.profiler import ProfilerActivity

from .errors import CollectorError


@dataclass
class ProfilerOptions:
    record_shapes: bool = False
    with_stack: bool = False
    profile_memory: bool = False
    with_modules: bool = False


class ProfileWindow:
    def __init__(self, device: torch.device, options: ProfilerOptions, requests: int, max_decode_steps: int):
        self.device = device
        self.activities = [ProfilerActivity.CPU]
        if device.type == "cuda":
            self.activities.append(ProfilerActivity.CUDA)
        self.requests = requests
        self.max_decode_steps = max_decode_steps
        self.profiler = torch.profiler.profile(
            activities=self.activities,
            record_shapes=options.record_shapes,
            with_stack=options.with_stack,
            profile_memory=options.profile_memory,
            with_modules=options.with_modules,
        )
        self.running = False
        self.paused = False
        self.capped = False  # whether any request had decode steps left out of the trace

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # kernels of the last recorded step must finish inside the window

    def start(self) -> None:
        self.profiler.start()
        self.running = True

    def request_started(self, request: int) -> None:
        if self.running and self.paused:
            self.profiler.toggle_collection_dynamic(True, self.activities)
            self.paused = False

    def after_forward(self, request: int, index: int) -> None:
        """Called after forward ``index`` (0 = prefill) of ``request``; closes the window after K decodes."""
        if not self.running or self.paused or index != self.max_decode_steps:
            return
        self.capped = True
        self._sync()
        if request == self.requests - 1:
            self.stop()
        else:
            self.profiler.toggle_collection_dynamic(False, self.activities)
            self.paused = True

    def stop(self) -> None:
        if self.running:
            self._sync()
            self.profiler.stop()
            self.running = False

    def export_gzip(self, dest: str) -> None:
        """Write the Chrome trace to ``dest`` gzipped; nothing appears at ``dest`` unless complete."""
        plain = dest + ".export.json"
        partial = dest + ".partial"
        try:
            self.profiler.export_chrome_trace(plain)
            with open(plain, "rb") as src, gzip.open(partial, "wb", compresslevel=6) as out:
                shutil.copyfileobj(src, out, length=1 << 20)
            os.replace(partial, dest)
        except OSError as exc:
            raise CollectorError(f"could not write the trace: {exc}") from exc
        finally:
            for leftover in (plain, partial):
                if os.path.exists(leftover):
                    os.remove(leftover)
