"""One trace -> its rows of the batch tables. Runs in a worker process (local pool or Ray task).

Whatever the input does, the result is rows: a trace that cannot be read or analysed becomes one error row
with a one-line reason, never an exception that would fail the batch.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

from stepscope.analysis.metrics import METRICS

COUNT_METRICS = ("prefill_steps", "decode_steps")  # integers; every other metric is a float
TRACE_FIELDS = (
    "key",
    "rank",
    "path",
    "size_bytes",
    "copies",
    "status",
    "error",
    "format",
    "device",
    "model",
    "mode",
    "events",
    "segmentation_method",
    "segmentation_confidence",
    "steps",
    *(m.key for m in METRICS),
    "comm_pct",
    "exposed_comm_pct",
    "analyze_s",
)
STEP_FIELDS = (
    "key",
    "rank",
    "step",
    "kind",
    "request",
    "index",
    "start_us",
    "end_us",
    "tokens",
    "kernels",
    "launches",
    "gpu_busy_us",
    "gpu_idle_us",
    "memory_allocated_end_bytes",  # null without memory events (issue 25)
    "memory_peak_bytes",
)
GAP_FIELDS = ("key", "rank", "start_us", "end_us", "dur_us", "device", "placement", "step", "cause")
# the anatomy of each trace's median decode step (analysis/anatomy.py): time and kernels (host ops) per category
CATEGORY_FIELDS = ("key", "rank", "step", "step_kind", "category", "kernels", "time_us")
ROW_TABLES = ("steps", "gaps", "categories")  # the column tables of one result, besides its traces row
TIMING_FIELDS = ("analyze_s",)
PATH_FIELDS = ("path",)
CRASH_MARK = "crashed-once"


def _num(value) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def summary_fields(analysis) -> dict:
    """The summary figures a batch keeps: every metric of the registry, null when unknown."""
    fields = {m.key: _num(m.value(analysis.summary)) for m in METRICS}
    for count in COUNT_METRICS:
        fields[count] = int(fields[count] or 0)
    return fields


def _run_facts(timeline) -> dict:
    run = timeline.meta.extra.get("run")  # a contracts.run_record.RunRecord, or None
    model = getattr(run, "model", None) or {}
    text = lambda v: v[:200] if isinstance(v, str) and v else None  # noqa: E731
    return {"model": text(model.get("source")), "mode": text(getattr(run, "mode", None))}


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:300]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _empty(fields: tuple[str, ...]) -> dict:
    return {f: [] for f in fields}


def category_rows(key: str, analysis, rank: int | None = None) -> dict:
    """The categories of the median decode step (time in us, kernels or host ops), one row per category: the
    anatomy the front door's analysis holds."""
    an = analysis.anatomy
    rows = _empty(CATEGORY_FIELDS)
    if an is None or an.median_step is None:
        return rows
    sc = an.step_categories[an.step_categories["step"] == an.median_step]
    rows.update(
        key=[key] * len(sc),
        rank=[rank] * len(sc),
        step=[int(an.median_step)] * len(sc),
        step_kind=[an.median_kind] * len(sc),
        category=sc["category"].astype(str).tolist(),
        kernels=sc["kernels"].astype("int64").tolist(),
        time_us=(sc["time_ns"] / 1000.0).tolist(),
    )
    return rows


def _trace_rows(key: str, opened, rank: int | None) -> tuple[dict, dict, dict, dict]:
    """(traces-row fields, steps, gaps, categories columns) of one opened trace (one rank of a run). The steps are
    the contract's own (the same numbers analyze --json prints), the figures the metric registry's."""
    report, analysis = opened.report, opened.analysis
    fields = dict(
        status="ok",
        rank=rank,
        format=report["format"],
        device=report["device"],
        events=report["events"],
        segmentation_method=report["segmentation"]["method"],
        segmentation_confidence=report["segmentation"]["confidence"],
        steps=len(report["steps"]),
        **summary_fields(analysis),
        **_run_facts(opened.timeline),
    )
    contract_steps = report["steps"]
    steps = {
        "key": [key] * len(contract_steps),
        "rank": [rank] * len(contract_steps),
        "step": list(range(len(contract_steps))),
        **{field: [s[field] for s in contract_steps] for field in STEP_FIELDS[3:]},
    }
    g = analysis.gaps
    gaps = {
        "key": [key] * len(g),
        "rank": [rank] * len(g),
        "start_us": (g["start_ns"] / 1000.0).tolist(),
        "end_us": (g["end_ns"] / 1000.0).tolist(),
        "dur_us": (g["dur_ns"] / 1000.0).tolist(),
        "device": g["device"].astype("int64").tolist(),
        "placement": g["placement"].astype(str).tolist(),
        "step": g["step"].astype("int64").tolist(),
        "cause": g["cause"].astype(str).tolist(),
    }
    return fields, steps, gaps, category_rows(key, analysis, rank)


def _comm_shares(result) -> dict[int, tuple[float | None, float | None]]:
    """Per rank: (communication %, exposed communication %) over its aligned steps, else its whole trace."""
    rs = result.rank_steps
    if len(rs):
        g = rs.groupby("rank")[["comm_ns", "exposed_comm_ns", "dur_ns"]].sum()
    else:
        g = result.totals.set_index("rank")[["comm_ns", "exposed_comm_ns", "span_ns"]].rename(
            columns={"span_ns": "dur_ns"}
        )
    total = g["dur_ns"].clip(lower=1)
    return {
        int(r): (_num(100.0 * c / t), _num(100.0 * e / t))
        for r, c, e, t in zip(g.index, g["comm_ns"], g["exposed_comm_ns"], total, strict=True)
    }


def _concat(parts: list[dict], fields: tuple[str, ...]) -> dict:
    return {f: [v for p in parts for v in p[f]] for f in fields}


def analyze_one(key: str, path: str, size_bytes: int, copies: int = 1, crash_once_dir: str | None = None) -> dict:
    """Rows for one input: {"trace": first row, "traces": [rows], "steps"|"gaps"|"categories": {col: [...]}},
    plain and picklable. A folder is a multi-rank run: one traces row per rank (with its rank and its share of
    communication), all under the run's key; a file is one trace, rank null.

    ``crash_once_dir`` is a test hook: the first call anywhere that creates its mark file kills its own process,
    as a worker killed mid-batch would die.
    """
    if crash_once_dir:
        try:
            os.close(os.open(os.path.join(crash_once_dir, CRASH_MARK), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            os._exit(17)
        except FileExistsError:
            pass
    from stepscope.analysis.front_door import OpenedRun, open_folder, open_trace
    from stepscope.parsers.errors import TraceError

    started = time.perf_counter()
    base = {f: None for f in TRACE_FIELDS}
    base.update(key=key, path=path, size_bytes=size_bytes, copies=copies)
    rows, parts = [dict(base)], []
    try:
        run = open_folder(path) if Path(path).is_dir() else None  # the front door, as analyze DIR reads a folder
        if run is not None and not isinstance(run, OpenedRun):  # one worker and its API server: one row
            fields, *tables = _trace_rows(key, run, None)
            rows[0].update(fields)
            parts.append(tables)
        elif run is not None:  # each rank through the on-disk cache; workers write it atomically
            shares = _comm_shares(run.result)
            rows = []
            for f, opened in zip(run.ranked.files, run.ranks, strict=True):
                fields, *tables = _trace_rows(key, opened, f.rank)
                comm, exposed = shares.get(f.rank, (None, None))
                rows.append(
                    {
                        **base,
                        **fields,
                        "path": str(f.path),
                        "size_bytes": f.path.stat().st_size,
                        "comm_pct": comm,
                        "exposed_comm_pct": exposed,
                    }
                )
                parts.append(tables)
        else:
            fields, *tables = _trace_rows(key, open_trace(path), None)
            rows[0].update(fields)
            parts.append(tables)
    except TraceError as exc:
        rows, parts = [{**base, "status": "error", "error": str(exc)[:300]}], []
    except MemoryError:
        rows, parts = [{**base, "status": "error", "error": "out of memory analysing this trace"}], []
    except Exception as exc:  # a hostile input must become a row, whatever it raises
        rows, parts = [{**base, "status": "error", "error": f"analysis failed: {_one_line(exc)}"}], []
    elapsed = time.perf_counter() - started
    for row in rows:
        row["analyze_s"] = elapsed
    tables = {
        name: _concat([p[i] for p in parts], fields)
        for i, (name, fields) in enumerate(zip(ROW_TABLES, (STEP_FIELDS, GAP_FIELDS, CATEGORY_FIELDS), strict=True))
    }
    return {"trace": rows[0], "traces": rows, **tables}


def error_result(key: str, path: str, size_bytes: int, copies: int, reason: str) -> dict:
    row = {f: None for f in TRACE_FIELDS}
    row.update(key=key, path=path, size_bytes=size_bytes, copies=copies, status="error", error=reason[:300])
    empty = {"steps": _empty(STEP_FIELDS), "gaps": _empty(GAP_FIELDS), "categories": _empty(CATEGORY_FIELDS)}
    return {"trace": row, "traces": [row], **empty}
