"""Idle gaps summed by likely cause and placement: the table the HTML report and a notebook print."""

from __future__ import annotations

import pandas as pd

GAP_TABLE_COLUMNS = ("cause", "placement", "gaps", "total_ms", "longest_us", "share_pct")


def gaps_by_cause(gaps: pd.DataFrame) -> pd.DataFrame:
    """One row per (cause, placement): count, total and longest idle time, share of all idle time.

    Sorted by total idle time, largest first, so the cause worth fixing comes first.
    """
    if gaps.empty:
        return pd.DataFrame(
            {c: pd.Series(dtype=object if c in ("cause", "placement") else float) for c in GAP_TABLE_COLUMNS}
        )
    grouped = gaps.groupby(["cause", "placement"], observed=True, sort=False)["dur_ns"].agg(["count", "sum", "max"])
    grouped = grouped.reset_index().rename(columns={"count": "gaps"})
    total = float(gaps["dur_ns"].sum())
    grouped["total_ms"] = grouped["sum"] / 1e6
    grouped["longest_us"] = grouped["max"] / 1e3
    grouped["share_pct"] = 100.0 * grouped["sum"] / total if total else 0.0
    grouped = grouped.sort_values("sum", ascending=False, kind="stable").reset_index(drop=True)
    return grouped[list(GAP_TABLE_COLUMNS)]
