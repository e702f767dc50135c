"""The tables of a step's anatomy and of a run's batches, shared by the app (app/tables.py re-exports them) and the
HTML report: one layout, one place. They arrange what analysis computed (analysis.anatomy, analysis.composition)."""

from __future__ import annotations

import pandas as pd

from stepscope.analysis.composition import composition_table as composition_table_of
from stepscope.analysis.composition import requests_of
from stepscope.analysis.model import Analysis
from stepscope.analysis.number_format import format_value


def composition_table(analysis: Analysis) -> pd.DataFrame:
    """What the run's batches held (analysis.composition), one figure per row: steps by kind, sequences per decode
    step, prefill tokens per prefill-carrying step, requests, and for a speculative run its verify figures."""
    table = composition_table_of(analysis.steps, requests_of(analysis))
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
    if isinstance(value, str):
        return value
    return format_value(value, "")


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
