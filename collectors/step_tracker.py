"""Ground truth for every forward: its stepscope marker in the trace and the harness's own clock.

One tracker follows the requests of a run in order. Each forward is wrapped in a
``torch.profiler.record_function`` named by ``markers.format_marker`` so analysis can check its
own step finding against what really ran. Token times are taken when a token reaches the
host (a device sync every serving loop pays anyway), so they are what a user would see.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

from stepscope.contracts.markers import format_marker


class StepTracker:
    def __init__(
        self,
        batch: int,
        device: torch.device,
        after_forward: Callable[[int, int], None] | None = None,
        markers: bool = True,
    ):
        self.batch = batch
        self.device = device
        self.after_forward = after_forward  # (request, index) -> None, e.g. the profile window
        # False: forwards are still counted and clocked, but leave no marker in the trace (a capture that
        # checks step finding without ground-truth annotations)
        self.markers = markers
        self.request = -1
        self.index = 0
        self.token_times_ms: list[list[float]] = []  # per request, one entry per generated token
        self._last_s = 0.0
        self._open: Any = None
        self.outer_marker_active = False  # set while a wrapper outside compiled code holds the marker

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def start_request(self, request: int) -> None:
        self.request = request
        self.index = 0
        self.token_times_ms.append([])
        self._sync()
        self._last_s = time.perf_counter()

    def token_ready(self) -> None:
        """Call right after the newest token was copied to the host (the copy synchronises)."""
        now = time.perf_counter()
        self.token_times_ms[-1].append((now - self._last_s) * 1e3)
        self._last_s = now

    def forward_started(self, tokens: int) -> None:
        if not self.markers:
            return
        kind = "prefill" if self.index == 0 else "decode"
        marker = torch.profiler.record_function(format_marker(kind, self.request, self.index, tokens, self.batch))
        marker.__enter__()
        self._open = marker

    def forward_finished(self) -> None:
        if self._open is not None:
            self._open.__exit__(None, None, None)
            self._open = None
        if self.after_forward is not None:
            self.after_forward(self.request, self.index)
        self.index += 1

    @contextlib.contextmanager
    def forward(self, tokens: int) -> Iterator[None]:
        self.forward_started(tokens)
        try:
            yield
        finally:
            self.forward_finished()


def _tokens_in(args: tuple, kwargs: dict) -> int:
    ids = kwargs.get("input_ids")
    if ids is None and args:
        ids = args[0]
    if ids is None:
        ids = kwargs.get("inputs_embeds")
    return int(ids.shape[1]) if ids is not None and ids.dim() >= 2 else 1


@contextlib.contextmanager
def forward_markers(model: torch.nn.Module, tracker: StepTracker) -> Iterator[None]:
    """Mark every forward of ``model`` (e.g. inside HF generate) with hooks, removed afterwards.

    Hooks do nothing while dynamo traces them or while an outer wrapper already marks the call:
    compiled forwards are marked from outside (see decode_loops.mark_compiled_calls).
    """

    def skip() -> bool:
        return tracker.outer_marker_active or torch.compiler.is_compiling()

    def pre_hook(_module: Any, args: tuple, kwargs: dict) -> None:
        if not skip():
            tracker.forward_started(_tokens_in(args, kwargs))

    def post_hook(_module: Any, _args: tuple, _kwargs: dict, _output: Any) -> None:
        if not skip():
            tracker.forward_finished()

    handles = [
        model.register_forward_pre_hook(pre_hook, with_kwargs=True),
        model.register_forward_hook(post_hook, with_kwargs=True),
    ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
