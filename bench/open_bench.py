"""Benchmark (issue 17): cold and warm `analyze --json` against HolisticTraceAnalysis, whole processes.

For each trace, three rounds; each round makes an EMPTY cache folder, runs
`python -m app.cli analyze TRACE --json` with STEPSCOPE_CACHE_DIR pointing at it (cold: parse,
analyse, fill the cache), then runs the same command again with the same folder (warm: a cache hit),
and runs HTA's TraceAnalysis on the trace. Every command runs twice: once only timed, once with its
memory sampled (another empty cache folder for the cold run). Why apart: reading smaps_rollup walks the
process's page tables under its memory lock every 5 ms, which slows a process that faults pages in on
two cores (Stepscope's parse) far more than a single-threaded one (HTA), so times taken while sampling
would not compare the two fairly. It prints the medians of the three rounds:

- wall seconds of the whole process (interpreter start and imports included), from the timed runs;
- peak memory of ALL processes of the command: the largest sum of the proportional set sizes (PSS)
  of the command and every process below it (the two-process parse forks one), sampled every 5 ms
  from /proc/PID/smaps_rollup. PSS splits a page shared by two processes between them, so the sum is
  the physical memory they use together. Also printed: the RSS sum (counts shared pages in every
  process, so errs high: after a fork the child's RSS starts at its parent's) and the largest single
  process's peak RSS from wait4;
- the ratios against HTA and whether the issue's bars are met: cold >= 15x faster and <= 0.5x the
  memory, warm >= 25x faster.

    python bench/open_bench.py [--gpu /tmp/big_gpu.json] [--cpu /tmp/big_cpu.json] [--rounds 3] [--skip-hta]

The traces are the ones ../shared/bench/ makes (see its README). HTA runs from bench/.venv-hta
(created by bench/parse_bench.py on first use). The machine's load is printed: wall times on a busy
machine are noisy, CPU seconds less so.

Before timing, the checkout's Python files are compiled to __pycache__ (what `pip install` does for an
installed package, and what Python itself does on a checkout's first import): HTA's packages in its venv
were compiled by pip, while a machine with PYTHONDONTWRITEBYTECODE set (this project's VM sets it) would
otherwise recompile Stepscope's sources on every run, about 0.05 s. `--no-compile` measures that case.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
HTA_PYTHON = BENCH / ".venv-hta" / "bin" / "python"
COLD_SPEEDUP, WARM_SPEEDUP, MEMORY_RATIO = 15.0, 25.0, 0.5
SOURCE_FOLDERS = (
    "stepscope",
    "contracts",
    "collectors",
    "parsers",
    "trace_cache",
    "analysis",
    "exporters",
    "batch",
    "app",
)  # the installed package's folders (setup.py)


def compile_bytecode() -> bool:
    """Compile the checkout's sources to __pycache__ as pip would for an install (see the module docstring)."""
    import compileall

    return all(compileall.compile_dir(ROOT / name, quiet=1) for name in SOURCE_FOLDERS if (ROOT / name).is_dir())


def _tree_memory_kb(pid: int) -> tuple[int, int]:
    """(PSS, RSS) KiB summed over `pid` and all its descendants right now ((0, 0) once it is gone).

    PSS charges each shared page to the processes sharing it in equal parts, so the sum is the
    physical memory the processes use together. RSS counts a shared page in every process: after a
    fork the child's RSS starts at its parent's, so the RSS sum counts the file's bytes twice.
    """
    pss = rss = 0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/smaps_rollup") as fh:
                for line in fh:
                    if line.startswith("Pss:"):
                        pss += int(line.split()[1])
                    elif line.startswith("Rss:"):
                        rss += int(line.split()[1])
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo += [int(c) for c in fh.read().split()]
        except (OSError, ValueError):
            continue
    return pss, rss


def run_child(cmd: list[str], env_cache: str | None, sample_memory: bool = True) -> None:
    """Launcher side: run `cmd`, print its wall time, CPU time and peak memory (all processes) as JSON.

    A separate small launcher, not the bench itself, starts the command: on Linux a child is charged
    the peak RSS of the process it was forked from, and the bench holds much more than this launcher.
    """
    env = dict(os.environ)
    if env_cache is not None:
        env["STEPSCOPE_CACHE_DIR"] = env_cache
    peak = [0, 0]  # PSS sum, RSS sum
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            pss, rss = _tree_memory_kb(proc.pid)
            peak[0], peak[1] = max(peak[0], pss), max(peak[1], rss)
            time.sleep(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    if sample_memory:
        sampler.start()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    done.set()
    if sample_memory:
        sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    result = {
        "s": round(seconds, 3),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "peak_mb": round(peak[0] / 1024, 1),  # PSS of all processes together
        "rss_sum_mb": round(peak[1] / 1024, 1),  # errs high: shared pages counted in each process
        "max_rss_mb": round(usage.ru_maxrss / 1024, 1),  # the largest single process (wait4)
        "rc": proc.returncode,
        "stderr": err.decode(errors="replace")[-400:] if proc.returncode else "",
    }
    print(json.dumps(result))


def measure(cmd: list[str], cache: str | None, sample_memory: bool) -> dict:
    mode = "--run-child" if sample_memory else "--run-child-timed"
    launcher = [sys.executable, str(Path(__file__).resolve()), mode, cache or "-", "--", *cmd]
    out = subprocess.run(launcher, capture_output=True, text=True, check=True)
    result = json.loads(out.stdout)
    if result["rc"] != 0:
        print(f"  FAILED rc={result['rc']}: {' '.join(cmd)}: {result['stderr']}", flush=True)
    return result


def _timed_with_memory(timed: dict, sampled: dict) -> dict:
    """Time (and wait4's peak RSS) from the timed run, the PSS and RSS sums from the sampled one."""
    return {
        **timed,
        "peak_mb": sampled["peak_mb"],
        "rss_sum_mb": sampled["rss_sum_mb"],
        "sampled_s": sampled["s"],
        "rc": timed["rc"] or sampled["rc"],
    }


def median(runs: list[dict], key: str) -> float | None:
    ok = [r[key] for r in runs if r["rc"] == 0]
    return round(statistics.median(ok), 3) if ok else None


def bench_trace(name: str, path: str, rounds: int, hta: bool) -> dict:
    cmd = [sys.executable, "-m", "app.cli", "analyze", path, "--json"]
    cold, warm, hta_runs = [], [], []
    for r in range(rounds):
        measured = {}
        for sample_memory in (False, True):  # timed, then sampled (see the module docstring)
            cache = tempfile.mkdtemp(prefix="stepscope-bench-cache-")
            try:
                measured["cold", sample_memory] = measure(cmd, cache, sample_memory)
                measured["warm", sample_memory] = measure(cmd, cache, sample_memory)
            finally:
                shutil.rmtree(cache, ignore_errors=True)
            if hta:
                hta_cmd = [str(HTA_PYTHON), str(BENCH / "hta_load.py"), path]
                measured["hta", sample_memory] = measure(hta_cmd, None, sample_memory)
        for label, runs in (("cold", cold), ("warm", warm), ("hta", hta_runs)):
            if (label, False) in measured:
                runs.append(_timed_with_memory(measured[label, False], measured[label, True]))
        print(
            f"  {name} round {r + 1}: cold {cold[-1]['s']:.2f} s {cold[-1]['peak_mb']:.0f} MB, "
            f"warm {warm[-1]['s']:.3f} s {warm[-1]['peak_mb']:.0f} MB"
            + (f", HTA {hta_runs[-1]['s']:.1f} s {hta_runs[-1]['peak_mb']:.0f} MB" if hta else ""),
            flush=True,
        )
    row = {"trace": name, "path": path, "file_mb": round(os.path.getsize(path) / 2**20, 1)}
    for label, runs in (("cold", cold), ("warm", warm), ("hta", hta_runs)):
        keys = ("s", "cpu_s", "peak_mb", "rss_sum_mb", "max_rss_mb", "sampled_s")
        row[label] = {k: median(runs, k) for k in keys} if runs else None
        row[f"{label}_runs"] = [{k: r[k] for k in (*keys, "rc")} for r in runs]
    h = row["hta"] or {}
    if h.get("s") and row["cold"]["s"] and row["warm"]["s"]:
        row["cold_speedup"] = round(h["s"] / row["cold"]["s"], 1)
        row["warm_speedup"] = round(h["s"] / row["warm"]["s"], 1)
        row["cold_memory_ratio"] = round(row["cold"]["peak_mb"] / h["peak_mb"], 3)
    return row


def print_table(rows: list[dict]) -> None:
    header = (
        "trace",
        "MB",
        "cold s",
        "warm s",
        "HTA s",
        "cold x",
        "warm x",
        "cold MB",
        "warm MB",
        "HTA MB",
        "mem",
        "cold RSS-sum MB",
        "HTA RSS-sum MB",
    )
    lines = [header]
    for r in rows:
        c, w, h = r["cold"] or {}, r["warm"] or {}, r["hta"] or {}
        lines.append(
            tuple(
                str(v) if v is not None else "-"
                for v in (
                    r["trace"],
                    r["file_mb"],
                    c.get("s"),
                    w.get("s"),
                    h.get("s"),
                    r.get("cold_speedup"),
                    r.get("warm_speedup"),
                    c.get("peak_mb"),
                    w.get("peak_mb"),
                    h.get("peak_mb"),
                    r.get("cold_memory_ratio"),
                    c.get("rss_sum_mb"),
                    h.get("rss_sum_mb"),
                )
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    print()
    for i, line in enumerate(lines):
        print("  ".join(cell.rjust(wd) for cell, wd in zip(line, widths, strict=True)))
        if i == 0:
            print("  ".join("-" * wd for wd in widths))
    print("MB columns: peak PSS summed over all processes of the command (see the docstring); mem = cold / HTA")
    print()
    for r in rows:
        if r.get("cold_speedup") is None:
            print(f"{r['trace']}: bars not evaluated (HTA skipped or a run failed)")
            continue
        checks = (
            (f"cold >= {COLD_SPEEDUP:g}x", r["cold_speedup"] >= COLD_SPEEDUP),
            (f"warm >= {WARM_SPEEDUP:g}x", r["warm_speedup"] >= WARM_SPEEDUP),
            (f"memory <= {MEMORY_RATIO:g} of HTA", r["cold_memory_ratio"] <= MEMORY_RATIO),
        )
        print(f"{r['trace']}: " + ", ".join(f"{label} {'MET' if ok else 'NOT MET'}" for label, ok in checks))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["--run-child"], ["--run-child-timed"]):
        run_child(argv[3:], None if argv[1] == "-" else argv[1], sample_memory=argv[0] == "--run-child")
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpu", default="/tmp/big_gpu.json", help="the 1.09M-event GPU bench trace")
    parser.add_argument("--cpu", default="/tmp/big_cpu.json", help="the 331k-event CPU bench trace")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-hta", action="store_true")
    parser.add_argument(
        "--no-compile",
        action="store_true",
        help="do not compile the checkout's bytecode first (see the module docstring)",
    )
    parser.add_argument("--out", default=str(BENCH / "out" / "open_bench.json"))
    args = parser.parse_args(argv)
    hta = not args.skip_hta
    if hta and not HTA_PYTHON.exists():
        print(f"{HTA_PYTHON} is missing: run bench/parse_bench.py once to create it, or pass --skip-hta")
        return 2
    if not args.no_compile:
        compiled = compile_bytecode()
        print(
            f"compiled the checkout's Python files to __pycache__ ({'ok' if compiled else 'with errors'}); "
            f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '(unset)')}"
        )
    load_before = os.getloadavg()
    rows = []
    for name, path in (("gpu", args.gpu), ("cpu", args.cpu)):
        if not Path(path).exists():
            print(f"{name}: {path} not found (make it with ../shared/bench/, see its README)")
            continue
        print(f"{name}: {path}", flush=True)
        rows.append(bench_trace(name, path, args.rounds, hta))
    print_table(rows)
    load_after = os.getloadavg()
    print(
        f"load average before {load_before[0]:.1f} / after {load_after[0]:.1f} on {os.cpu_count()} CPUs"
        + (" (busy machine: wall times are noisy)" if max(load_before[0], load_after[0]) > 1 else "")
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    report = {
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
        "cpus": os.cpu_count(),
        "rounds": args.rounds,
        "bytecode_compiled": not args.no_compile,
        "load_before": load_before,
        "load_after": load_after,
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
