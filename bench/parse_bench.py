"""Benchmark: Stepscope's ``analyze`` against HolisticTraceAnalysis on large traces (issue 2, part 3).

Why: a 1M-event trace is normal and trace files of several hundred MB are common, so Stepscope must
read them far faster and in far less memory than HTA, the tool people would otherwise use. The
target is at least 20x faster than HTA and at most half its peak memory.

What it does, in one run:

1. builds (or reuses, from bench/out/) two large traces:
   - ``cpu``: a torch.profiler CPU trace of a long greedy generation by a tiny random Llama
     (about 300k events);
   - ``gpu``: a real A100 trace from ../shared/real_traces tiled about 10 times in time, with the
     correlation / External id / flow / Python ids / Ev Idx offset per copy (over 1M events);
2. runs ``python -m app.cli analyze FILE --json`` and HTA's ``TraceAnalysis`` on each file, each in
   a fresh child process, and takes the whole-process wall time and the peak RSS (``os.wait4``);
3. prints a table with the ratios, whether the targets are met, and writes bench/out/parse_bench.json.

HTA 0.5.0 needs pandas<3, so it runs from a venv of its own, bench/.venv-hta, created on first use.

    python bench/parse_bench.py [--only cpu|gpu] [--rebuild] [--repeat N] [--skip-hta]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
OUT = BENCH / "out"
REAL_TRACES = ROOT.parent / "shared" / "real_traces"
HTA_VENV = BENCH / ".venv-hta"
HTA_REQUIREMENTS = ["holistictraceanalysis==0.5.0", "pandas<3"]
DEFAULT_STEPSCOPE_CMD = f"{shlex.quote(sys.executable)} -m app.cli analyze {{file}} --json"

SPEEDUP_TARGET = 20.0  # HTA time / Stepscope time must be at least this
MEMORY_TARGET = 0.5  # Stepscope peak RSS / HTA peak RSS must be at most this

GPU_SOURCE = "hta_training_cudagraph_a100.json.gz"  # 108,936 events, A100, MIT (see PROVENANCE.md)
GPU_COPIES = 10
GPU_GAP_US = 1000
# Per-event ids that link events together; each copy shifts them so links stay unique and inside a copy.
ID_ARGS = (
    "correlation",
    "External id",
    "external id",
    "Python id",
    "Python parent id",
    "Ev Idx",
    "Record function id",
)
CPU_NEW_TOKENS = 520  # about 580 events per token with the model below, so about 300k events


# ---------------------------------------------------------------------------------------------
# Building the traces


def build_gpu_trace(path: Path, source: Path = REAL_TRACES / GPU_SOURCE, copies: int = GPU_COPIES) -> int:
    """Tile a real GPU trace ``copies`` times in time and stream it to ``path``; return the event count.

    Tiling a real capture keeps the event mix (kernels, runtime calls, flows, cudaGraphLaunch) real,
    which a synthetic generator would not. Each copy starts one source span plus a gap after the
    previous one, and every linking id is shifted by one common stride (so a flow id that equals a
    correlation id still does). "M" metadata events are written once. Events are written one by one,
    so only the source trace is ever held in memory.
    """
    with gzip.open(source, "rt") if source.suffix == ".gz" else open(source) as fh:
        trace = json.load(fh)
    events = trace.pop("traceEvents")
    timed = [e for e in events if e.get("ph") != "M" and "ts" in e]
    t_start = min(e["ts"] for e in timed)
    t_end = max(e["ts"] + (e.get("dur") or 0) for e in timed)
    shift = int(t_end - t_start) + 1 + GPU_GAP_US
    stride = 1 + max(
        [e["id"] for e in events if isinstance(e.get("id"), int)]
        + [v for e in events for k, v in e.get("args", {}).items() if k in ID_ARGS and isinstance(v, int)]
    )

    count = 0
    tmp = path.with_suffix(".partial")
    with open(tmp, "w") as out:
        out.write("{\n")
        for key, value in trace.items():
            out.write(f"  {json.dumps(key)}: {json.dumps(value)},\n")
        out.write('  "traceEvents": [\n')
        for copy in range(copies):
            for event in events:
                if event.get("ph") == "M":
                    if copy:
                        continue
                else:
                    event = _shifted(event, copy * shift, copy * stride)
                out.write(("" if count == 0 else ",\n") + json.dumps(event))
                count += 1
        out.write("\n  ]\n}\n")
    tmp.rename(path)
    return count


def _shifted(event: dict[str, Any], dt: int, did: int) -> dict[str, Any]:
    """Return a copy of ``event`` moved ``dt`` later with its linking ids raised by ``did``."""
    event = dict(event)
    if "ts" in event:
        event["ts"] += dt
    if isinstance(event.get("id"), int):
        event["id"] += did
    args = event.get("args")
    if args and any(k in args for k in ID_ARGS):
        event["args"] = args = dict(args)
        for key in ID_ARGS:
            if isinstance(args.get(key), int):
                args[key] += did
    return event


def build_cpu_trace(path: Path, new_tokens: int = CPU_NEW_TOKENS) -> int:
    """Profile a long greedy generation on CPU and export it to ``path``; return the event count.

    This is the trace a user without a GPU gets: many short CPU ops per token, a long sequence of
    decode steps. The model is a tiny randomly initialised Llama, so nothing is downloaded;
    ``min_new_tokens == max_new_tokens`` makes the length fixed whatever the random weights emit.
    """
    import torch
    from torch.profiler import ProfilerActivity, profile
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        vocab_size=1000,
        max_position_embeddings=4096,
    )
    model = LlamaForCausalLM(config).eval()
    prompt = torch.randint(0, config.vocab_size, (1, 16))
    with torch.inference_mode(), profile(activities=[ProfilerActivity.CPU]) as prof:
        model.generate(prompt, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
    tmp = path.with_suffix(".partial.json")
    prof.export_chrome_trace(str(tmp))
    tmp.rename(path)
    with open(path) as fh:
        return len(json.load(fh)["traceEvents"])


def ensure_trace(name: str, rebuild: bool) -> dict[str, Any]:
    """Return path, size and event count of bench trace ``name``, building it if absent or asked to.

    Each trace lives in a folder of its own (HTA, given only a folder, parses every trace in it).
    """
    folder = OUT / name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}_trace.json"
    meta_path = folder / "meta.json"
    if rebuild or not path.exists() or not meta_path.exists():
        print(f"building {name} trace -> {path.relative_to(ROOT)} ...", flush=True)
        t0 = time.perf_counter()
        events = build_gpu_trace(path) if name == "gpu" else build_cpu_trace(path)
        meta = {"events": events, "build_s": round(time.perf_counter() - t0, 1)}
        meta_path.write_text(json.dumps(meta))
    meta = json.loads(meta_path.read_text())
    info = {
        "trace": name,
        "path": str(path),
        "file_mb": round(path.stat().st_size / 2**20, 1),
        "events": meta["events"],
    }
    print(f"{name} trace: {info['file_mb']} MB, {info['events']:,} events", flush=True)
    return info


# ---------------------------------------------------------------------------------------------
# HTA's environment


def ensure_hta_venv() -> Path | None:
    """Return the Python of bench/.venv-hta, creating it if needed; None (and say why) if that fails."""
    python = HTA_VENV / "bin" / "python"
    check = [str(python), "-c", "import hta.trace_analysis"]
    if python.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return python
    print(
        f"creating {HTA_VENV.relative_to(ROOT)} with {' '.join(HTA_REQUIREMENTS)} (a few minutes) ...",
        flush=True,
    )
    log = OUT / "hta_install.log"
    with open(log, "w") as fh:
        ok = (
            subprocess.run([sys.executable, "-m", "venv", str(HTA_VENV)], stdout=fh, stderr=fh).returncode == 0
            and subprocess.run(
                [str(python), "-m", "pip", "install", *HTA_REQUIREMENTS], stdout=fh, stderr=fh
            ).returncode
            == 0
            and subprocess.run(check, stdout=fh, stderr=fh).returncode == 0
        )
    if not ok:
        print(f"HTA install FAILED (see {log.relative_to(ROOT)}): HTA columns will be empty", flush=True)
        return None
    return python


# ---------------------------------------------------------------------------------------------
# Measuring


def measure(cmd: list[str], cwd: Path, log_stem: Path) -> dict[str, Any]:
    """Run ``cmd`` in a fresh child process; return its wall time, peak RSS and exit code.

    The child is started by a small launcher process (this file with ``--run-child``), not by the
    bench itself: Linux counts the peak RSS of the process image a child replaces at exec into the
    child's ru_maxrss, so a child spawned straight from the bench, which holds torch and a parsed
    trace, would be charged the bench's memory. The launcher is a bare Python (~10 MB) that only
    times the command and reads its peak RSS with ``os.wait4``. stdout and stderr go to files next
    to the trace, for a look when something fails.
    """
    launcher = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--run-child",
        str(cwd),
        str(log_stem),
        "--",
        *cmd,
    ]
    done = subprocess.run(launcher, capture_output=True, text=True, check=True)
    result = json.loads(done.stdout)
    if result["rc"] != 0:
        tail = Path(f"{log_stem}.stderr").read_text(errors="replace").strip().splitlines()[-5:]
        result["error"] = "\n".join(tail)
        print(f"  FAILED rc={result['rc']}: {shlex.join(cmd)}\n    " + "\n    ".join(tail), flush=True)
    return result


def _run_child(cwd: str, log_stem: str, cmd: list[str]) -> None:
    """Launcher side of :func:`measure`: run ``cmd``, print its time, peak RSS and exit code as JSON."""
    with open(f"{log_stem}.stdout", "wb") as out, open(f"{log_stem}.stderr", "wb") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)  # already reaped; keeps Popen from waiting again
    # ru_maxrss is in KiB on Linux; it covers the child and any children it waited for.
    # cpu_s (user + system) is kept too: on a busy machine it moves far less than the wall time.
    result = {
        "s": round(seconds, 3),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "peak_mb": round(usage.ru_maxrss / 1024, 1),
        "rc": proc.returncode,
    }
    print(json.dumps(result))


def measure_repeated(cmd: list[str], cwd: Path, log_stem: Path, repeat: int) -> dict[str, Any]:
    """Measure ``repeat`` times; report the medians (every run is a fresh process)."""
    runs = [measure(cmd, cwd, log_stem) for _ in range(repeat)]
    ok = [r for r in runs if r["rc"] == 0]
    if not ok:
        return runs[-1]
    return {
        "s": round(statistics.median(r["s"] for r in ok), 3),
        "peak_mb": round(statistics.median(r["peak_mb"] for r in ok), 1),
        "cpu_s": round(statistics.median(r["cpu_s"] for r in ok), 3),
        "rc": 0,
        "runs": [{k: r[k] for k in ("s", "cpu_s", "peak_mb")} for r in runs],
    }


def stepscope_command(template: str, file: str) -> list[str]:
    """Split the ``--stepscope-cmd`` template and put the trace path where ``{file}`` is."""
    return [part.replace("{file}", file) for part in shlex.split(template)]


# ---------------------------------------------------------------------------------------------
# Reporting


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_table(rows: list[dict[str, Any]]) -> None:
    """Print the side-by-side table and, per trace, whether both targets are met."""
    header = (
        "trace",
        "file MB",
        "events",
        "stepscope s",
        "stepscope MB",
        "HTA s",
        "HTA MB",
        "speedup",
        "mem ratio",
    )
    lines = [header]
    for r in rows:
        s, h = r.get("stepscope") or {}, r.get("hta") or {}
        lines.append(
            (
                r["trace"],
                _fmt(r["file_mb"], ".1f"),
                f"{r['events']:,}",
                _fmt(s.get("s") if s.get("rc") == 0 else None, ".2f"),
                _fmt(s.get("peak_mb") if s.get("rc") == 0 else None, ".0f"),
                _fmt(h.get("s") if h.get("rc") == 0 else None, ".2f"),
                _fmt(h.get("peak_mb") if h.get("rc") == 0 else None, ".0f"),
                _fmt(r.get("speedup"), ".1f") + ("x" if r.get("speedup") else ""),
                _fmt(r.get("memory_ratio"), ".2f"),
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    print()
    for i, line in enumerate(lines):
        print(
            "  ".join(
                cell.rjust(w) if c else cell.ljust(w) for c, (cell, w) in enumerate(zip(line, widths, strict=True))
            )
        )
        if i == 0:
            print("  ".join("-" * w for w in widths))
    print()
    for r in rows:
        if r.get("speedup") is None or r.get("memory_ratio") is None:
            print(f"{r['trace']}: targets not evaluated (a run failed or was skipped)")
            continue
        fast, small = r["speedup"] >= SPEEDUP_TARGET, r["memory_ratio"] <= MEMORY_TARGET
        print(
            f"{r['trace']}: speed >= {SPEEDUP_TARGET:g}x {'MET' if fast else 'NOT MET'}, "
            f"memory <= {MEMORY_TARGET:g} of HTA {'MET' if small else 'NOT MET'}"
        )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--run-child"]:
        _run_child(argv[1], argv[2], argv[4:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["cpu", "gpu"], help="bench one trace only")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the traces cached in bench/out/")
    parser.add_argument("--repeat", type=int, default=1, help="runs per command (median is reported)")
    parser.add_argument("--skip-hta", action="store_true", help="measure Stepscope only")
    parser.add_argument(
        "--stepscope-cmd",
        default=DEFAULT_STEPSCOPE_CMD,
        help="command run from the repo root, {file} is the trace (default: the real CLI)",
    )
    args = parser.parse_args(argv)

    OUT.mkdir(parents=True, exist_ok=True)
    names = [args.only] if args.only else ["cpu", "gpu"]
    traces = [ensure_trace(name, args.rebuild) for name in names]

    run_stepscope = True
    if args.stepscope_cmd == DEFAULT_STEPSCOPE_CMD and not (ROOT / "app" / "cli.py").exists():
        print(
            "app/cli.py does not exist yet: Stepscope columns will be empty "
            "(use --stepscope-cmd to try the harness with another command)",
            flush=True,
        )
        run_stepscope = False
    hta_python = None if args.skip_hta else ensure_hta_venv()

    rows = []
    for info in traces:
        row = dict(info)
        stem = Path(info["path"]).with_suffix("")
        if run_stepscope:
            print(f"{info['trace']}: stepscope ...", flush=True)
            cmd = stepscope_command(args.stepscope_cmd, info["path"])
            row["stepscope"] = measure_repeated(cmd, ROOT, Path(f"{stem}.stepscope"), args.repeat)
        if hta_python is not None:
            print(f"{info['trace']}: HTA ...", flush=True)
            cmd = [str(hta_python), str(BENCH / "hta_load.py"), info["path"]]
            row["hta"] = measure_repeated(cmd, ROOT, Path(f"{stem}.hta"), args.repeat)
        s, h = row.get("stepscope", {}), row.get("hta", {})
        both = s.get("rc") == 0 and h.get("rc") == 0
        row["speedup"] = round(h["s"] / s["s"], 2) if both else None
        row["memory_ratio"] = round(s["peak_mb"] / h["peak_mb"], 3) if both else None
        rows.append(row)

    print_table(rows)
    load = os.getloadavg()[0]
    if load > 0.5 * (os.cpu_count() or 1):
        print(
            f"note: load average {load:.1f} on {os.cpu_count()} CPUs: other work ran, wall times are noisy "
            "(cpu_s in the JSON is steadier)"
        )
    report = {
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "stepscope_cmd": args.stepscope_cmd,
        "hta": None if hta_python is None else HTA_REQUIREMENTS,
        "repeat": args.repeat,
        "targets": {"speedup_min": SPEEDUP_TARGET, "memory_ratio_max": MEMORY_TARGET},
        "results": rows,
    }
    (OUT / "parse_bench.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {(OUT / 'parse_bench.json').relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
