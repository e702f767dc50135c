"""``batch GLOB_OR_DIR --out DIR [--workers N] [--ray auto|ADDRESS]``: registered in app.cli (app/cli/__init__.py)."""

from __future__ import annotations

import argparse
import sys


def add_batch_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("batch", help="analyse many traces into Parquet tables (locally or on Ray)")
    p.add_argument("source", help="a folder (searched recursively) or a glob of trace files")
    p.add_argument("--out", required=True, help="output folder: traces/steps/gaps/categories.parquet (resumed)")
    p.add_argument("--workers", type=int, default=None, help="local worker processes (default: cores, memory)")
    p.add_argument("--ray", default=None, metavar="auto|ADDRESS", help="run as Ray tasks on this cluster")
    p.set_defaults(handler=handle_batch)
    return p


def handle_batch(args: argparse.Namespace) -> int:
    from stepscope.batch.inputs import discover
    from stepscope.batch.runner import run_batch

    if args.workers is not None and args.workers < 1:
        print("error: --workers must be at least 1", file=sys.stderr)
        return 2
    if not discover(args.source):
        print(f"error: no trace files in {args.source[:200]}", file=sys.stderr)
        return 2
    try:
        report = run_batch(args.source, args.out, args.workers, args.ray)
    except (OSError, RuntimeError, ConnectionError) as exc:
        print(f"error: batch failed: {' '.join(str(exc).split())[:300]}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nerror: interrupted (finished traces are kept; run again to resume)", file=sys.stderr)
        return 2
    print(
        f"{report.inputs} traces: {report.analysed} analysed ({report.errors} errors), {report.skipped} already done,"
        f" {report.seconds:.1f} s on {report.runner}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m batch.cli")
    add_batch_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
