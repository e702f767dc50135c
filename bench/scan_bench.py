"""How long a piece of a big trace takes to read, with the compiled scanner and with msgspec, in one process.

Each round reads the same pieces (cut as split_decode cuts them) both ways, one after the other: the file's bytes
into a buffer, the events into a column builder, the piece sorted and narrowed as the join wants it, the decoded
objects freed. Prints ns an event for each way and stage, and the ratio, per round and as medians. The scanner is
built first if need be (bench/scanner_ready.py).

    python bench/scan_bench.py [TRACE] [--pieces 40] [--rounds 3]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from itertools import pairwise
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scanner_ready import ensure_built  # noqa: E402

from parsers import scanned_piece, scanner, split_decode  # noqa: E402
from parsers.chrome_trace import _ColumnBuilder  # noqa: E402
from parsers.file_pieces import FileSource  # noqa: E402
from parsers.piece_merge import narrow_run, sort_run  # noqa: E402

STAGES = ("read", "decode", "columns", "sort", "free")


def _timed(read, decode, fill, count) -> tuple[int, list[float]]:
    """One piece through STAGES, each timed: its bytes read, decoded, a column builder filled, the piece sorted and
    narrowed, the decoded form freed. (events, seconds per stage)."""
    marks = [time.perf_counter()]
    raw = read()
    marks.append(time.perf_counter())
    decoded = decode(raw)
    marks.append(time.perf_counter())
    builder = _ColumnBuilder()
    fill(builder, decoded)
    marks.append(time.perf_counter())
    sort_run(builder.parts)
    narrow_run(builder.parts)
    marks.append(time.perf_counter())
    events = count(decoded)
    del decoded, raw
    marks.append(time.perf_counter())
    return events, [b - a for a, b in pairwise(marks)]


def _with_msgspec(source: FileSource, start: int, stop: int) -> tuple[int, list[float]]:
    return _timed(
        lambda: source.framed(start, stop, b"[", b"]"),
        split_decode._PIECE_DECODER.decode,
        _ColumnBuilder.add_batch,
        len,
    )


def _with_scanner(source: FileSource, start: int, stop: int, compiled) -> tuple[int, list[float]]:
    return _timed(
        lambda: np.frombuffer(source.framed(start, stop, b"", b""), dtype=np.uint8),
        lambda data: scanned_piece.scan_piece(compiled, data, 0, len(data)),
        _ColumnBuilder.add_scanned,
        lambda piece: piece.events,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", nargs="?", default="/tmp/big-serving.json")
    parser.add_argument("--pieces", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    print(ensure_built())
    compiled = scanner.load()
    if compiled is None:
        print("error: the compiled scanner does not load here", file=sys.stderr)
        return 2
    fd = os.open(args.trace, os.O_RDONLY)
    source = FileSource(fd, os.fstat(fd).st_size)
    first, _ = split_decode._array_start(source.head(split_decode.HEAD_BYTES))
    pieces = [p for p in split_decode._plan(source, first) if p[1] is not None][: args.pieces]
    gc.disable()  # as split_decode decodes
    ratios, per_way = [], {"msgspec": [], "scanner": []}
    for round_ in range(args.rounds):
        totals = {}
        for way in ("msgspec", "scanner"):
            events, stages = 0, [0.0] * len(STAGES)
            for start, stop in pieces:
                count, took = (
                    _with_msgspec(source, start, stop)
                    if way == "msgspec"
                    else _with_scanner(source, start, stop, compiled)
                )
                events += count
                stages = [a + b for a, b in zip(stages, took, strict=True)]
            totals[way] = sum(stages) / events * 1e9
            per_way[way].append(totals[way])
            detail = ", ".join(f"{name} {t / events * 1e9:.0f}" for name, t in zip(STAGES, stages, strict=True))
            print(f"round {round_ + 1} {way:8s} {totals[way]:6.0f} ns an event ({detail}; {events:,} events)")
        ratios.append(totals["scanner"] / totals["msgspec"])
    print(
        f"median: msgspec {statistics.median(per_way['msgspec']):.0f} ns, scanner "
        f"{statistics.median(per_way['scanner']):.0f} ns an event; scanner / msgspec {statistics.median(ratios):.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
