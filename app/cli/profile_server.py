"""`python -m app.cli profile-server URL --trace-dir DIR (--requests N | --duration S) [--json] [--out DIR]`: profile a
live vLLM server (collectors/live_server.py) and print what `analyze` prints for the files the capture wrote, read as
`analyze DIR` reads a serving engine's profile folder. Progress goes to stderr as `progress: ...` lines (the Run
page's Live server tab runs this command as a child process and shows them); the client's own figures go to
capture.json (--out) and one stderr line."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from pathlib import Path

from .errors import UserError
from .options import add_analysis_options, analysis_options, given_args


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "profile-server",
        help="profile a live vLLM server (/start_profile, a workload, /stop_profile) and analyse the capture",
    )
    parser.add_argument("url", help="the server, http://HOST:PORT")
    parser.add_argument(
        "--trace-dir",
        required=True,
        type=Path,
        help="the server's torch_profiler_dir (on this machine or a shared disk)",
    )
    load = parser.add_mutually_exclusive_group(required=True)
    load.add_argument("--requests", type=int, metavar="N", help="send N streamed completions while profiling")
    load.add_argument(
        "--duration", type=float, metavar="S", help="profile the server's own traffic for S s, send nothing"
    )
    parser.add_argument("--prompt-tokens", default="16:256", metavar="A:B", help="prompt sizes drawn from A..B")
    parser.add_argument("--output-tokens", default="8:32", metavar="A:B", help="output sizes drawn from A..B (exact)")
    parser.add_argument("--arrival", choices=("burst", "spread"), default="burst", help="all at once, or 0.25 s apart")
    parser.add_argument("--seed", type=int, default=0, help="the sizes drawn: the same seed, the same requests")
    parser.add_argument(
        "--stop-timeout", type=float, default=300.0, metavar="S", help="how long /stop_profile may take"
    )
    parser.add_argument("--request-timeout", type=float, default=600.0, metavar="S", help="per request")
    parser.add_argument("--file-wait", type=float, default=30.0, metavar="S", help="wait for the files after the stop")
    parser.add_argument("--out", type=Path, default=None, help="keep the capture here, with capture.json")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    add_analysis_options(parser)
    parser.set_defaults(handler=run_profile_server)
    return parser


def _workload(args: argparse.Namespace):
    from stepscope.collectors.live_server import Workload, parse_range

    if args.requests is not None and not 1 <= args.requests <= 10000:
        raise UserError(f"--requests {args.requests}: give 1 to 10000")
    if args.duration is not None and not 0 < args.duration <= 3600:
        raise UserError(f"--duration {args.duration}: give more than 0 and at most 3600 seconds")
    return Workload(
        requests=args.requests or 0,
        prompt_tokens=parse_range(args.prompt_tokens, "--prompt-tokens"),
        output_tokens=parse_range(args.output_tokens, "--output-tokens"),
        arrival=args.arrival,
        seed=args.seed,
        duration_s=args.duration,
    )


def _progress(line: str) -> None:
    print(f"progress: {line}", file=sys.stderr, flush=True)


def _take_ctrl_c() -> None:
    """A process started from a script's background job inherits SIGINT ignored, and Python then leaves it ignored:
    Ctrl-C and the page's Stop would not reach the capture, which would profile on. Stopping the server's profiler
    is this command's promise, so it always takes SIGINT as KeyboardInterrupt (the `finally` sends /stop_profile)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)


def run_profile_server(args: argparse.Namespace) -> int:
    from stepscope.analysis.front_door import OpenedRun, open_folder
    from stepscope.collectors.errors import CollectorError
    from stepscope.collectors.live_server import keep_capture, probe, profile_server
    from stepscope.exporters.text_report import render_ranks_text, render_text
    from .analyze import _emit, _print_notes

    options = analysis_options(args)
    _take_ctrl_c()
    try:
        workload = _workload(args)
        info = probe(args.url)
        _progress(
            f"server {info.url}: vLLM {info.version or '?'}, model {info.model}, max_model_len {info.max_model_len}"
        )
        began = time.monotonic()
        capture = profile_server(
            info,
            args.trace_dir,
            workload,
            stop_timeout_s=args.stop_timeout,
            request_timeout_s=args.request_timeout,
            file_wait_s=args.file_wait,
            progress=_progress,
        )
        files = keep_capture(capture, args.out) if args.out is not None else capture.files
    except CollectorError as exc:
        raise UserError(str(exc)) from None
    failed = sum(c.error is not None for c in capture.clients)
    _progress(
        f"captured {len(files)} file(s) in {time.monotonic() - began:.1f} s (profiled {capture.profiled_s:.1f} s, "
        f"stop {capture.stop_s:.1f} s); requests sent {len(capture.clients)}, failed {failed}"
    )
    _progress("analysing")
    opened = open_folder(files, options, **given_args(args))
    _print_notes(opened.notes)
    report = opened.report
    found = (report.get("run") or {}).get("requests") if isinstance(opened, OpenedRun) else report.get("requests")
    _progress(f"Stepscope finds {found if found is not None else 'an unknown number of'} request(s) in the capture")
    if isinstance(opened, OpenedRun):
        return _emit(report, args.json, render_ranks_text)
    return _emit(report, args.json, render_text)
