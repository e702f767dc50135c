"""Prefill sweep (the seed's exercise B): time one prefill forward over a range of prompt lengths
against its roofline, to see where prefill turns compute bound and where one prefill costs as
much as one decode step.

    python -m app.cli sweep [--preset NAME | --model PATH] [--device auto|cpu|cuda[:N]]
        [--min-tokens 16] [--max-tokens 1024] [--points 8] [--batch 1] [--repeats 3]
        [--dtype auto|bf16|fp16|fp32] [--hbm-gbps X --tflops Y] [--out runs]

From Python (the app's Run page, app/sweeps.py):

    from ..analysis.roofline import complete_sweep
    from .sweep import SweepSpec, run_prefill_sweep
    result = run_prefill_sweep(SweepSpec(preset="tiny-llama", points=5), out_dir="runs",
                               progress=lambda stage, done, total: ..., complete=complete_sweep)
    result["path"]  # runs/<id>/sweep.json (absent when out_dir is None)

This module only measures (collectors never import analysis); `complete` (the roofline's
analysis.roofline.complete_sweep) fills in the expected figures right after the timed forwards,
in this process, before the record is written. Without it the expected figures are null.

Each length gets one warm-up forward and `repeats` timed ones, each timed from a synchronised
device to a synchronised device, with a fresh KV cache; the fastest is kept (the run least
disturbed by other work on the machine; all are in "runs_ms"). Only the last position's logits
are computed (logits_to_keep=1), as a serving engine does. One decode step (after a
prefill of the shortest length) is timed the same way. Expected times use the roofline of
analysis.roofline: the calibrated CPU, or the GPU table's row for the device's name; --hbm-gbps
and --tflops override either. Without a table row and without figures, "expected" is null.

sweep.json's schema, reader and writer: contracts.sweep_record.
"""

from __future__ import annotations

import datetime as dt
import gc
import itertools
import os
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stepscope.contracts.sweep_record import SCHEMA as SWEEP_SCHEMA
from stepscope.contracts.sweep_record import write_sweep_record
from .errors import CollectorError
from .torch_setup import torch_and_device

STAGES = ("load model", "sweep", "decode step", "write")
ProgressCallback = Callable[[str, int, int], None]
# (measured record, hbm_gbps, tflops) -> the record with its roofline figures (analysis.roofline.complete_sweep)
CompleteSweep = Callable[[dict[str, Any], float | None, float | None], dict[str, Any]]


@dataclass(frozen=True)
class SweepSpec:
    preset: str | None = "tiny-llama"
    model: str | None = None  # a local folder or hub id; wins over preset
    device: str = "auto"
    min_tokens: int = 16
    max_tokens: int = 1024
    points: int = 8
    batch: int = 1
    repeats: int = 3
    dtype: str = "auto"
    hbm_gbps: float | None = None
    tflops: float | None = None
    trust_remote_code: bool = False


def prompt_lengths(min_tokens: int, max_tokens: int, points: int) -> list[int]:
    """`points` lengths spaced evenly on a log scale from min to max, distinct, ascending."""
    if points == 1 or min_tokens == max_tokens:
        return [max_tokens]
    ratio = (max_tokens / min_tokens) ** (1 / (points - 1))
    return sorted({round(min_tokens * ratio**i) for i in range(points)} | {max_tokens})


def run_prefill_sweep(
    spec: SweepSpec,
    out_dir: str | os.PathLike | None = "runs",
    progress: ProgressCallback | None = None,
    complete: CompleteSweep | None = None,
) -> dict[str, Any]:
    """Time prefill over prompt lengths and write runs/<id>/sweep.json (unless out_dir is None);
    `complete` adds the expected figures (see the module docstring).

    Raises CollectorError with a one-line message on any failure; nothing is left half-written."""
    notify = progress or (lambda stage, done, total: None)
    _validate(spec)
    torch, device = torch_and_device(spec.device, "the sweep")
    from .devices import parse_dtype
    from .locking import device_lock

    dtype = parse_dtype(spec.dtype, device)
    runs_dir = Path(out_dir) if out_dir is not None else Path(tempfile.gettempdir()) / "stepscope-sweeps"
    with device_lock(runs_dir, device, lambda message: notify(message, 0, 1)):
        try:
            result = _sweep(spec, device, dtype, notify)
            if complete is not None:
                # after the timed forwards: numpy's BLAS threads of a CPU calibration keep
                # spinning a while after a matmul and would slow them down
                result = complete(result, spec.hbm_gbps, spec.tflops)
        except CollectorError:
            raise
        except torch.OutOfMemoryError as exc:
            raise CollectorError(f"out of memory on {device}: try a smaller preset, batch or --max-tokens") from exc
        except Exception as exc:
            first_line = (str(exc).strip().splitlines() or [""])[0][:300]
            raise CollectorError(f"sweep failed: {type(exc).__name__}: {first_line}") from exc
        finally:
            gc.collect()
            if device.type == "cuda":
                torch.cuda.empty_cache()
    if out_dir is not None:
        notify("write", 0, 1)
        result["path"] = str(_write(result, runs_dir, spec, device.type))
        notify("write", 1, 1)
    return result


def _validate(spec: SweepSpec) -> None:
    if spec.min_tokens < 1 or spec.max_tokens < spec.min_tokens:
        raise CollectorError("need 1 <= --min-tokens <= --max-tokens")
    if spec.points < 1 or spec.batch < 1 or spec.repeats < 1:
        raise CollectorError("--points, --batch and --repeats must be at least 1")
    if spec.preset is None and spec.model is None:
        raise CollectorError("give a preset or a model")
    for name, value in (("--hbm-gbps", spec.hbm_gbps), ("--tflops", spec.tflops)):
        if value is not None and not value > 0:
            raise CollectorError(f"{name} must be positive")


def _sweep(spec: SweepSpec, device: Any, dtype: Any, notify: ProgressCallback) -> dict[str, Any]:
    import torch

    from .devices import device_name
    from .model_loading import build_preset, load_pretrained
    from .prompts import counted_ids
    from .run_record import json_safe

    notify("load model", 0, 1)
    positions = spec.max_tokens + spec.repeats + 2
    if spec.model is not None:
        loaded = load_pretrained(spec.model, device, dtype, spec.batch, positions, spec.trust_remote_code)
    else:
        loaded = build_preset(spec.preset, device, dtype, spec.batch, positions)
    notify("load model", 1, 1)
    model, config = loaded.model, loaded.config
    config_dict = json_safe(config.to_dict())
    dtype_name = str(dtype).removeprefix("torch.")
    name = device_name(device)
    vocab = int(config.vocab_size)

    def ids(n: int) -> torch.Tensor:
        return torch.tensor([counted_ids(n, vocab)] * spec.batch, dtype=torch.long, device=device)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def timed(fn) -> float:
        sync()
        start = time.perf_counter()
        fn()
        sync()
        return (time.perf_counter() - start) * 1e3

    lengths = prompt_lengths(spec.min_tokens, spec.max_tokens, spec.points)
    keep = _last_logits_only(model, ids(lengths[0]))
    timings = []
    with torch.inference_mode():
        for _ in range(2):  # first forwards of a process pay for allocator and kernel set-up
            model(input_ids=ids(lengths[0]), use_cache=True, **keep)
        for i, n in enumerate(lengths):
            notify("sweep", i, len(lengths))
            x = ids(n)
            forward = lambda x=x: model(input_ids=x, use_cache=True, **keep)  # noqa: E731
            forward()  # warm-up
            timings.append((n, [timed(forward) for _ in range(spec.repeats)]))
        notify("sweep", len(lengths), len(lengths))
        notify("decode step", 0, 1)
        decode = _decode_step(model, ids(lengths[0]), spec.repeats, timed, keep)
        notify("decode step", 1, 1)
    points = [_point(n, runs) for n, runs in timings]
    decode_context = lengths[0] + 1  # cache length at the first timed step (the others add one each)
    decode_step = {"context": decode_context, **{k: v for k, v in _point(0, decode).items() if k != "prompt_tokens"}}
    memory = torch.cuda.get_device_properties(device).total_memory if device.type == "cuda" else None
    return {
        "schema": SWEEP_SCHEMA,
        "model": {"source": loaded.source, "parameters": None, "config": config_dict},
        "device": name,
        "device_type": device.type,
        "device_memory_bytes": memory,
        "dtype": dtype_name,
        "batch": spec.batch,
        "repeats": spec.repeats,
        "hardware": None,
        "points": points,
        "decode_step": decode_step,
        "marks": {
            "compute_bound_prompt_tokens": None,
            "prefill_equals_decode_tokens": measured_crossing(points, decode_step["measured_ms"]),
            "prefill_equals_decode_expected_tokens": None,
        },
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def _last_logits_only(model: Any, prompt: Any) -> dict[str, int]:
    """{"logits_to_keep": 1} where the model takes it (every transformers LM of 4.50+), else {}."""
    import torch

    try:
        with torch.inference_mode():
            model(input_ids=prompt[:, :1], use_cache=True, logits_to_keep=1)
    except TypeError:
        return {}
    return {"logits_to_keep": 1}


def _decode_step(model: Any, prompt: Any, repeats: int, timed, keep: dict[str, int]) -> list[float]:
    """One warm-up and `repeats` timed single-token forwards after a prefill, growing one cache."""
    out = model(input_ids=prompt, use_cache=True, **keep)
    cache = out.past_key_values
    token = out.logits[:, -1:].argmax(-1)
    runs = []
    for i in range(repeats + 1):
        holder = {}

        def step(token=token, holder=holder) -> None:
            holder["out"] = model(input_ids=token, past_key_values=cache, use_cache=True)

        ms = timed(step)
        token = holder["out"].logits[:, -1:].argmax(-1)
        if i:
            runs.append(ms)
    return runs


def _point(n: int, runs: list[float]) -> dict[str, Any]:
    """A measured point; the roofline's figures stay null until `complete` fills them in."""
    return {
        "prompt_tokens": n,
        "measured_ms": min(runs),
        "runs_ms": runs,
        "expected_ms": None,
        "memory_ms": None,
        "compute_ms": None,
        "bound": None,
        "bytes": None,
        "flops": None,
    }


def measured_crossing(points: list[dict], decode_ms: float) -> float | None:
    """Prompt length where measured prefill time first rises past `decode_ms` (linear between the
    two points around it); None when no point lies below it or none above it."""
    for before, after in itertools.pairwise(points):
        a, b = before["measured_ms"], after["measured_ms"]
        if a < decode_ms <= b:
            t = (decode_ms - a) / (b - a)
            return before["prompt_tokens"] + t * (after["prompt_tokens"] - before["prompt_tokens"])
    return None


def _write(result: dict[str, Any], runs_dir: Path, spec: SweepSpec, device_type: str) -> Path:
    """Into a hidden partial folder, then renamed into place: readers never see half a sweep."""
    source = spec.preset if spec.model is None else Path(spec.model.rstrip("/")).name
    source = re.sub(r"[^A-Za-z0-9._-]+", "_", source or "model")
    final = runs_dir / f"{time.strftime('%Y%m%d-%H%M%S')}_{device_type}_{source}_sweep_{secrets.token_hex(2)}"
    partial = Path(tempfile.mkdtemp(prefix=".partial-", dir=runs_dir))
    try:
        write_sweep_record(partial, result)
        partial.chmod(0o755)
        os.replace(partial, final)
    except OSError as exc:
        raise CollectorError(f"cannot write the sweep into {runs_dir}: {exc}") from exc
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return final / "sweep.json"
