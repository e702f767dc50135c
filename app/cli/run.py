"""`run ...`: a profiled generation (collectors.run's own options, passed through; needs the collect extra)."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    run = subparsers.add_parser(  # no option prefix: every word after `run` goes to collectors.run, --help too
        "run",
        add_help=False,
        prefix_chars="\0",
        help="profile a generation -> runs/<id>/trace.json.gz + run.json (needs torch; `run --help` for its options)",
    )
    run.add_argument("collector_args", nargs=argparse.REMAINDER, help="collectors.run's options")
    run.set_defaults(handler=run_collector)
    return run


def run_collector(args: argparse.Namespace) -> int:
    from stepscope.collectors.run import main

    return main(args.collector_args)
