"""How long a piece of a big trace takes to read: with msgspec (the reader's way), with pyarrow's JSON reader and
with polars'.

Each round reads the same pieces (cut as parsers/kineto/pieces.py cuts them) each way, one after the other: the
file's bytes into a buffer, the events into columns, the piece sorted and narrowed as the join wants it, the decoded
objects freed. Prints ns an event for each way and stage, and the ratio, per round and as medians.

polars (when importable: it is not a dependency) reads the piece with an explicit schema of the fields Stepscope
reads (parsers/kineto/fields.py) but "Input Dims", its `name` and `cat` as categoricals; its "columns" stage is its
duration rows' columns as numpy arrays and codes, not the column builder's exact tables: a lower bound of what a
polars reader would cost, for the decision "is a well-kept library as fast" (README, "Speed and memory").

pyarrow (a dependency already) reads whitespace-separated objects, not an array: its "read" stage also turns the
commas between the piece's events into spaces (the cut pattern of pieces.py; a lower bound again, since a reader
would have to prove no comma inside a string was taken) and reads the same fields, `name` and `cat`
dictionary-encoded after the read (its reader cannot decode into dictionaries).

The compiled scanner this was also measured against (through Numba's public caching) is in the history of this file
(commit cfe4f97, `parsers/kineto/scan.py`), with the figures in the README.

    python bench/scan_bench.py [TRACE] [--pieces 40] [--rounds 3]
"""

from __future__ import annotations

import argparse
import gc
import importlib
import io
import os
import statistics
import sys
import time
from itertools import pairwise
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stepscope.parsers.kineto import pieces as split_decode  # noqa: E402
from stepscope.parsers.kineto.columns import ColumnBuilder as _ColumnBuilder  # noqa: E402
from stepscope.parsers.kineto.fields import EVENT_FIELDS  # noqa: E402
from stepscope.parsers.kineto.file_pieces import FileSource  # noqa: E402
from stepscope.parsers.kineto.join import narrow_run, sort_run  # noqa: E402

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
        split_decode.PIECE_DECODER.decode,
        _ColumnBuilder.add_batch,
        len,
    )


def _polars_schema(pl):
    kinds = {"time": pl.Float64, "text": pl.String, "id": pl.Int64, "int": pl.Int64}
    kinds["volume"] = pl.List(pl.Int64)
    # "Input Dims" is left out: polars has no type for JSON kept as written (a list of lists of anything)
    args = pl.Struct({f.key: kinds[f.kind] for f in EVENT_FIELDS if f.in_args and f.kind != "raw"})
    return {"ph": pl.String, **{f.key: kinds[f.kind] for f in EVENT_FIELDS if not f.in_args}, "args": args}


def _with_polars(source: FileSource, start: int, stop: int, pl, schema) -> tuple[int, list[float]]:
    def decode(raw):
        return pl.read_json(io.BytesIO(bytes(raw)), schema=schema, infer_schema_length=None)

    def fill(builder, frame):
        rows = frame.filter(pl.col("ph") == "X")
        parts = builder.parts
        parts["ts"].append((rows["ts"].to_numpy() * 1000).astype(np.int64))
        parts["dur"].append((rows["dur"].to_numpy() * 1000).astype(np.int64))
        for key in ("name", "cat"):
            codes = rows[key].cast(pl.Categorical).to_physical().to_numpy().astype(np.int64)
            parts["name" if key == "name" else "kind"].append(codes)
        for key in ("pid", "tid"):
            parts[key].append(rows[key].fill_null(0).to_numpy())
        args = rows["args"].struct
        for key, column in (("correlation", "correlation"), ("External id", "external_id"), ("device", "device")):
            parts[column].append(args.field(key).fill_null(-1).to_numpy())
        for column in ("stream", "input_dims", "grid", "block"):
            parts[column].append(np.zeros(len(rows), dtype=np.int64))

    return _timed(lambda: source.framed(start, stop, b"[", b"]"), decode, fill, len)


def _pyarrow_schema():
    import pyarrow as pa

    kinds = {"time": pa.float64(), "text": pa.string(), "id": pa.int64(), "int": pa.int64()}
    kinds["volume"] = pa.list_(pa.int64())
    args = pa.struct([(f.key, kinds[f.kind]) for f in EVENT_FIELDS if f.in_args and f.kind != "raw"])
    top = [(f.key, kinds[f.kind]) for f in EVENT_FIELDS if not f.in_args]
    return pa.schema([("ph", pa.string()), *top, ("args", args)])


def _with_pyarrow(source: FileSource, start: int, stop: int, schema) -> tuple[int, list[float]]:
    import pyarrow.compute as pc
    import pyarrow.json as pj

    options = pj.ParseOptions(explicit_schema=schema, newlines_in_values=True, unexpected_field_behavior="ignore")

    def read():  # the objects separated by whitespace, as pyarrow reads them
        return split_decode._CUT.sub(b"} {", source.framed(start, stop, b"", b""))

    def decode(objects):
        return pj.read_json(io.BytesIO(objects), read_options=pj.ReadOptions(use_threads=False), parse_options=options)

    def fill(builder, table):
        rows = table.filter(pc.equal(table["ph"], "X"))
        parts = builder.parts
        for key in ("ts", "dur"):
            parts[key].append((rows[key].to_numpy() * 1000).astype(np.int64))
        for key, column in (("name", "name"), ("cat", "kind")):
            parts[column].append(rows[key].combine_chunks().dictionary_encode().indices.to_numpy().astype(np.int64))
        for key in ("pid", "tid"):
            parts[key].append(rows[key].fill_null(0).to_numpy())
        for key, column in (("correlation", "correlation"), ("External id", "external_id"), ("device", "device")):
            parts[column].append(pc.struct_field(rows["args"], key).fill_null(-1).to_numpy())
        for column in ("stream", "input_dims", "grid", "block"):
            parts[column].append(np.zeros(len(rows), dtype=np.int64))

    return _timed(read, decode, fill, len)


def _one_round(read, pieces: list) -> tuple[int, list[float]]:
    """Every piece read one way: (events, seconds per stage summed over the pieces)."""
    events, stages = 0, [0.0] * len(STAGES)
    for start, stop in pieces:
        count, took = read(start, stop)
        events += count
        stages = [a + b for a, b in zip(stages, took, strict=True)]
    return events, stages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", nargs="?", default=str(ROOT / "bench" / "out" / "big-serving.json"))
    parser.add_argument("--pieces", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    try:  # not a dependency of the project: looked up by name, so that the import check does not ask for it
        pl = importlib.import_module("polars")
    except ImportError:
        pl = None
        print("polars is not installed here (pip install polars): measuring msgspec and pyarrow", file=sys.stderr)
    ways = ("msgspec", "pyarrow", "polars") if pl is not None else ("msgspec", "pyarrow")
    schema = _polars_schema(pl) if pl is not None else None
    arrow_schema = _pyarrow_schema()
    fd = os.open(args.trace, os.O_RDONLY)
    source = FileSource(fd, os.fstat(fd).st_size)
    first, _ = split_decode.array_start(source.head(split_decode.HEAD_BYTES))
    pieces = [p for p in split_decode.plan(source, first) if p[1] is not None][: args.pieces]
    gc.disable()  # as split_decode decodes
    per_way: dict[str, list[float]] = {way: [] for way in ways}
    read = {
        "msgspec": lambda a, b: _with_msgspec(source, a, b),
        "pyarrow": lambda a, b: _with_pyarrow(source, a, b, arrow_schema),
        "polars": lambda a, b: _with_polars(source, a, b, pl, schema),
    }
    for round_ in range(args.rounds):
        for way in [w for w in ways if w in per_way]:
            try:
                events, stages = _one_round(read[way], pieces)
            except Exception as exc:  # a library that cannot read this trace (a pid both number and string, say)
                if way == "msgspec":  # the anchor every ratio is taken against: its failure ends the bench
                    raise
                print(f"{way} cannot read this trace's pieces: {' '.join(str(exc).split())[:200]}")
                del per_way[way]
                continue
            per_way[way].append(sum(stages) / events * 1e9)
            detail = ", ".join(f"{name} {t / events * 1e9:.0f}" for name, t in zip(STAGES, stages, strict=True))
            print(f"round {round_ + 1} {way:8s} {per_way[way][-1]:6.0f} ns an event ({detail}; {events:,} events)")
    medians = {way: statistics.median(values) for way, values in per_way.items()}
    said = ", ".join(f"{way} {ns:.0f} ns" for way, ns in medians.items())
    ratios = ", ".join(
        f"{way} / msgspec {ns / medians['msgspec']:.2f}" for way, ns in medians.items() if way != "msgspec"
    )
    print(f"median: {said} an event" + (f"; {ratios}" if ratios else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
