"""Fleet: a batch's output folder (`python -m app.cli batch ... --out DIR`) across its traces.

Distributions of TTFT, ITL p50, busy % and kernels per step, grouped by device / model / mode; the slowest
traces and the outliers (batch/fleet.py decides which) in a sortable table; one of them opens in Analyze.
Only folders under the fleet root (STEPSCOPE_FLEET_ROOT, else the runs folder) are offered: never a typed path.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import streamlit as st

from stepscope.analysis.metrics import metric
from stepscope.analysis.number_format import format_count, format_value
from stepscope.batch.fleet import (
    FLEET_METRICS,
    GROUP_COLUMNS,
    batch_folders,
    load_fleet,
    openable_trace,
    slowest,
    trace_count,
    worst_outlier,
)
from stepscope.exporters.figures import fleet_charts
from stepscope.exporters.safe_text import for_markdown, plain
from stepscope.parsers.limits import read_file_bytes
from .. import tables
from ..navigation import ANALYZE_KEY, go_to
from ..trace_sources import fleet_root, samples_dir
from ..uploads import register_upload

FLEET_KEY = "fleet_folder"
TABLE_COLUMNS = (
    "path",
    "rank",
    "group",
    "outlier_reason",
    "ttft_ms",
    "itl_p50_ms",
    "itl_p90_ms",
    "gpu_busy_pct",
    "kernels_per_decode_step",
    "decode_steps",
    "device",
    "model",
    "mode",
    "format",
    "key",
)


def _start_batch(root: Path) -> None:
    """Run a batch over a folder of traces (the samples, or a folder under the root) with a live progress bar."""
    from stepscope.batch.runner import run_batch

    with st.expander("Analyse a folder of traces into a new batch", expanded=not batch_folders(root)):
        sources = {"samples": samples_dir()}
        if root.is_dir():
            sources.update(
                {
                    p.name: p
                    for p in sorted(root.iterdir())
                    if p.is_dir() and not p.name.startswith(".") and not (p / "traces.parquet").is_file()
                }
            )
        name = st.selectbox("Folder of traces", list(sources), key="fleet_batch_source")
        if st.button("Run the batch", key="fleet_batch_run"):
            out = root / f"batch_{name}"
            bar = st.progress(0.0, text="starting...")

            def progress(done: int, total: int, errors: int) -> None:
                bar.progress(done / max(total, 1), text=f"{done}/{total} traces, {errors} errors")

            try:
                report = run_batch(str(sources[name]), str(out), workers=1, progress=None, on_progress=progress)
            except (OSError, RuntimeError) as exc:
                st.error(f"The batch failed: {for_markdown(exc)}")
                return
            bar.progress(1.0, text=f"{report.analysed} analysed, {report.errors} errors, {report.skipped} done before")
            st.session_state[FLEET_KEY] = out.name


def render() -> None:
    st.title("Fleet")
    root = fleet_root()
    st.caption(for_markdown(f"Batch outputs under {root} (set STEPSCOPE_FLEET_ROOT to use another folder)."))
    _start_batch(root)
    folders = batch_folders(root)
    if not folders:
        st.info(
            "No batch output here yet: run `python -m app.cli batch TRACES --out "
            f"{for_markdown(root)}/NAME`, or start one above."
        )
        return
    by_name = {p.name: p for p in folders}
    names = list(by_name)
    chosen = st.session_state.get(FLEET_KEY)
    picked = st.selectbox("Batch", names, index=names.index(chosen) if chosen in names else 0)
    st.session_state[FLEET_KEY] = picked
    try:
        fleet = load_fleet(by_name[picked])
    except ValueError as exc:
        st.error(for_markdown(exc))
        return
    t = fleet.traces
    rows_ok = int((t["status"] == "ok").sum())
    left, middle, right = st.columns(3)
    left.metric(
        "Traces analysed",
        format_count(trace_count(fleet)),
        border=True,
        help=f"A run folder of several ranks counts once ({rows_ok:,} rows, one per rank), as the CLI counts.",
    )
    middle.metric("Error rows", format_count(fleet.errors), border=True)
    right.metric("Outliers", format_count(int(t["outlier"].sum())), border=True)
    base = _common_root(t["path"])
    if base:
        st.caption(for_markdown(f"Paths below are relative to {base}."))
    group_by = st.selectbox("Group by", list(GROUP_COLUMNS), key="fleet_group_by")
    _charts(t, group_by)
    st.subheader("Slowest traces and outliers")
    table = slowest(fleet)
    shown = table[[c for c in TABLE_COLUMNS if c in table]].copy()
    shown["path"] = shown["path"].astype(str).map(lambda p: _relative(p, base))
    tables.show(shown)  # sortable by clicking a column header
    if len(table):
        labels = {
            i: f"{plain(_relative(str(row.path), base))}  (ITL p50 {format_value(row.itl_p50_ms, 'ms')}"
            + (", outlier)" if bool(getattr(row, "outlier", False)) else ")")
            for i, row in enumerate(table.itertuples())
        }
        choice = st.selectbox(
            "Trace",
            list(labels),
            index=worst_outlier(table),
            format_func=labels.get,
            key="fleet_open_choice",
            help="The slowest outlier first.",
        )
        if st.button("Open in Analyze", key="fleet_open"):
            row = table.iloc[choice]
            path = openable_trace(str(row["path"]), str(row["key"]), row.get("rank"))
            if path is None:
                st.error("That trace is no longer where the batch read it (or its content changed).")
            else:
                _open_in_analyze(path)
    errors = t[t["status"] != "ok"]
    if len(errors):
        with st.expander(f"Error rows ({len(errors)})"):
            tables.show(
                errors[["path", "error"]].assign(path=errors["path"].astype(str).map(lambda p: _relative(p, base)))
            )


def _charts(t, group_by: str) -> None:
    """One distribution per fleet metric that some analysed trace has; a line for those none has."""
    ok = t[t["status"] == "ok"]
    present = [k for k in FLEET_METRICS if k in ok and ok[k].notna().any()]
    columns = st.columns(2)
    for i, key in enumerate(present):
        columns[i % 2].plotly_chart(fleet_charts.distribution(t, key, group_by), width="stretch", key=f"fleet_{key}")
    missing = [metric(k).label for k in FLEET_METRICS if k not in present]
    if missing:
        why = (
            " (no trace in this batch has decode steps)" if not ok.get("decode_steps", pd.Series()).gt(0).any() else ""
        )
        st.caption(for_markdown(f"No trace in this batch has {', '.join(missing)}{why}: not charted."))


def _common_root(paths) -> str:
    """The folder every path lies under (shown once above the table), "" when they share none."""
    texts = [str(p) for p in paths if isinstance(p, str) and p]
    if not texts:
        return ""
    try:
        root = os.path.commonpath(texts)
    except ValueError:
        return ""
    return root if len(texts) > 1 or root != texts[0] else os.path.dirname(root)


def _relative(path: str, base: str) -> str:
    return os.path.relpath(path, base) if base and path.startswith(base) else path


def _open_in_analyze(path: Path) -> None:
    """Hand a batch's trace to Analyze as an upload; it is read only when a regular file, within the file limit
    (one byte more, and register_upload refuses it)."""
    try:
        data = bytes(read_file_bytes(path))
    except OSError as exc:
        st.error(for_markdown(f"Could not read {path.name}: {exc.strerror or exc}"))
        return
    result = register_upload(st.session_state, path.name, data)
    if result.error:
        st.error(for_markdown(result.error))
        return
    st.session_state[ANALYZE_KEY] = result.key
    go_to("analyze")
