"""The tables the pages show and download, laid out for people: times in ms from trace start, readable
kernel names, each step's category times beside it. Only arranges what analysis computed."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..analysis.composition import composition_table as composition_table_of
from ..analysis.model import Analysis
from ..exporters.safe_text import plain

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


def composition_table(analysis: Analysis) -> pd.DataFrame:
    """What the run's batches held (analysis.composition), one figure per row: steps by kind, sequences per decode
    step, prefill tokens per prefill-carrying step, requests, and for a speculative run its verify figures."""
    table = composition_table_of(analysis.steps)
    rows = [(f"{kind} steps", n) for kind, n in table["steps"].items() if n]
    rows += [
        ("sequences per decode step (median)", table["sequences_per_decode_step"]),
        ("prefill tokens per prefill-carrying step (median)", table["prefill_tokens_per_step"]),
        ("requests", table["requests"]),
    ]
    spec = analysis.summary.speculative
    if spec:
        rows.append(("draft tokens per verify", spec["draft_tokens_per_verify"]))
        rows.append(
            ("accepted per verify", spec["accepted_tokens_per_step"] if spec["acceptance_known"] else "unknown")
        )
    return pd.DataFrame({"figure": [r[0] for r in rows], "value": [_shown(r[1]) for r in rows]})


def _shown(value) -> str:
    if value is None:
        return "n/a"
    return value if isinstance(value, str) else f"{value:g}"


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


def category_table(analysis: Analysis) -> pd.DataFrame:
    """The median decode step's time and count by category, largest first, with its share."""
    anat = analysis.anatomy
    if anat is None:
        return pd.DataFrame(columns=["category", "count", "time_us", "share_pct"])
    cats = anat.median_categories()
    total = sum(c["time_us"] for c in cats.values()) or 1.0
    rows = [(k, c["kernels"], c["time_us"], 100 * c["time_us"] / total) for k, c in cats.items()]
    frame = pd.DataFrame(rows, columns=["category", "count", "time_us", "share_pct"])
    return frame.sort_values("time_us", ascending=False).reset_index(drop=True)


def category_roofline_table(roofline: dict) -> pd.DataFrame:
    """The per-category roofline (analysis.anatomy.category_roofline) as rows, overhead last."""
    rows = [
        {
            "category": r["category"],
            "time_us": r["time_us"],
            "bytes_MB": r["bytes"] / 1e6,
            "floor_us": r["floor_us"],
            "achieved_GB_s": r["achieved_gb_s"],
            "pct_of_roofline": r["pct_of_roofline"],
        }
        for r in roofline.get("categories", [])
    ]
    rows.append({"category": "overhead (neither)", "time_us": roofline.get("overhead_total_us", 0.0)})
    return pd.DataFrame(rows)


def shown_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A table as a page shows it (st.dataframe): every text cell through safe_text.plain (a kernel name's bidi
    controls as \\u202e, undecodable bytes as \\xNN); numbers untouched. Downloads keep the original text."""
    out = frame.copy(deep=False)
    for column in out.columns:
        values = out[column]
        if values.dtype == object or isinstance(values.dtype, pd.CategoricalDtype | pd.StringDtype):
            out[column] = values.map(lambda v: plain(v) if isinstance(v, str) else v)
    return out
