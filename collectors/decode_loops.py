"""The generation loops the three modes run; each produces exactly ``new_tokens`` tokens per sequence.

- eager: HF ``generate()`` as users call it (dynamic KV cache, one Python launch per kernel).
- cuda-graph: our own loop over a static KV cache: prefill eagerly, then the whole decode step
  (forward, argmax, buffer updates) captured once as a CUDA graph and replayed, one launch per step.
- compile: on a GPU, HF's own torch.compile path (static cache, mode reduce-overhead); on a CPU,
  ``torch.compile(model.forward)`` with inductor's C++ backend in our own static-cache loop, so a
  CPU-only user still has a real off/on pair.

``prepare()`` does the one-off work (graph capture, compilation) and belongs to the warm-up.
"""

from __future__ import annotations

import contextlib
import inspect
from dataclasses import dataclass
from typing import Any

import torch

from .errors import CollectorError
from .profiling import init_profiler_for_cuda_graphs
from .step_tracker import StepTracker, _tokens_in, forward_markers

MODES = ("eager", "cuda-graph", "compile")


@dataclass(frozen=True)
class DecodeSettings:
    new_tokens: int
    batch: int
    prompt_len: int
    do_sample: bool = False
    temperature: float = 1.0


class _TokenClock:
    """A generate() streamer that only clocks tokens: the first put() is the prompt, later ones new tokens."""

    def __init__(self, tracker: StepTracker) -> None:
        self.tracker = tracker
        self.prompt_seen = False

    def put(self, value: Any) -> None:
        if not self.prompt_seen:
            self.prompt_seen = True
            return
        self.tracker.token_ready()

    def end(self) -> None:
        pass


class HFGenerateLoop:
    """HF generate(), as deployed code calls it; optionally its static-cache torch.compile path."""

    def __init__(self, model: Any, settings: DecodeSettings, hf_compile: bool = False) -> None:
        self.model = model
        self.settings = settings
        self.hf_compile = hf_compile
        self.generation_config = self._generation_config()

    def _generation_config(self) -> Any:
        from transformers import GenerationConfig

        s = self.settings
        config = self.model.config
        eos = getattr(config, "eos_token_id", None)
        pad = getattr(config, "pad_token_id", None)
        if pad is None:
            pad = eos[0] if isinstance(eos, list) else (eos if eos is not None else 0)
        kwargs: dict[str, Any] = dict(
            max_new_tokens=s.new_tokens,
            # EOS is suppressed until the last token, so every run has the same length
            min_new_tokens=s.new_tokens,
            do_sample=s.do_sample,
            pad_token_id=pad,
            eos_token_id=eos,
            num_beams=1,
        )
        if s.do_sample:
            kwargs["temperature"] = s.temperature
        if self.hf_compile:
            from transformers import CompileConfig

            kwargs["cache_implementation"] = "static"
            kwargs["compile_config"] = CompileConfig(fullgraph=False, mode="reduce-overhead")
        return GenerationConfig(**kwargs)

    def prepare(self, input_ids: torch.Tensor) -> None:
        """Nothing to do: HF compiles (if at all) on the first generate(), which the warm-up runs."""

    def generate(self, input_ids: torch.Tensor, tracker: StepTracker) -> None:
        with forward_markers(self.model, tracker), _marked_compiled_calls(self.model, tracker):
            self.model.generate(
                input_ids=input_ids,
                attention_mask=torch.ones_like(input_ids),
                generation_config=self.generation_config,
                streamer=_TokenClock(tracker),
            )


@contextlib.contextmanager
def _marked_compiled_calls(model: Any, tracker: StepTracker):
    """Mark forwards that HF runs through its compiled ``__call__`` from outside the compiled code.

    Hooks inside a compiled (and CUDA-graphed) region never run on replay, so the marker must
    wrap the call. Guarded: a transformers without ``get_compiled_call`` is left alone.
    """
    original = getattr(model, "get_compiled_call", None)
    if original is None:
        yield
        return

    def get_compiled_call(compile_config: Any) -> Any:
        compiled = original(compile_config)

        def marked(*args: Any, **kwargs: Any) -> Any:
            tokens = _tokens_in(args, kwargs)
            tracker.forward_started(tokens)
            tracker.outer_marker_active = True
            try:
                return compiled(*args, **kwargs)
            finally:
                tracker.outer_marker_active = False
                tracker.forward_finished()

        return marked

    model.get_compiled_call = get_compiled_call
    try:
        yield
    finally:
        del model.get_compiled_call  # the instance attribute shadowed the method


def make_static_cache(model: Any, batch: int, max_len: int, device: torch.device, dtype: torch.dtype) -> Any:
    """A StaticCache across transformers versions (its constructor arguments changed several times)."""
    from transformers import StaticCache

    accepted = inspect.signature(StaticCache.__init__).parameters
    offered = dict(
        config=model.config,
        max_cache_len=max_len,
        max_batch_size=batch,
        batch_size=batch,
        device=device,
        dtype=dtype,
    )
    has_var_kw = any(p.kind is p.VAR_KEYWORD for p in accepted.values())
    kwargs = {k: v for k, v in offered.items() if k in accepted}
    if not has_var_kw:
        return StaticCache(**kwargs)
    # Versions with **kwargs may reject unknown names inside; give only the core ones.
    return StaticCache(**{k: v for k, v in kwargs.items() if k in ("config", "max_cache_len")})


class StaticCacheLoop:
    """Our own greedy loop over a static KV cache, so every decode step has identical shapes and addresses."""

    def __init__(self, model: Any, settings: DecodeSettings, device: torch.device, how: str) -> None:
        if how not in ("cuda-graph", "compile"):
            raise ValueError(how)
        if settings.do_sample:
            raise CollectorError(f"sampling is supported in eager mode only, not in {how} mode")
        self.model = model
        self.settings = settings
        self.device = device
        self.how = how
        self.max_len = settings.prompt_len + settings.new_tokens
        dtype = next(model.parameters()).dtype
        self.cache = make_static_cache(model, settings.batch, self.max_len, device, dtype)
        b = settings.batch
        self.token = torch.zeros((b, 1), dtype=torch.long, device=device)
        self.position = torch.zeros((b, 1), dtype=torch.long, device=device)
        self.mask = torch.zeros((b, self.max_len), dtype=torch.long, device=device)
        params = inspect.signature(type(model).forward).parameters
        self.extra: dict[str, Any] = {}
        if "logits_to_keep" in params:
            self.extra["logits_to_keep"] = 1
        self.pass_cache_position = "cache_position" in params  # older transformers only
        self.graph: Any = None
        self.compiled_forward: Any = None

    def _forward(
        self, forward: Any, input_ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        kwargs = dict(self.extra)
        if self.pass_cache_position:
            kwargs["cache_position"] = positions[0]
        out = forward(
            input_ids=input_ids,
            position_ids=positions,
            attention_mask=mask,
            past_key_values=self.cache,
            use_cache=True,
            **kwargs,
        )
        return out.logits[:, -1, :]

    def _decode_step(self, forward: Any) -> None:
        """One decode step using only static buffers, so it can be captured and replayed."""
        self.mask.scatter_(1, self.position, 1)
        logits = self._forward(forward, self.token, self.position, self.mask)
        self.token.copy_(torch.argmax(logits, dim=-1, keepdim=True))
        self.position.add_(1)

    def _prefill(self, input_ids: torch.Tensor) -> None:
        prompt_len = input_ids.shape[1]
        self.cache.reset()
        self.mask.zero_()
        self.mask[:, :prompt_len] = 1
        positions = torch.arange(prompt_len, device=self.device).unsqueeze(0).expand(input_ids.shape[0], -1)
        logits = self._forward(self.model, input_ids, positions, self.mask)
        self.token.copy_(torch.argmax(logits, dim=-1, keepdim=True))
        self.position.fill_(prompt_len)

    @torch.inference_mode()
    def prepare(self, input_ids: torch.Tensor) -> None:
        self._prefill(input_ids)  # allocates the cache tensors, whose addresses then never change
        if self.how == "compile":
            self.compiled_forward = torch.compile(self.model.forward, dynamic=False)
            for _ in range(2):
                self._decode_step(self.compiled_forward)
            return
        self._capture_graph()

    def _capture_graph(self) -> None:
        """Two warm-up decode steps on a side stream (as torch.cuda.graph's docs ask), then the capture."""
        init_profiler_for_cuda_graphs(self.device)  # before the capture, or the profile misses its kernels
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(2):
                self._decode_step(self.model)
        torch.cuda.current_stream(self.device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self._decode_step(self.model)
        torch.cuda.synchronize(self.device)

    @torch.inference_mode()
    def generate(self, input_ids: torch.Tensor, tracker: StepTracker) -> None:
        with tracker.forward(input_ids.shape[1]):
            self._prefill(input_ids)
        self.token.cpu()  # the token reaches the host: what a server needs to stream it
        tracker.token_ready()
        for _ in range(self.settings.new_tokens - 1):
            with tracker.forward(1):
                if self.graph is not None:
                    self.graph.replay()
                else:
                    self._decode_step(self.compiled_forward)
            self.token.cpu()
            tracker.token_ready()
