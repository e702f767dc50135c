"""Write the captures: `python -m tests.captures.make [SHAPE ...] [--out DIR]` (default tests/data/captures).

Each shape becomes `<shape>.json.gz` (the Kineto trace, gzip with no timestamp) and `<shape>.truth.json`.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

from tests.captures.shapes import SHAPES
from tests.captures.truth import write_json

OUT = Path(__file__).resolve().parents[1] / "data" / "captures"


def write_capture(name: str, out: Path) -> dict:
    doc, truth = SHAPES[name]()
    out.mkdir(parents=True, exist_ok=True)
    trace = out / f"{name}.json.gz"
    tmp = trace.with_suffix(".gz.tmp")
    with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=9) as fh:
        fh.write(json.dumps(doc, separators=(",", ":")).encode())
    tmp.replace(trace)
    write_json(out / f"{name}.truth.json", truth)
    return truth


def main(argv: list[str] | None = None) -> int:
    import torch

    torch.set_num_threads(1)  # two cores shared with other work: one op thread keeps op times steady
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("shapes", nargs="*", help=f"shapes to capture (default: all): {', '.join(SHAPES)}")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    unknown = sorted(set(args.shapes) - set(SHAPES))
    if unknown:
        parser.error(f"unknown shape(s) {', '.join(unknown)}; known: {', '.join(SHAPES)}")
    for name in args.shapes or list(SHAPES):
        truth = write_capture(name, args.out)
        size = (args.out / f"{name}.json.gz").stat().st_size
        recorded, called = truth["forwards_recorded"], truth["forwards_called"]
        counts, requests = truth["counts"], truth["requests"]
        print(f"{name}: {recorded}/{called} forwards, {counts}, {requests} requests, {size >> 10} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
