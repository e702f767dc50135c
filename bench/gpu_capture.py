"""The GPU captures of issue 28 in one prepared command: run it on a machine with a GPU, get archives in $OUT.

    OUT=/path/to/out python bench/gpu_capture.py                    # all six captures, ~5 minutes on an H200
    OUT=/path/to/out python bench/gpu_capture.py --only b1_cuda-graph  # rerun one (or a comma list)
    OUT=/tmp/dry python bench/gpu_capture.py --dry-run               # the whole script on the CPU, tiny preset

The captures, all llama-3-8b shapes (preset, random weights) in bf16, one model built once and reused:

    b1_eager, b1_cuda-graph       batch 1, 16-token prompt, 64 new tokens: the CUDA graphs off/on pair
    b16_eager, b16_cuda-graph     the same pair at batch 16
    b1_eager_prefill2000          a 2000-token prompt, 16 new tokens (prefill-heavy)
    b1_eager_stack                b1_eager with with_stack, with_modules, profile_memory and no markers

Each run goes through the collectors (collectors.run) into a temporary runs folder (its lock files stay
there) and comes out as one archive in $OUT, ``<gpu>_<preset>_<capture>.tar`` holding
``<gpu>_<preset>_<capture>/trace.json.gz`` and its run.json; then ``gpu_capture_summary.txt`` (the
checker's one screen, rewritten after every capture, so a killed run still leaves one) and
``gpu_capture.log`` (everything printed). At most 8 files. Decode steps recorded are capped so that each
trace stays under 9 MiB gzipped (bench/trace_size.py has the estimate); a trace that comes out larger than
its estimate shrinks the caps of the captures after it. A failed capture writes its error down and the
next one runs. ``--dry-run`` runs everything on the CPU with the tiny-llama preset and fewer tokens,
each cuda-graph capture run eager under its own archive name, marked ``dry_run`` in run.json.

The capture path imports only torch, transformers and the standard library (plus the collectors and
contracts, which import nothing else): the device image may have no pandas, msgspec or Streamlit.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import statistics
import sys
import tarfile
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.trace_size import MIB, TRACE_LIMIT_BYTES, TraceShape, decode_step_cap, estimate_trace_bytes  # noqa: E402
from stepscope.collectors.capture_check import (  # noqa: E402
    TraceCheck,
    check_capture,
    format_summary,
    write_text_atomically,
)

FILE_LIMIT_BYTES = 16 * MIB  # what the device tool brings back per file
OUT_LIMIT_BYTES = 62 * MIB  # and in all (64 MiB), less room for the summary and the log
SUMMARY_NAME = "gpu_capture_summary.txt"
LOG_NAME = "gpu_capture.log"
DRY_NEW_TOKENS, DRY_PROMPT_TOKENS, DRY_DECODE_CAP = 8, 256, 4  # every dry capture is capped: that path runs too
FOREIGN_MODULES = ("pandas", "msgspec", "streamlit", "plotly", "pyarrow")
FOREIGN_PACKAGES = ("analysis", "parsers", "app", "trace_cache", "exporters", "batch")


@dataclass(frozen=True)
class Capture:
    name: str  # the --only name and the archive's last part
    mode: str  # eager | cuda-graph
    batch: int
    prompt_tokens: int
    new_tokens: int
    stack: bool = False  # with_stack, with_modules, profile_memory on; markers off

    @property
    def shape(self) -> TraceShape:
        return TraceShape("stack" if self.stack else "plain", graph=self.mode == "cuda-graph")


CAPTURES = (
    Capture("b1_eager", "eager", 1, 16, 64),
    Capture("b1_cuda-graph", "cuda-graph", 1, 16, 64),
    Capture("b16_eager", "eager", 16, 16, 64),
    Capture("b16_cuda-graph", "cuda-graph", 16, 16, 64),
    Capture("b1_eager_prefill2000", "eager", 1, 2000, 16),
    Capture("b1_eager_stack", "eager", 1, 16, 64, stack=True),
)


@dataclass(frozen=True)
class Plan:
    """Where and how the captures run: the GPU run, or its dry run on the CPU."""

    dry_run: bool
    preset: str
    device: str
    dtype: str
    prefix: str = ""  # archive names' first part: the GPU's short name, "dryrun-cpu" for a dry run

    def capture_as_run(self, capture: Capture) -> Capture:
        """What actually runs: the dry run keeps the name but runs eager, with fewer tokens."""
        if not self.dry_run:
            return capture
        return dataclasses.replace(
            capture,
            mode="eager",
            new_tokens=min(capture.new_tokens, DRY_NEW_TOKENS),
            prompt_tokens=min(capture.prompt_tokens, DRY_PROMPT_TOKENS),
        )

    def stem(self, capture: Capture) -> str:
        return f"{self.prefix}_{self.preset}_{capture.name}"


@dataclass
class CaptureResult:
    name: str
    archive: Path | None = None
    check: TraceCheck | None = None
    error: str | None = None
    seconds: float = 0.0
    decode_cap: int | None = None
    estimate_bytes: int | None = None
    timings: dict[str, Any] = dataclasses.field(default_factory=dict)


def gpu_prefix(device_name: str) -> str:
    """ "NVIDIA H200" -> "h200", "NVIDIA A100-SXM4-80GB" -> "a100-sxm4-80gb": a short, file-safe GPU name."""
    words = [w for w in device_name.lower().replace("nvidia", " ").split() if w not in ("geforce", "tesla")]
    name = "-".join(words) or "gpu"
    return "".join(c if c.isalnum() or c in "-." else "-" for c in name)[:40]


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:300]
    return text if type(exc).__name__ == "CollectorError" else f"{type(exc).__name__}: {text}"


# ---- one capture ----------------------------------------------------------------------------------------------


def decode_cap_for(capture: Capture, plan: Plan, scale: float) -> tuple[int, int]:
    """(decode steps to record, the trace's estimated bytes at that cap); ``scale`` = worst actual/estimate so far."""
    limit = int(TRACE_LIMIT_BYTES / max(scale, 1.0))
    cap = decode_step_cap(capture.shape, capture.new_tokens, limit)
    if plan.dry_run:
        cap = min(cap, DRY_DECODE_CAP)
    return cap, estimate_trace_bytes(capture.shape, cap)


def run_capture(capture: Capture, plan: Plan, model: Any, work: Path, out: Path, scale: float) -> CaptureResult:
    """Profile one capture with the collectors, annotate its run.json, archive it into ``out`` and check it."""
    from stepscope.collectors.run import RunSpec, run_profiled_generation
    from stepscope.contracts.run_record import read_run_record, write_run_record

    started = time.perf_counter()
    runs = plan.capture_as_run(capture)
    cap, estimate = decode_cap_for(runs, plan, scale)
    spec = RunSpec(
        preset=plan.preset,
        device=plan.device,
        prompt_tokens=runs.prompt_tokens,
        new_tokens=runs.new_tokens,
        batch=runs.batch,
        mode=runs.mode,
        warmup=1,
        record_shapes=True,
        with_stack=runs.stack,
        with_modules=runs.stack,
        profile_memory=runs.stack,
        markers=not runs.stack,
        max_profiled_decode_steps=cap,
        dtype=plan.dtype,
    )
    print(
        f"== {capture.name}: {spec.mode}, batch {spec.batch}, {spec.prompt_tokens}-token prompt, "
        f"{spec.new_tokens} new tokens, cap {cap} decode steps (estimate {estimate / MIB:.1f} MiB)",
        flush=True,
    )
    run_dir = run_profiled_generation(spec, work / "runs", _progress, model=model)
    record = read_run_record(run_dir)
    if record is None:
        raise RuntimeError(f"no readable run.json in {run_dir.name}")
    stem = plan.stem(capture)
    capture_info = {
        "name": capture.name,
        "script": "bench/gpu_capture.py",
        "requested_mode": capture.mode,
        "decode_step_cap": cap,
        "estimated_trace_bytes": estimate,
    }
    extra = {**record.extra, "dry_run": plan.dry_run, "capture": capture_info}
    write_run_record(run_dir, dataclasses.replace(record, extra=extra))
    archive = write_archive(run_dir, out, stem)
    shutil.rmtree(run_dir, ignore_errors=True)
    check = check_capture(archive)
    return CaptureResult(
        capture.name,
        archive=archive,
        check=check,
        seconds=time.perf_counter() - started,
        decode_cap=cap,
        estimate_bytes=estimate,
        timings=record.timings,
    )


def write_archive(run_dir: Path, out: Path, stem: str) -> Path:
    """``out/stem.tar`` with ``stem/trace.json.gz`` and ``stem/run.json``: complete or absent, within the limits."""
    partial = run_dir.parent / f"{stem}.tar"
    with tarfile.open(partial, "w") as archive:
        for name in ("trace.json.gz", "run.json"):
            archive.add(run_dir / name, arcname=f"{stem}/{name}")
    size = partial.stat().st_size
    if size > FILE_LIMIT_BYTES:
        raise RuntimeError(f"archive {size / MIB:.1f} MiB, over the {FILE_LIMIT_BYTES // MIB} MiB a file may be")
    final = out / partial.name
    others = sum(p.stat().st_size for p in out.iterdir() if p.is_file() and p != final)
    if others + size > OUT_LIMIT_BYTES:
        raise RuntimeError(f"archive {size / MIB:.1f} MiB would take {out} past {OUT_LIMIT_BYTES // MIB} MiB")
    landing = out / f".{partial.name}.partial"
    shutil.copyfile(partial, landing)
    os.replace(landing, final)
    partial.unlink()
    return final


def _progress(stage: str, done: int, total: int) -> None:
    print(f"  {stage}: {done}/{total}", flush=True)


# ---- the set --------------------------------------------------------------------------------------------------


def run_all(
    captures: list[Capture],
    run_one: Callable[[Capture, float], CaptureResult],
    cleanup: Callable[[], str | None],
    write_summary: Callable[[list[CaptureResult]], None],
    budget_s: float,
) -> list[CaptureResult]:
    """Each capture in turn; a failure (and a failing cleanup after it) is written down and the next one runs."""
    started = time.perf_counter()
    results: list[CaptureResult] = []
    scale = {False: 1.0, True: 1.0}  # by graph or not: how far real sizes came out above the estimate
    for capture in captures:
        if time.perf_counter() - started > budget_s:
            results.append(CaptureResult(capture.name, error="skipped: the time budget (--budget-s) was spent"))
            write_summary(results)
            continue
        t0 = time.perf_counter()
        try:
            result = run_one(capture, scale[capture.shape.graph])
        except Exception as exc:  # fail soft: this capture's error is written down, the next one runs
            traceback.print_exc()
            result = CaptureResult(capture.name, error=one_line(exc), seconds=time.perf_counter() - t0)
            note = _guarded(cleanup)
            if note:
                result.error += f"; then freeing GPU memory failed: {note}"
        results.append(result)
        if result.check is not None and result.estimate_bytes:
            ratio = result.check.trace_bytes / result.estimate_bytes
            scale[capture.shape.graph] = max(scale[capture.shape.graph], ratio)
        print(
            f"   {capture.name}: {'ok' if result.error is None else 'FAILED: ' + result.error} "
            f"({result.seconds:.0f} s)",
            flush=True,
        )
        write_summary(results)
    return results


def _guarded(cleanup: Callable[[], str | None]) -> str | None:
    try:
        return cleanup()
    except Exception as exc:  # a broken CUDA context may raise from anything; the next capture still runs
        return one_line(exc)


def result_line(result: CaptureResult) -> str:
    if result.error is not None:
        return f"FAILED {result.name}: {result.error}"
    itl = result.timings.get("itl_ms") or []
    unprofiled = result.timings.get("unprofiled_itl_ms") or []
    p50 = f"{statistics.median(itl):.2f}" if itl else "-"
    u50 = f"{statistics.median(unprofiled):.2f}" if unprofiled else "-"
    ttft = result.timings.get("ttft_ms")
    size = result.check.trace_bytes / MIB if result.check else 0.0
    estimate = (result.estimate_bytes or 0) / MIB
    return (
        f"ok {result.name} {result.seconds:.0f} s: TTFT {ttft or 0:.1f} ms, ITL p50 {p50} / {u50} ms (profiled / not), "
        f"{result.decode_cap} steps, {size:.2f} MiB (est. {estimate:.2f})"
    )


def summary_text(results: list[CaptureResult], plan: Plan, header: list[str], earlier: list[str]) -> str:
    checks = [r.check for r in results if r.check is not None]
    notes = [*header, *(result_line(r) for r in results)]
    notes += [f"earlier archive in $OUT, not rerun now: {name}" for name in earlier]
    if plan.dry_run:
        notes.append("dry run: CPU, tiny preset, cuda-graph captures run eager; estimates are for the 8B GPU run")
    return format_summary(checks, notes, failures=sum(r.error is not None for r in results))


def foreign_modules() -> list[str]:
    """What the capture path must not have pulled in: libraries the device image may lack, Stepscope's readers."""
    found = [m for m in FOREIGN_MODULES if m in sys.modules]
    return found + [p for p in FOREIGN_PACKAGES if p in sys.modules or f"stepscope.{p}" in sys.modules]


# ---- the command ----------------------------------------------------------------------------------------------


class _Tee:
    """Everything printed goes to the console and to the log in $OUT (which comes back even after a kill)."""

    def __init__(self, console: Any, log: Any) -> None:
        self.console, self.log = console, log

    def write(self, text: str) -> int:
        self.console.write(text)
        self.log.write(text)
        if "\n" in text:
            self.flush()
        return len(text)

    def flush(self) -> None:
        self.console.flush()
        self.log.flush()

    def isatty(self) -> bool:
        return False


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python bench/gpu_capture.py", description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.environ.get("OUT"), help="output folder (default $OUT)")
    p.add_argument("--only", help="comma list of captures: " + ", ".join(c.name for c in CAPTURES))
    p.add_argument("--dry-run", action="store_true", help="on the CPU, tiny preset, fewer tokens, no CUDA calls")
    p.add_argument(
        "--budget-s", type=float, default=420.0, help="start no capture this many seconds after the script started"
    )
    return p.parse_args(argv)


def select(only: str | None) -> list[Capture]:
    """The captures ``--only`` names (all when None), in the set's order; ValueError naming an unknown one."""
    if not only:
        return list(CAPTURES)
    names = {n.strip() for n in only.split(",") if n.strip()}
    unknown = sorted(names - {c.name for c in CAPTURES})
    if unknown or not names:
        known = ", ".join(c.name for c in CAPTURES)
        raise ValueError(f"unknown capture {', '.join(unknown) or repr(only)}; known: {known}")
    return [c for c in CAPTURES if c.name in names]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not args.out:
        print("error: set $OUT (or --out) to the folder the archives go to", file=sys.stderr)
        return 2
    try:
        captures = select(args.only)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("STEPSCOPE_DEBUG", "1")  # a failed run prints its traceback (into the log)
    console_out, console_err = sys.stdout, sys.stderr
    with open(out / LOG_NAME, "a", encoding="utf-8") as log:
        sys.stdout, sys.stderr = _Tee(console_out, log), _Tee(console_err, log)
        try:
            return _capture_set(captures, out, args)
        finally:
            sys.stdout.flush()
            sys.stdout, sys.stderr = console_out, console_err


def _capture_set(captures: list[Capture], out: Path, args: argparse.Namespace) -> int:
    started = time.perf_counter()
    command = " ".join(["bench/gpu_capture.py", *sys.argv[1:]])
    print(f"=== {command} at {time.strftime('%Y-%m-%d %H:%M:%S')}", flush=True)
    earlier = sorted(p.name for p in out.glob("*.tar") if not any(p.name.endswith(f"_{c.name}.tar") for c in captures))
    plan, model, header = None, None, []
    try:
        plan, model, header = _prepare(args.dry_run, captures)
    except Exception as exc:  # no model, no GPU: every capture gets the reason
        traceback.print_exc()
        plan = plan or Plan(args.dry_run, "tiny-llama" if args.dry_run else "llama-3-8b", "-", "-", "none")
        results = [CaptureResult(c.name, error=f"not run: {one_line(exc)}") for c in captures]
        text = summary_text(results, plan, header, earlier)
        write_text_atomically(out / SUMMARY_NAME, text)
        print(text, end="")
        print(f"error: {one_line(exc)}", file=sys.stderr, flush=True)
        return 2
    with tempfile.TemporaryDirectory(prefix="gpu-capture-") as work:

        def run_one(capture: Capture, scale: float) -> CaptureResult:
            return run_capture(capture, plan, model, Path(work), out, scale)

        def cleanup() -> str | None:
            import gc

            import torch

            from stepscope.collectors.devices import release_device_memory

            gc.collect()
            return release_device_memory(torch.device(plan.device))

        def write_summary(results: list[CaptureResult]) -> None:
            write_text_atomically(out / SUMMARY_NAME, summary_text(results, plan, header, earlier))

        budget_left = args.budget_s - (time.perf_counter() - started)  # the model build and imports count too
        results = run_all(captures, run_one, cleanup, write_summary, budget_left)
    foreign = foreign_modules()
    header.append("capture path imports: " + (", ".join(foreign) if foreign else "torch, transformers, stdlib only"))
    teardown = os.environ.get("TEARDOWN_CUPTI", "unset")
    header.append(f"TEARDOWN_CUPTI={teardown} (the collectors set 0 before capturing a CUDA graph)")
    write_summary(results)
    print((out / SUMMARY_NAME).read_text(encoding="utf-8"), end="")
    print(f"=== done in {time.perf_counter() - started:.0f} s", flush=True)
    return 0 if all(r.error is None for r in results) and not foreign else 1


def _prepare(dry_run: bool, captures: list[Capture]) -> tuple[Plan, Any, list[str]]:
    """The plan, the one model every capture reuses, and the summary's header lines (what ran where)."""
    from stepscope.collectors.devices import device_name, parse_dtype
    from stepscope.collectors.model_loading import build_preset
    from stepscope.collectors.run import _quiet_libraries
    from stepscope.collectors.run_record import versions
    from stepscope.collectors.torch_setup import torch_and_device

    _quiet_libraries()
    _torch, device = torch_and_device("cpu" if dry_run else "cuda", "bench/gpu_capture.py")
    name = device_name(device)
    plan = Plan(
        dry_run=dry_run,
        preset="tiny-llama" if dry_run else "llama-3-8b",
        device=str(device),
        dtype="auto" if dry_run else "bf16",
        prefix="dryrun-cpu" if dry_run else gpu_prefix(name),
    )
    dtype = parse_dtype(plan.dtype, device)
    runs = [plan.capture_as_run(c) for c in captures]
    positions = max(c.prompt_tokens + c.new_tokens for c in runs)
    t0 = time.perf_counter()
    model = build_preset(plan.preset, device, dtype, max(c.batch for c in runs), positions)
    header = [
        f"device: {name[:100]}",
        "versions: " + ", ".join(f"{k} {v}" for k, v in versions().items()),
        f"model: {plan.preset} in {str(dtype).removeprefix('torch.')}, built once in "
        f"{time.perf_counter() - t0:.1f} s, reused by every capture",
    ]
    for line in header:
        print(line, flush=True)
    return plan, model, header


if __name__ == "__main__":
    sys.exit(main())
