"""The tables the pages show and download, laid out for people: times in ms from trace start, readable
kernel names, each step's category times beside it. Only arranges what analysis computed."""

from __future__ import annotations

import numpy as np
import pandas as pd

from stepscope.analysis.kernel_names import distinct_short_names
from stepscope.analysis.model import Analysis
from stepscope.analysis.number_format import MISSING, round_sig
from stepscope.exporters.anatomy_tables import (  # re-exported: the pages' tables, shared with the HTML report
    category_roofline_table as category_roofline_table,
)
from stepscope.exporters.anatomy_tables import category_table as category_table
from stepscope.exporters.anatomy_tables import composition_table as composition_table
from stepscope.exporters.safe_text import plain

STEP_TIME_COLUMNS = ("start_ns", "end_ns", "token_ns")


def _from_start_ms(ns: pd.Series, origin_ns: int) -> pd.Series:
    return (ns.astype("float64") - origin_ns) / 1e6


def steps_table(analysis: Analysis) -> pd.DataFrame:
    """One row per step (its number first), timestamps as ms from trace start, durations in us, then
    the step's `<category>_us` times when the analysis has an anatomy (the steps CSV and table)."""
    steps = analysis.steps
    out = pd.DataFrame({"step": np.arange(len(steps))})
    origin = analysis.time_origin_ns
    for col in steps.columns:
        values = steps[col].reset_index(drop=True)
        if col in STEP_TIME_COLUMNS:
            out[col.removesuffix("_ns") + "_ms"] = _from_start_ms(values, origin)
        elif col.endswith("_ns"):
            us = values.astype("float64") / 1e3
            out[col.removesuffix("_ns") + "_us"] = us.mask(values < 0) if col == "itl_ns" else us  # -1: none
        else:
            out[col] = values
    if len(steps):
        out.insert(out.columns.get_loc("end_ms") + 1, "span_ms", out["end_ms"] - out["start_ms"])
    anat = analysis.anatomy
    if anat is not None and len(steps):
        wide = anat.step_table().reindex(range(len(steps))).fillna(0.0).reset_index(drop=True)
        out = pd.concat([out, wide], axis=1)
    return out


def gaps_table(analysis: Analysis) -> pd.DataFrame:
    """Gaps with their start and end in ms from trace start, length in us, and the step (number and
    kind) they fall in or follow."""
    gaps, steps = analysis.gaps, analysis.steps
    origin = analysis.time_origin_ns
    step = gaps["step"].to_numpy().astype(np.int64) if len(gaps) else np.array([], dtype=np.int64)
    kinds = steps["kind"].to_numpy() if len(steps) else np.array([], dtype=object)
    kind = np.where(step >= 0, kinds[np.clip(step, 0, max(len(kinds) - 1, 0))] if len(kinds) else "", "")
    return pd.DataFrame(
        {
            "start_ms": _from_start_ms(gaps["start_ns"], origin),
            "end_ms": _from_start_ms(gaps["end_ns"], origin),
            "length_us": gaps["dur_ns"].astype("float64") / 1e3,
            "step": pd.Series(step, dtype="Int64").mask(step < 0).to_numpy(),
            "step_kind": kind,
            "placement": gaps["placement"],
            "cause": gaps["cause"],
            "device": gaps["device"],
        }
    )


def top_kernels_table(top: pd.DataFrame, phase: str) -> pd.DataFrame:
    """One phase's heaviest kernels: the readable name shown, the full name kept for hover and CSV."""
    part = top[top["phase"] == phase]
    return pd.DataFrame(
        {
            "kernel": part["short"].to_numpy(),
            "count": part["count"].to_numpy(),
            "total_ms": (part["total_ns"] / 1e6).round(3).to_numpy(),
            "share_pct": part["share_pct"].round(1).to_numpy(),
            "full name": part["name"].to_numpy(),
        }
    )


def shown_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A table as a page shows it (st.dataframe): every text cell through safe_text.plain (a kernel name's bidi
    controls as \\u202e, undecodable bytes as \\xNN); numbers untouched. Downloads keep the original text."""
    out = frame.copy(deep=False)
    for column in out.columns:
        values = out[column]
        if values.dtype == object or isinstance(values.dtype, pd.CategoricalDtype | pd.StringDtype):
            out[column] = values.map(lambda v: plain(v) if isinstance(v, str) else v)
    return out


POSITION_SUFFIXES = ("start_ms", "end_ms", "token_ms", "(ms from trace start)")  # places on the clock, not amounts
POSITION_DECIMALS = 3  # a place is kept to the microsecond; an amount to 3 significant digits


def rounded(frame: pd.DataFrame, positions: tuple[str, ...] = ()) -> pd.DataFrame:
    """The table as a page shows it: amounts (float columns) to 3 significant digits (analysis.number_format), places
    on the clock (`positions`, and columns named like start_ms) to the microsecond. Numbers stay numbers, so a
    column still sorts; the downloads keep every digit."""
    out = frame.copy(deep=False)
    for column in out.columns:
        values = out[column]
        if not pd.api.types.is_float_dtype(values.dtype):
            continue
        place = column in positions or str(column).endswith(POSITION_SUFFIXES)
        out[column] = values.round(POSITION_DECIMALS) if place else round_sig(values.to_numpy(dtype=float))
    return out


def show(frame: pd.DataFrame, where=None, positions: tuple[str, ...] = (), column_config: dict | None = None, **kwargs):
    """st.dataframe of a table laid out for people: text through safe_text.plain, numbers rounded (`rounded`) and
    thousands separated, "—" for a missing value. `where`: a column or container (the page by default)."""
    import streamlit as st

    target = where if where is not None else st
    shown = shown_frame(rounded(frame, positions))
    config = {
        c: st.column_config.NumberColumn(format="localized")
        for c in shown.columns
        if pd.api.types.is_numeric_dtype(shown[c].dtype) and not pd.api.types.is_bool_dtype(shown[c].dtype)
    }
    config.update(column_config or {})
    kwargs.setdefault("width", "stretch")
    kwargs.setdefault("hide_index", True)
    return target.dataframe(shown, column_config=config, placeholder=MISSING, **kwargs)


def steps_display(analysis: Analysis) -> pd.DataFrame:
    """The steps table as the page shows it: every duration in ms (one unit for the whole table), places in ms
    from the trace's start, the columns a CPU trace cannot have (launches, syncs) left out there."""
    table = steps_table(analysis)
    if not analysis.summary.on_gpu:
        table = table.drop(columns=[c for c in CPU_ABSENT if c in table], errors="ignore")
    renamed = {}
    for column in list(table.columns):
        if column.endswith("_us"):
            table[column] = table[column] / 1e3
            renamed[column] = column.removesuffix("_us") + " (ms)"
        elif column in ("start_ms", "end_ms", "token_ms"):
            renamed[column] = column.removesuffix("_ms") + " (ms from trace start)"
        elif column.endswith("_ms"):
            renamed[column] = column.removesuffix("_ms") + " (ms)"
    empty = [c for c in table.columns if table[c].isna().all() or _all_blank(table[c])]
    return table.drop(columns=empty).rename(columns=renamed)


def _all_blank(values: pd.Series) -> bool:
    return pd.api.types.is_string_dtype(values.dtype) and bool((values.astype(str) == "").all())


CPU_ABSENT = ("launches", "launch_host_us", "d2h_copies", "syncs", "graph_launches")


def top_kernels_display(top: pd.DataFrame, phase: str, by_short: bool = False) -> pd.DataFrame:
    """One phase's heaviest kernels for the page: labels unique within the table (analysis.kernel_names), the full
    name only where it says more than the label; `by_short`: rows of one family (short name) summed."""
    part = top[top["phase"] == phase]
    if by_short:
        grouped = part.groupby("short", sort=False, observed=True)
        frame = pd.DataFrame(
            {
                "kernel": grouped["short"].first().astype(str).to_numpy(),
                "kernels": grouped["name"].nunique().to_numpy(),
                "count": grouped["count"].sum().to_numpy(),
                "total_ms": (grouped["total_ns"].sum() / 1e6).to_numpy(),
                "share_pct": grouped["share_pct"].sum().to_numpy(),
            }
        )
        return frame.sort_values("total_ms", ascending=False).reset_index(drop=True)
    names = part["name"].astype(str).tolist()
    labels = distinct_short_names(names)
    full = [n if n != label else "" for n, label in zip(names, labels, strict=True)]
    return pd.DataFrame(
        {
            "kernel": labels,
            "count": part["count"].to_numpy(),
            "total_ms": (part["total_ns"] / 1e6).to_numpy(),
            "share_pct": part["share_pct"].to_numpy(),
            "full name": full,
        }
    )
