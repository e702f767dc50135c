"""A capture's own check, standard library only: the GPU machine's image may lack pandas and msgspec.

Stepscope's readers need both; this needs gzip, json and tarfile. For each trace it counts what a
GPU capture must have (kernels, cudaGraphLaunch calls, kernel launch calls, stepscope markers), flags
kernels timed before the first host op (a clock or CUPTI start-up problem: they would sit before the
prefill), compares the markers with run.json, and writes a one-screen summary.

    python -m collectors.capture_check ARCHIVE_OR_FOLDER_OR_TRACE... [--summary FILE]

It reads a whole trace into Python objects, one loop over the events: a few seconds and a few GB for
the largest capture (~500k events), which the device machine has; nothing here is for analysis.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stepscope.contracts.markers import MARKER_PREFIX

KERNEL_CATEGORIES = frozenset({"kernel", "Kernel"})
HOST_CATEGORIES = frozenset(
    {"cpu_op", "Operator", "user_annotation", "User annotation", "cuda_runtime", "Runtime", "cuda_driver", "Driver"}
)
RUNTIME_CATEGORIES = frozenset({"cuda_runtime", "Runtime", "cuda_driver", "Driver"})
MARKER_CATEGORIES = frozenset({"user_annotation", "User annotation"})  # the host copy; gpu_user_annotation not
LAUNCH_CALL = re.compile(r"LaunchKernel|LaunchCooperativeKernel")  # cudaLaunchKernel(ExC), cuLaunchKernel(Ex), hip..
GRAPH_LAUNCH = re.compile(r"GraphLaunch")  # cudaGraphLaunch, cuGraphLaunch, hipGraphLaunch
TRACE_NAMES = ("trace.json.gz", "trace.json")
MIB = 1 << 20


@dataclass
class TraceCheck:
    """What one capture holds, counted from its trace; ``problems`` says what a GPU capture should not show."""

    name: str
    trace_bytes: int = 0  # the trace file as stored (gzipped)
    events: int = 0
    kernels: int = 0
    graph_launches: int = 0
    launch_calls: int = 0
    prefill_markers: int = 0
    decode_markers: int = 0
    kernels_before_host: int = 0  # kernels that start before the trace's first host op
    run: dict[str, Any] = field(default_factory=dict)  # the run.json beside the trace, {} when none
    problems: list[str] = field(default_factory=list)

    @property
    def forwards(self) -> int:
        return self.prefill_markers + self.decode_markers


def count_events(events: list[Any]) -> TraceCheck:
    """The counts of one trace's events (``problems`` left empty: see ``find_problems``)."""
    check = TraceCheck(name="", events=len(events))
    first_host = float("inf")
    kernel_starts: list[float] = []
    for event in events:
        if not isinstance(event, dict) or event.get("ph") != "X":
            continue
        category, name, ts = event.get("cat"), event.get("name"), event.get("ts")
        if not isinstance(name, str):
            name = ""
        if category in KERNEL_CATEGORIES:
            check.kernels += 1
            if isinstance(ts, int | float):
                kernel_starts.append(ts)
            continue
        if category not in HOST_CATEGORIES:
            continue
        if isinstance(ts, int | float):
            first_host = min(first_host, ts)
        if category in RUNTIME_CATEGORIES:
            check.graph_launches += bool(GRAPH_LAUNCH.search(name))
            check.launch_calls += bool(LAUNCH_CALL.search(name))
        elif category in MARKER_CATEGORIES and name.startswith(MARKER_PREFIX):
            check.prefill_markers += name.startswith(MARKER_PREFIX + "prefill[")
            check.decode_markers += name.startswith(MARKER_PREFIX + "decode[")
    check.kernels_before_host = sum(ts < first_host for ts in kernel_starts)
    return check


def find_problems(check: TraceCheck, limit_bytes: int) -> list[str]:
    """What is wrong with a capture, judged by what its run.json says ran (device, mode, markers)."""
    problems = []
    run = check.run
    on_gpu = run.get("device_type") == "cuda"
    mode = (run.get("spec") or {}).get("mode") if isinstance(run.get("spec"), dict) else None
    if check.trace_bytes > limit_bytes:
        problems.append(f"trace {check.trace_bytes / MIB:.1f} MiB, over the {limit_bytes / MIB:.0f} MiB limit")
    if on_gpu and check.kernels == 0:
        problems.append("no kernels: the profiler recorded no GPU activity")
    if on_gpu and mode == "cuda-graph" and check.graph_launches == 0:
        problems.append("cuda-graph run without a cudaGraphLaunch")
    if on_gpu and mode == "cuda-graph" and 0 < check.graph_launches < check.decode_markers:
        problems.append(f"{check.graph_launches} cudaGraphLaunch calls for {check.decode_markers} decode markers")
    if on_gpu and mode == "eager" and check.launch_calls == 0:
        problems.append("eager run without a kernel launch call")
    if check.kernels_before_host:
        problems.append(f"{check.kernels_before_host} kernels timed before the first host op")
    expected = run.get("markers") if isinstance(run.get("markers"), dict) else None
    if expected is not None:
        found = {"prefill": check.prefill_markers, "decode": check.decode_markers}
        if {k: expected.get(k) for k in found} != found:
            problems.append(f"markers {found}, run.json expects {expected}")
    if not run:
        problems.append("no run.json")
    return problems


def _read_source(path: Path) -> tuple[bytes, dict[str, Any], int]:
    """(trace JSON bytes, run.json content or {}, stored trace size) of an archive, a run folder or a trace."""
    if path.is_file() and tarfile.is_tarfile(path):
        with tarfile.open(path) as archive:
            members = {Path(m.name).name: m for m in archive.getmembers() if m.isfile()}
            trace_member = next((members[n] for n in TRACE_NAMES if n in members), None)
            if trace_member is None:
                raise ValueError(f"{path.name}: no trace.json.gz in the archive")
            stored = archive.extractfile(trace_member).read()
            run = json.loads(archive.extractfile(members["run.json"]).read()) if "run.json" in members else {}
        return _inflate(stored), run, len(stored)
    folder = path if path.is_dir() else path.parent
    trace = path if path.is_file() else next((folder / n for n in TRACE_NAMES if (folder / n).is_file()), None)
    if trace is None:
        raise ValueError(f"{path}: no trace.json.gz there")
    stored = trace.read_bytes()
    run_json = folder / "run.json"
    run = json.loads(run_json.read_bytes()) if run_json.is_file() else {}
    return _inflate(stored), run, len(stored)


def _inflate(stored: bytes) -> bytes:
    return gzip.decompress(stored) if stored[:2] == b"\x1f\x8b" else stored


def check_capture(path: str | Path, limit_bytes: int = 9 * MIB) -> TraceCheck:
    """Count and judge one capture; an unreadable one comes back with its reason as the only problem."""
    path = Path(path)
    name = path.name.removesuffix(".tar").removesuffix(".tar.gz")
    try:
        raw, run, stored_bytes = _read_source(path)
        document = json.loads(raw)
        events = document.get("traceEvents") if isinstance(document, dict) else document
        if not isinstance(events, list):
            raise ValueError("no traceEvents list")
    except (OSError, ValueError, tarfile.TarError, EOFError, KeyError) as exc:
        return TraceCheck(name=name, problems=[f"unreadable: {type(exc).__name__}: {str(exc)[:160]}"])
    check = count_events(events)
    check.name, check.trace_bytes, check.run = name, stored_bytes, run if isinstance(run, dict) else {}
    check.problems = find_problems(check, limit_bytes)
    return check


HEADER = (
    f"{'capture':44s} {'MiB':>5s} {'events':>8s} {'kernels':>8s} {'launch':>7s} {'graph':>6s} "
    f"{'prefill':>7s} {'decode':>6s} {'k/fwd':>6s} {'early':>5s}"
)


def summary_line(check: TraceCheck) -> str:
    per_forward = f"{check.kernels / check.forwards:6.0f}" if check.forwards else f"{'-':>6s}"
    return (
        f"{check.name[:44]:44s} {check.trace_bytes / MIB:5.2f} {check.events:8d} {check.kernels:8d} "
        f"{check.launch_calls:7d} {check.graph_launches:6d} {check.prefill_markers:7d} {check.decode_markers:6d} "
        f"{per_forward} {check.kernels_before_host:5d}"
    )


def format_summary(checks: list[TraceCheck], notes: list[str] | None = None, failures: int = 0) -> str:
    """One screen: a row per capture, then each capture's problems and the caller's notes (``failures``: how
    many captures the caller saw fail, which no trace shows)."""
    lines = [HEADER, *(summary_line(c) for c in checks)]
    lines.append("columns: launch = kernel launch calls, graph = cudaGraphLaunch calls, prefill/decode = stepscope")
    lines.append("markers, k/fwd = kernels per marked forward, early = kernels timed before the first host op")
    for check in checks:
        for problem in check.problems:
            lines.append(f"problem: {check.name}: {problem}")
    lines.extend(notes or [])
    if failures:
        lines.append(f"{failures} capture(s) failed")
    elif not any(c.problems for c in checks):
        lines.append("no problems found")
    return "\n".join(lines) + "\n"


def write_text_atomically(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m collectors.capture_check", description=__doc__.splitlines()[0])
    p.add_argument("paths", nargs="+", help="capture archives (.tar), run folders or trace files")
    p.add_argument("--summary", help="also write the summary to this file")
    p.add_argument("--limit-mib", type=float, default=9.0, help="flag traces above this size (default 9)")
    args = p.parse_args(argv)
    checks = [check_capture(path, int(args.limit_mib * MIB)) for path in args.paths]
    text = format_summary(checks)
    print(text, end="")
    if args.summary:
        write_text_atomically(Path(args.summary), text)
    return 1 if any(c.problems for c in checks) else 0


if __name__ == "__main__":
    sys.exit(main())
