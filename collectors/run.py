"""Run one profiled generation and write runs/<id>/trace.json.gz and run.json, atomically.

Used as ``python -m collectors.run ...`` (see ``main``) and from the app through
``run_profiled_generation(RunSpec(...))``. Everything is written into a hidden temporary folder
inside the runs folder and renamed into place at the end, so a failed run leaves nothing behind.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import re
import secrets
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stepscope.collectors.errors import CollectorError
from stepscope.collectors.torch_setup import torch_and_device
from stepscope.contracts import settings

ProgressCallback = Callable[[str, int, int], None]
STAGES = ("load model", "warm up", "profile", "export")
DEFAULT_MAX_PROFILED_DECODE_STEPS = 256


def stage_hint(mode: str, stage: str, done: int) -> str:
    """What a long silent stage is doing: torch.compile compiles during the first warm-up generation, which takes
    tens of seconds on a CPU with the bar standing still at 0."""
    if mode == "compile" and stage == "warm up" and done == 0:
        return " (torch.compile is compiling the model: the first warm-up takes longest)"
    return ""


@dataclass
class RunSpec:
    """What to run. ``model`` (a local folder or a hub id) wins over ``preset`` when given."""

    preset: str | None = "tiny-llama"
    model: str | None = None
    device: str = "auto"
    prompt: str | None = None  # text; None -> ``prompt_tokens`` deterministic ids
    prompt_tokens: int = 16
    new_tokens: int = 32
    batch: int = 1
    mode: str = "eager"
    requests: int = 1
    warmup: int = 1
    record_shapes: bool = False
    with_stack: bool = False
    with_modules: bool = False
    profile_memory: bool = False
    markers: bool = True  # False: no stepscope.* marker per forward (ground truth for finding steps without them)
    max_profiled_decode_steps: int = DEFAULT_MAX_PROFILED_DECODE_STEPS
    trust_remote_code: bool = False
    sample: bool = False
    temperature: float = 1.0
    dtype: str = "auto"


def _validate(spec: RunSpec) -> None:
    from stepscope.collectors.decode_loops import MODES

    if spec.mode not in MODES:
        raise CollectorError(f"unknown mode {spec.mode!r}; use one of {', '.join(MODES)}")
    if spec.model is None and not spec.preset:
        raise CollectorError("give a preset or a model")
    for name in ("new_tokens", "batch", "requests", "max_profiled_decode_steps"):
        if getattr(spec, name) < 1:
            raise CollectorError(f"{name.replace('_', '-')} must be at least 1")
    if spec.prompt is None and spec.prompt_tokens < 1:
        raise CollectorError("prompt-tokens must be at least 1")
    if spec.warmup < 0:
        raise CollectorError("warmup must be 0 or more")
    if spec.sample and spec.temperature <= 0:
        raise CollectorError("temperature must be above 0 when sampling")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _run_id(spec: RunSpec, device_type: str) -> str:
    source = spec.preset if spec.model is None else Path(spec.model.rstrip("/")).name
    source = re.sub(r"[^A-Za-z0-9._-]+", "_", source or "model")
    return f"{time.strftime('%Y%m%d-%H%M%S')}_{device_type}_{source}_{spec.mode}_{secrets.token_hex(2)}"


def _make_loop(loaded: Any, spec: RunSpec, device: Any, prompt_len: int) -> Any:
    from stepscope.collectors.decode_loops import DecodeSettings, HFGenerateLoop, StaticCacheLoop

    settings = DecodeSettings(spec.new_tokens, spec.batch, prompt_len, spec.sample, spec.temperature)
    if spec.mode == "eager":
        return HFGenerateLoop(loaded.model, settings)
    if spec.mode == "compile" and device.type == "cuda":
        return HFGenerateLoop(loaded.model, settings, hf_compile=True)
    return StaticCacheLoop(loaded.model, settings, device, spec.mode)


def run_profiled_generation(
    spec: RunSpec,
    out_dir: str | os.PathLike = "runs",
    progress: ProgressCallback | None = None,
    model: Any | None = None,
) -> Path:
    """Profile one generation (``spec.requests`` requests) and return the new run folder.

    ``model``: a ``model_loading.LoadedModel`` the caller built once for several runs (an 8B model takes
    seconds to build and 16 GB to hold; a capture set reuses it across modes and batches). It must be what
    the spec would build, on its device in its dtype. Raises CollectorError with a one-line message on any
    failure; nothing is left half-written.
    """
    notify = progress or (lambda stage, done, total: None)
    _validate(spec)
    torch, device = torch_and_device(spec.device, "collectors")
    from stepscope.collectors.devices import parse_dtype, release_device_memory
    from stepscope.collectors.locking import device_lock

    if spec.mode == "cuda-graph" and device.type != "cuda":
        raise CollectorError("mode cuda-graph needs a CUDA GPU; on the CPU use mode eager or compile")
    dtype = parse_dtype(spec.dtype, device)
    runs_dir = Path(out_dir)
    with device_lock(runs_dir, device, lambda message: notify(message, 0, 1)):
        partial = Path(tempfile.mkdtemp(prefix=".partial-", dir=runs_dir))
        partial.chmod(0o777 & ~_umask())  # mkdtemp makes it private; the run folder should not be
        failure = ""
        try:
            return _profile_into(spec, device, dtype, runs_dir, partial, notify, model)
        except CollectorError as exc:
            failure = exc.message
            _debug_traceback()
        except torch.OutOfMemoryError:
            failure = f"out of memory on {device}: try a smaller preset, batch, prompt or new-tokens"
            _debug_traceback()
        except MemoryError:
            failure = "out of host memory: try a smaller preset or batch"
            _debug_traceback()
        except Exception as exc:  # the caller gets one line, never a traceback
            first_line = (str(exc).strip().splitlines() or [""])[0][:300]
            failure = f"run failed: {type(exc).__name__}: {first_line}"
            _debug_traceback()
        finally:
            shutil.rmtree(partial, ignore_errors=True)
        # Raised outside the except blocks on purpose: a chained exception would keep the failed run's
        # frames, and with them the model and its GPU memory, alive for as long as the caller keeps it.
        gc.collect()
        cleanup_problem = release_device_memory(device)
        if cleanup_problem:
            failure = f"{failure} (and freeing the cached memory failed: {cleanup_problem})"
        raise CollectorError(failure)


def _debug_traceback() -> None:
    """STEPSCOPE_DEBUG=1 prints the full traceback of a failed run to stderr (for blind GPU checks)."""
    if settings.flag("STEPSCOPE_DEBUG"):
        traceback.print_exc()


def _check_supplied_model(loaded: Any, spec: RunSpec, device: Any, dtype: Any) -> None:
    """A model built by the caller must be the one the spec names, where and how the run needs it."""
    wanted = f"preset:{spec.preset}" if spec.model is None else None
    if wanted is not None and loaded.source != wanted:
        raise CollectorError(f"the model given is {loaded.source}, but the run asks for {wanted}")
    if wanted is None and not loaded.source.endswith(":" + spec.model):
        raise CollectorError(f"the model given is {loaded.source}, but the run asks for {spec.model}")
    param = next(loaded.model.parameters())
    if param.device.type != device.type or param.dtype != dtype:
        raise CollectorError(
            f"the model given is on {param.device.type} in {str(param.dtype).removeprefix('torch.')}, "
            f"the run needs {device.type} in {str(dtype).removeprefix('torch.')}"
        )


def _load_model(spec: RunSpec, device: Any, dtype: Any, supplied: Any | None) -> Any:
    from stepscope.collectors.model_loading import build_preset, load_pretrained

    if supplied is not None:
        _check_supplied_model(supplied, spec, device, dtype)
        return supplied
    positions_bound = len(spec.prompt.encode("utf-8")) if spec.prompt is not None else spec.prompt_tokens
    positions_bound += spec.new_tokens
    if spec.model is not None:
        return load_pretrained(spec.model, device, dtype, spec.batch, positions_bound, spec.trust_remote_code)
    return build_preset(spec.preset, device, dtype, spec.batch, positions_bound)


def _profile_into(
    spec: RunSpec,
    device: Any,
    dtype: Any,
    runs_dir: Path,
    partial: Path,
    notify: ProgressCallback,
    supplied_model: Any | None = None,
) -> Path:
    from stepscope.collectors.devices import device_name, release_device_memory
    from stepscope.collectors.profiling import ProfilerOptions, ProfileWindow
    from stepscope.collectors.prompts import prompt_ids
    from stepscope.collectors.run_record import build_record, timings
    from stepscope.collectors.step_tracker import StepTracker
    from stepscope.contracts.run_record import write_run_record

    notify("load model", 0, 1)
    loaded = _load_model(spec, device, dtype, supplied_model)
    vocab = (
        loaded.config.get_text_config().vocab_size
        if hasattr(loaded.config, "get_text_config")
        else loaded.config.vocab_size
    )
    input_ids = prompt_ids(spec.prompt, spec.prompt_tokens, spec.batch, vocab, loaded.tokenizer).to(device)
    prompt_len = int(input_ids.shape[1])
    notify("load model", 1, 1)

    loop = _make_loop(loaded, spec, device, prompt_len)
    total_warmup = spec.warmup + 1
    notify("warm up", 0, total_warmup)
    loop.prepare(input_ids)  # graph capture or compilation: one-off work kept out of the profile
    notify("warm up", 1, total_warmup)
    unprofiled_times: list[float] | None = None  # the last warm-up's token times: the run without the profiler
    for i in range(spec.warmup):
        warm_tracker = StepTracker(spec.batch, device, markers=spec.markers)
        warm_tracker.start_request(0)
        loop.generate(input_ids, warm_tracker)
        unprofiled_times = warm_tracker.token_times_ms[0]
        notify("warm up", i + 2, total_warmup)

    options = ProfilerOptions(spec.record_shapes, spec.with_stack, spec.profile_memory, spec.with_modules)
    window = ProfileWindow(device, options, spec.requests, spec.max_profiled_decode_steps)
    tracker = StepTracker(spec.batch, device, after_forward=window.after_forward, markers=spec.markers)
    notify("profile", 0, spec.requests)
    window.start()
    try:
        for request in range(spec.requests):
            window.request_started(request)
            tracker.start_request(request)
            loop.generate(input_ids, tracker)
            notify("profile", request + 1, spec.requests)
    finally:
        window.stop()
    for request, times in enumerate(tracker.token_times_ms):
        if len(times) != spec.new_tokens:
            raise CollectorError(f"request {request} produced {len(times)} tokens instead of {spec.new_tokens}")

    notify("export", 0, 1)
    window.export_gzip(str(partial / "trace.json.gz"))
    profiled_decodes = min(spec.new_tokens - 1, spec.max_profiled_decode_steps)
    model_info = {
        "source": loaded.source,
        "architecture": type(loaded.model).__name__,
        "parameters": sum(p.numel() for p in loaded.model.parameters()),
        "config": loaded.config.to_dict(),
    }
    record = build_record(
        spec=dataclasses.asdict(spec),
        device_type=device.type,
        device_name=device_name(device),
        model_info=model_info,
        dtype=dtype,
        prompt_len=prompt_len,
        timing=timings(tracker.token_times_ms, profiled_decodes, window.capped, unprofiled_times),
        expected_markers={
            "prefill": spec.requests if spec.markers else 0,
            "decode": spec.requests * profiled_decodes if spec.markers else 0,
        },
    )
    write_run_record(partial, record)
    final = runs_dir / _run_id(spec, device.type)
    os.replace(partial, final)
    del loop, loaded
    release_device_memory(device)  # a failed cleanup after a finished run costs the next run memory, not this run
    notify("export", 1, 1)
    return final


class _OneLineErrorParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse would print usage and a multi-line message
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    p = _OneLineErrorParser(prog="python -m collectors.run", description="Run a profiled generation.")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--preset", default=None, help="architecture preset with random weights (default tiny-llama)")
    source.add_argument("--model", default=None, help="local model folder, or a hub id (needs network)")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda[:N]")
    prompt = p.add_mutually_exclusive_group()
    prompt.add_argument("--prompt", default=None, help="prompt text")
    prompt.add_argument("--prompt-tokens", type=int, default=16, help="prompt length in tokens (deterministic ids)")
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--mode", default="eager", choices=["eager", "cuda-graph", "compile"])
    p.add_argument("--requests", type=int, default=1, help="requests profiled one after another in one trace")
    p.add_argument("--warmup", type=int, default=1, help="unprofiled runs before the profiled one")
    p.add_argument("--record-shapes", action="store_true")
    p.add_argument("--with-stack", action="store_true")
    p.add_argument("--with-modules", action="store_true", help="record nn.Module spans (one per module call)")
    p.add_argument("--profile-memory", action="store_true")
    p.add_argument("--no-markers", action="store_true", help="no stepscope.* marker per forward")
    p.add_argument("--max-profiled-decode-steps", type=int, default=DEFAULT_MAX_PROFILED_DECODE_STEPS)
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument("--sample", action="store_true", help="sample (eager mode) instead of greedy decoding")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--dtype", default="auto", help="auto (bf16 on GPU, fp32 on CPU), bf16, fp16 or fp32")
    p.add_argument("--out", default="runs", help="runs folder (default ./runs)")
    p.add_argument(
        "--no-limits", action="store_true", help="skip the Run page's bounds (STEPSCOPE_MAX_BATCH and its kin)"
    )
    return p


def limits_problem(args: argparse.Namespace) -> str | None:
    """The Run page's bounds (contracts.settings), applied to the command line's run unless --no-limits."""
    if args.no_limits:
        return None
    counts = {"new_tokens": args.new_tokens, "batch": args.batch, "requests": args.requests, "warmup": args.warmup}
    if args.prompt is None:
        counts["prompt_tokens"] = args.prompt_tokens
    problem = settings.run_limits_problem(counts, args.prompt, tokenizer=args.model is not None)
    return f"{problem} (or --no-limits)" if problem else None


def spec_from_args(args: argparse.Namespace) -> RunSpec:
    return RunSpec(
        preset=None if args.model else (args.preset or "tiny-llama"),
        model=args.model,
        device=args.device,
        prompt=args.prompt,
        prompt_tokens=args.prompt_tokens,
        new_tokens=args.new_tokens,
        batch=args.batch,
        mode=args.mode,
        requests=args.requests,
        warmup=args.warmup,
        record_shapes=args.record_shapes,
        with_stack=args.with_stack,
        with_modules=args.with_modules,
        profile_memory=args.profile_memory,
        markers=not args.no_markers,
        max_profiled_decode_steps=args.max_profiled_decode_steps,
        trust_remote_code=args.trust_remote_code,
        sample=args.sample,
        temperature=args.temperature,
        dtype=args.dtype,
    )


def _quiet_libraries() -> None:
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    logging.getLogger("transformers").setLevel(logging.ERROR)
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except ImportError:
        pass


def _print_progress(stage: str, done: int, total: int) -> None:
    """Progress goes to stdout, so stderr carries nothing but a possible ``error:`` line."""
    if stage in STAGES:
        print(f"{stage}: {done}/{total}", flush=True)
    else:
        print(stage, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    problem = limits_problem(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    _quiet_libraries()
    started = time.perf_counter()
    try:
        run_dir = run_profiled_generation(spec_from_args(args), args.out, _print_progress)
    except CollectorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 2
    print(f"done in {time.perf_counter() - started:.1f} s")
    print(run_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
