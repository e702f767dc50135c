"""The batch's output folder: traces, steps, gaps and categories .parquet, written atomically, read back to resume.

Every write goes to a temporary file in the folder and is renamed into place, so an interrupted batch never
leaves a half-written table. ``traces`` is written last and is the record of what is done: on resume, step and
gap rows whose key is not in ``traces`` (a flush cut short between files) are dropped and redone.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from stepscope.analysis.metrics import METRICS
from stepscope.contracts.safe_read import open_regular
from .work import CATEGORY_FIELDS, COUNT_METRICS, GAP_FIELDS, ROW_TABLES, STEP_FIELDS, TRACE_FIELDS

SCHEMAS = {
    "traces": pa.schema(
        [
            ("key", pa.string()),
            ("rank", pa.int64()),
            ("path", pa.string()),
            ("size_bytes", pa.int64()),
            ("copies", pa.int64()),
            ("status", pa.string()),
            ("error", pa.string()),
            ("format", pa.string()),
            ("device", pa.string()),
            ("model", pa.string()),
            ("mode", pa.string()),
            ("events", pa.int64()),
            ("segmentation_method", pa.string()),
            ("segmentation_confidence", pa.float64()),
            ("steps", pa.int64()),
        ]
        + [(m.key, pa.int64() if m.key in COUNT_METRICS else pa.float64()) for m in METRICS]
        + [("comm_pct", pa.float64()), ("exposed_comm_pct", pa.float64()), ("analyze_s", pa.float64())]
    ),
    "steps": pa.schema(
        [
            ("key", pa.string()),
            ("rank", pa.int64()),
            ("step", pa.int64()),
            ("kind", pa.string()),
            ("request", pa.int64()),
            ("index", pa.int64()),
            ("start_us", pa.float64()),
            ("end_us", pa.float64()),
            ("tokens", pa.int64()),
            ("kernels", pa.int64()),
            ("launches", pa.int64()),
            ("gpu_busy_us", pa.float64()),
            ("gpu_idle_us", pa.float64()),
            ("memory_allocated_end_bytes", pa.int64()),
            ("memory_peak_bytes", pa.int64()),
        ]
    ),
    "gaps": pa.schema(
        [
            ("key", pa.string()),
            ("rank", pa.int64()),
            ("start_us", pa.float64()),
            ("end_us", pa.float64()),
            ("dur_us", pa.float64()),
            ("device", pa.int64()),
            ("placement", pa.string()),
            ("step", pa.int64()),
            ("cause", pa.string()),
        ]
    ),
    "categories": pa.schema(
        [
            ("key", pa.string()),
            ("rank", pa.int64()),
            ("step", pa.int64()),
            ("step_kind", pa.string()),
            ("category", pa.string()),
            ("kernels", pa.int64()),
            ("time_us", pa.float64()),
        ]
    ),
}
FIELDS = {"traces": TRACE_FIELDS, "steps": STEP_FIELDS, "gaps": GAP_FIELDS, "categories": CATEGORY_FIELDS}
assert all(tuple(SCHEMAS[t].names) == FIELDS[t] for t in SCHEMAS)


class TableSet:
    """The rows of one output folder: what was there before (resume) plus what this run adds."""

    def __init__(self, out_dir: str | os.PathLike) -> None:
        self.out = Path(out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        self.tables = {name: self._read(name) for name in SCHEMAS}
        done = set(self.tables["traces"].column("key").to_pylist())
        for name in ROW_TABLES:  # rows of a trace whose traces row never made it to disk are redone
            t = self.tables[name]
            if t.num_rows:
                keep = [k in done for k in t.column("key").to_pylist()]
                self.tables[name] = t.filter(pa.array(keep, pa.bool_()))
        self.done_keys = done
        self.pending: dict[str, list[dict]] = {name: [] for name in SCHEMAS}

    def _read(self, name: str) -> pa.Table:
        path = self.out / f"{name}.parquet"
        if not path.exists():
            return SCHEMAS[name].empty_table()
        with open(open_regular(path), "rb") as handle:  # a FIFO or a device at the name: a clear OSError
            table = pq.read_table(handle)
        for field in SCHEMAS[name]:  # an output written before a column existed (rank, comm_pct): nulls there
            if field.name not in table.column_names:
                table = table.append_column(field.name, pa.nulls(table.num_rows, field.type))
        return table.select(list(SCHEMAS[name].names)).cast(SCHEMAS[name])

    def add(self, result: dict) -> None:
        self.pending["traces"].append({"rows": result.get("traces") or [result["trace"]]})
        for name in ROW_TABLES:
            self.pending[name].append({"columns": result[name]})
        self.done_keys.add(result["trace"]["key"])

    def flush(self) -> None:
        """Append pending rows and rewrite every table atomically; traces last."""
        if not self.pending["traces"]:
            return
        for name in (*ROW_TABLES, "traces"):
            schema = SCHEMAS[name]
            parts = [self.tables[name]]
            for item in self.pending[name]:
                if "rows" in item:
                    parts.append(pa.Table.from_pylist(item["rows"], schema=schema))
                elif item["columns"]["key"]:
                    parts.append(pa.Table.from_pydict(item["columns"], schema=schema))
            self.tables[name] = pa.concat_tables(parts).combine_chunks()
            _write_atomically(self.tables[name], self.out / f"{name}.parquet")
            self.pending[name] = []


def _write_atomically(table: pa.Table, dest: Path) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".partial", dir=dest.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
