"""Captures of a real vLLM server under load: `python -m tests.captures.vllm [CAPTURE ...] [--out DIR]`.

Each capture is a profile window of a real vLLM 0.32 OpenAI server on this machine's CPU (tests/vllm_server.py: a
tiny random-weight Llama, chunked prefill under a small token budget), opened with /start_profile, filled by a plan
of streamed completions sent from client threads at set offsets, and closed with /stop_profile. It becomes a folder
`<out>/<capture>/` holding the files vLLM wrote, under vLLM's own names (`rank0.<id>.pt.trace.json.gz` for the worker,
`<host>_<pid>.async_llm.<id>.pt.trace.json.gz` for the API server when its profile is on), and `<out>/<capture>
.truth.json`: the truth from vLLM itself (tests/captures/vllm_truth.py). The worker's trace is as vLLM wrote it
but for the spans and frames of the truth plugin, taken out (vLLM's `.profiler_out.txt` tables are not kept).

Captures that share server settings share one server (about two minutes to start here; one at a time on this
machine: see VllmServer). `make_twins` derives, by code, the traces other setups produce: annotations removed,
annotations and python frames removed, and either of those with record_shapes' inputs removed too.
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from tests.captures.vllm_truth import capture_truth, read_logs, take_markers
from tests.vllm_server import ServerOptions, VllmServer, make_model_dir, vllm_python

OUT = Path(__file__).resolve().parents[1] / "data" / "captures" / "vllm"
BUDGET = 64


@dataclass(frozen=True)
class Send:
    """One request of a plan: sent `at_s` after the profile starts, a prompt of `prompt` token ids, `new` tokens."""

    at_s: float
    prompt: int
    new: int


@dataclass(frozen=True)
class Capture:
    name: str
    server: ServerOptions
    plan: tuple[Send, ...]
    note: str
    warm_up: tuple[Send, ...] = ()  # sent before the profile starts (the batch shapes a plan meets, made once)


def _server(**changes) -> ServerOptions:
    return ServerOptions(max_num_batched_tokens=BUDGET, max_num_seqs=4, **changes)


SHAPES_STACKS = _server(record_shapes=True)
DEFAULTS_DETAILED = _server(detailed_annotations=True)  # vLLM's profiler defaults: stacks on, shapes off
SHAPES_ONLY = _server(record_shapes=True, with_stack=False)
NO_FRONT_END = _server(record_shapes=True, with_stack=False, profile_front_end=False)
SMALL_KV = _server(record_shapes=True, with_stack=False, block_size=32, kv_blocks=10, max_model_len=256)
# issue 41's serving findings, each with a capture made to show it and one made not to. The arrivals come from the
# API server's request frames, so those captures keep vLLM's default stacks (a worker's frames cost ~180 KB a step:
# their plans are a few steps long)
ARRIVALS = ServerOptions(max_num_batched_tokens=32, max_num_seqs=4, record_shapes=True)
# 7 blocks of 32 (vLLM's CPU attention takes multiples of 32): vLLM keeps one aside (its null block), 6 hold
# sequences, and 192 positions fit one request
# 5 blocks of 32: one aside, 4 hold sequences (128 positions): two requests of 70 positions (3 blocks each) cannot both
# finish, so vLLM preempts the later one when the first needs its third block, and recomputes it once that finishes
TINY_KV = _server(record_shapes=True, with_stack=False, block_size=32, kv_blocks=5, max_model_len=128)
KV_FULL = _server(record_shapes=True, block_size=32, kv_blocks=7, max_model_len=192)
# a model wide enough (512) that a prompt chunk of 256 positions costs several decode steps on this CPU
WIDE_CHUNKS = ServerOptions(
    max_num_batched_tokens=256, max_num_seqs=4, record_shapes=True, with_stack=False, hidden=512, max_model_len=2048
)

CAPTURES = {
    c.name: c
    for c in (
        Capture(
            "overlap_shapes_stacks",
            SHAPES_STACKS,
            (Send(0.0, 40, 6), Send(0.05, 150, 6), Send(0.3, 20, 6), Send(0.32, 90, 6)),
            "two bursts of two overlapping requests; a 150-token prompt chunked over three steps",
        ),
        Capture(
            "single_shapes_stacks",
            SHAPES_STACKS,
            (Send(0.0, 30, 6),),
            "one request: the single-request case of a server",
        ),
        Capture(
            "saturated_shapes_stacks",
            SHAPES_STACKS,
            tuple(Send(0.0, 12 + 9 * i, 5) for i in range(7)),
            "seven requests at once against --max-num-seqs 4: three wait for a free sequence slot",
        ),
        Capture(
            "long_defaults_detailed",
            DEFAULTS_DETAILED,
            (Send(0.0, 300, 5), Send(0.1, 200, 5), Send(0.15, 25, 5)),
            "long prompts chunked over several steps; vLLM's profiler defaults (stacks, no shapes), detailed "
            "annotations",
        ),
        Capture(
            "overlap_defaults",
            _server(),
            (Send(0.0, 60, 6), Send(0.02, 35, 6), Send(0.25, 110, 6), Send(0.27, 15, 6)),
            "two bursts; vLLM's profiler defaults (stacks on, shapes off, short annotations)",
        ),
        Capture(
            "joins_defaults",
            _server(),
            (Send(0.0, 40, 4), Send(0.03, 20, 4), Send(0.032, 90, 3)),
            "vLLM's profiler defaults (stacks on, shapes off, short annotations): two requests join a decoding one, "
            "the second's 90-token prompt cut by the budget beside them (a second shapes-off capture, kept small)",
        ),
        Capture(
            "overlap_shapes_nostack",
            SHAPES_ONLY,
            (Send(0.0, 25, 8), Send(0.04, 120, 8), Send(0.2, 45, 8), Send(0.22, 70, 8), Send(0.24, 10, 8)),
            "overlapping bursts; shapes on, stacks off (the API server's file then holds no request frames)",
        ),
        Capture(
            "preempt_shapes_nostack",
            SMALL_KV,
            (Send(0.0, 100, 70), Send(0.02, 100, 70), Send(0.04, 100, 70)),
            "a KV space of 10 blocks of 32 tokens for three requests of 170 tokens (6 blocks each): a running "
            "request is preempted and recomputed (made 2026-12-03: preempted at step 71 of 154)",
        ),
        Capture(
            "preempt_small",
            TINY_KV,
            (Send(0.0, 40, 30), Send(0.02, 40, 30)),
            "a KV space of 4 blocks of 32 for two requests of 70 positions (3 blocks each): the second is preempted "
            "when the first needs its third block, and recomputed (a prefill) once the first finishes",
        ),
        Capture(
            "hol_long_prompt",
            ARRIVALS,
            (Send(0.0, 320, 2), Send(0.02, 8, 2), Send(0.03, 8, 2)),
            "head-of-line blocking: a 320-token prompt chunked over ten steps of a 32-token budget while two short "
            "requests arrive; vLLM schedules the running prompt first, so they wait behind it",
        ),
        Capture(
            "never_fills",
            ARRIVALS,
            (Send(0.0, 12, 6), Send(0.05, 12, 6)),
            "a light load: two short requests, the second sent while the first decodes; at most two in a batch of "
            "four and none waiting (nothing long to wait behind either)",
        ),
        Capture(
            "queued_kv_full",
            KV_FULL,
            (Send(0.0, 80, 17), Send(0.0, 80, 17), Send(0.035, 8, 2), Send(0.035, 8, 2)),
            "queueing while the batch has room: two 80-token prompts (3 blocks of 32 each, up to their 96th "
            "position) take all six KV blocks, and two short requests wait for a block while two sequences run",
        ),
        Capture(
            "interference_chunks",
            WIDE_CHUNKS,
            (Send(0.0, 16, 40), Send(0.03, 1000, 2), Send(0.1, 1000, 2)),
            "prefill-decode interference: a request decoding while two 1000-token prompts are chunked beside it (256 "
            "positions a step, a model 512 wide)",
        ),
        Capture(
            "interference_small_chunks",
            WIDE_CHUNKS,
            (Send(0.0, 16, 40), Send(0.03, 6, 2), Send(0.06, 6, 2), Send(0.09, 6, 2), Send(0.12, 6, 2)),
            "interference_chunks' server with short prompts (6 tokens) joining the decoding request: mixed steps that "
            "cost next to nothing",
        ),
        Capture(
            "interference_tiny_prompts",
            WIDE_CHUNKS,
            (Send(0.0, 16, 70), Send(0.12, 1, 2), Send(0.24, 2, 2), Send(0.36, 1, 2), Send(0.48, 2, 2)),
            "interference_chunks' server with prompts of 1-2 tokens joining the decoding request one at a time: mixed "
            "steps with 1-2 prompt positions. Two such prompts together before the profile make the server's "
            "two-sequence shapes once (unwarmed, the first mixed step took 22 ms against 7 ms, 2026-12-04)",
            warm_up=(Send(0.0, 1, 2), Send(0.0, 2, 2)),
        ),
        Capture(
            "no_front_end",
            NO_FRONT_END,
            (Send(0.0, 50, 6), Send(0.03, 80, 6), Send(0.06, 15, 6)),
            "the API server not profiled (ignore_frontend): the worker's file alone",
        ),
    )
}


def run_plan(server: VllmServer, plan: tuple[Send, ...], first: int = 0) -> list:
    """Send the plan's requests from one thread each at their offsets; their client records, in plan order. Prompts
    are numbered from `first` (a warm-up's apart from the plan's, so they share no prefix)."""
    records: list = [None] * len(plan)
    start = time.monotonic()

    def send(i: int, item: Send) -> None:
        time.sleep(max(0.0, item.at_s - (time.monotonic() - start)))
        records[i] = server.complete(_prompt(first + i, item.prompt), item.new)

    threads = [threading.Thread(target=send, args=(i, item)) for i, item in enumerate(plan)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return records


def _prompt(i: int, length: int) -> list[int]:
    """Token ids of a prompt: words w<k>, each request starting elsewhere so prompts share no prefix."""
    return [8 + (97 * i + k) % 500 for k in range(length)]


def capture_session(captures: list[Capture], out: Path, model: Path, work: Path) -> list[dict]:
    """Run captures that share server settings on one server; returns their truth records."""
    profile = work / "profile"
    truth_log = work / "truth"
    truths = []
    with VllmServer(model, profile, captures[0].server, log_path=work / "server.log", truth_log=truth_log) as server:
        server.complete(_prompt(99, 8), 2)  # warm-up, outside any profile
        for capture in captures:
            before = set(profile.glob("*"))
            run_plan(server, capture.warm_up, first=50)
            server.start_profile()
            clients = run_plan(server, capture.plan)
            server.stop_profile()
            written = sorted(set(profile.glob("*.pt.trace.json.gz")) - before)
            truths.append(_write_capture(capture, written, clients, read_logs(truth_log), out))
            for path in profile.glob("*"):
                path.unlink()
    return truths


def _write_capture(capture: Capture, written: list[Path], clients: list, logs, out: Path) -> dict:
    folder = out / capture.name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    workers = [p for p in written if ".async_llm." not in p.name]
    spans: tuple[dict, dict] = ({}, {})
    base_us = 0.0
    for path in written:
        doc = json.loads(gzip.decompress(path.read_bytes()))
        if path in workers:
            spans = take_markers(doc)
            base_us = float(doc.get("baseTimeNanoseconds", 0)) / 1000
        _write_gzip_json(folder / path.name, doc)
    how = {
        "note": capture.note,
        "server": asdict(capture.server),
        "plan": [asdict(s) for s in capture.plan],
        "warm_up": [asdict(s) for s in capture.warm_up],
        "versions": _versions(),
    }
    files = {"workers": [p.name for p in workers], "front_end": [p.name for p in written if p not in workers]}
    truth = capture_truth(capture.name, how, spans, logs, clients, base_us, files)
    path = out / f"{capture.name}.truth.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(truth, indent=1) + "\n")
    tmp.replace(path)
    return truth


def _write_gzip_json(path: Path, doc: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=9) as fh:
        fh.write(json.dumps(doc, separators=(",", ":")).encode())
    tmp.replace(path)


def _versions() -> dict:
    import subprocess

    python = vllm_python()
    code = "import vllm, torch, transformers, platform; print(vllm.__version__, torch.__version__, "
    code += "transformers.__version__, platform.python_version())"
    text = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=300).stdout.split()
    keys = ("vllm", "torch", "transformers", "python")
    server = dict(zip(keys, text, strict=False))
    return {"server": server, "client_python": platform.python_version()}


SHAPE_ARGS = ("Input Dims", "Input type", "Input Strides", "Concrete Inputs")  # what record_shapes adds to an op


def make_twins(doc: dict, python: bool, shapes: bool = True) -> dict:
    """The worker trace other setups produce: vLLM's step annotations removed (`execute_...` spans), with `python`
    also every python frame (a profile without stacks), and without `shapes` every op's recorded inputs (a profile
    with record_shapes off, vLLM's default: only one capture was recorded so, and stripping lets every capture stand
    for that setup). Returns a new document."""
    events = []
    for event in doc.get("traceEvents", []):
        name = str(event.get("name", ""))
        if event.get("cat") in ("user_annotation", "gpu_user_annotation") and name.startswith("execute_"):
            continue
        if python and event.get("cat") == "python_function":
            continue
        if not shapes and any(k in (event.get("args") or {}) for k in SHAPE_ARGS):
            event = {**event, "args": {k: v for k, v in event["args"].items() if k not in SHAPE_ARGS}}
        events.append(event)
    twin = {k: v for k, v in doc.items() if k != "traceEvents"}
    if python:
        twin.pop("with_stack", None)
    if not shapes:
        twin.pop("record_shapes", None)
    twin["traceEvents"] = events
    return twin


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("captures", nargs="*", help=f"captures to make (default: all): {', '.join(CAPTURES)}")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    unknown = sorted(set(args.captures) - set(CAPTURES))
    if unknown:
        parser.error(f"unknown capture(s) {', '.join(unknown)}; known: {', '.join(CAPTURES)}")
    if vllm_python() is None:
        parser.error("vLLM's python is not installed (set VLLM_PYTHON)")
    chosen = [CAPTURES[n] for n in args.captures or CAPTURES]
    sessions: dict[ServerOptions, list[Capture]] = {}
    for capture in chosen:
        sessions.setdefault(capture.server, []).append(capture)
    with tempfile.TemporaryDirectory(prefix="vllm-captures-") as tmp:
        models: dict[int, Path] = {}
        for i, group in enumerate(sessions.values()):
            hidden = group[0].server.hidden
            if hidden not in models:
                models[hidden] = make_model_dir(Path(tmp) / f"model{hidden}", hidden=hidden)
            model = models[hidden]
            work = Path(tmp) / f"session{i}"
            for truth in capture_session(group, args.out, model, work):
                counts = {k: v for k, v in truth["counts"].items() if v}
                size = sum(p.stat().st_size for p in (args.out / truth["capture"]).iterdir()) >> 10
                print(f"{truth['capture']}: {truth['steps_recorded']} steps {counts}, ", end="")
                print(f"{truth['requests_in_trace']}/{truth['requests_sent']} requests, {size} KiB", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
