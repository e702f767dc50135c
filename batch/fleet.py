"""A batch output folder read back for the Fleet page: the traces table, its distributions and its outliers.

Why here and not in the app: the page only arranges; which trace is "slow" or an "outlier" is a computed
judgement, made once, testable without Streamlit. An outlier is a trace whose ITL p50 or TTFT lies above the
upper Tukey fence (Q3 + 1.5 IQR) of its own group (same device, model and mode), so a slow GPU is not flagged
for being a different GPU. Groups of fewer than OUTLIER_MIN_GROUP traces flag nothing: too few to say.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from stepscope.contracts.safe_read import open_regular
from stepscope.parsers.ranks import TRACE_SUFFIXES
from .inputs import rank_run_folders, run_key, sha256_of_file

FLEET_METRICS = ("ttft_ms", "itl_p50_ms", "gpu_busy_pct", "kernels_per_decode_step")  # the distributions shown
GROUP_COLUMNS = ("device", "model", "mode")
OUTLIER_METRICS = ("itl_p50_ms", "ttft_ms")
OUTLIER_MIN_GROUP = 4
TUKEY_K = 1.5
TRACES_TABLE = "traces.parquet"


@dataclass(frozen=True)
class Fleet:
    folder: Path
    traces: pd.DataFrame  # one row per input: the batch's traces table plus group and outlier columns
    errors: int


def batch_folders(root: str | os.PathLike) -> list[Path]:
    """Batch output folders under a root (the root itself and its direct sub-folders holding a traces table)."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = [root] if (root / TRACES_TABLE).is_file() else []
    found += sorted(
        p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and (p / TRACES_TABLE).is_file()
    )
    return found


def load_fleet(folder: str | os.PathLike) -> Fleet:
    """Read a batch's traces table and mark each trace's group and outliers. ValueError (one line) if unreadable."""
    folder = Path(folder)
    try:
        with open(open_regular(folder / TRACES_TABLE), "rb") as handle:  # a FIFO at the name: refused, never blocks
            traces = pd.read_parquet(handle)
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read {TRACES_TABLE} in {folder.name}: {' '.join(str(exc).split())[:200]}") from None
    for column in GROUP_COLUMNS:
        if column not in traces:
            traces[column] = None
    traces["group"] = traces[list(GROUP_COLUMNS)].fillna("?").astype(str).agg(" / ".join, axis=1)
    ok = traces["status"] == "ok"
    traces["outlier"] = False
    traces["outlier_reason"] = ""
    for key in OUTLIER_METRICS:
        if key not in traces:
            continue
        values = traces[key].where(ok)
        grouped = values.groupby(traces["group"])
        q1, q3, n = (
            grouped.transform(lambda v: v.quantile(0.25)),
            grouped.transform(lambda v: v.quantile(0.75)),
            grouped.transform("count"),
        )
        fence = q3 + TUKEY_K * (q3 - q1)
        flag = (n >= OUTLIER_MIN_GROUP) & (values > fence)
        reason = np.where(flag, f"{key} above Q3 + {TUKEY_K} IQR of its group", "")
        traces["outlier_reason"] = np.where(
            flag & (traces["outlier_reason"] != ""),
            traces["outlier_reason"] + "; " + reason,
            np.where(flag, reason, traces["outlier_reason"]),
        )
        traces["outlier"] |= flag.fillna(False).to_numpy(dtype=bool)
    return Fleet(folder, traces, int((~ok).sum()))


def trace_count(fleet: Fleet) -> int:
    """Traces analysed, counted as the CLI's batch counts them: a run folder of several ranks is one trace (its
    rank rows share the run's key)."""
    t = fleet.traces[fleet.traces["status"] == "ok"]
    return int(t["key"].nunique()) if "key" in t else len(t)


def worst_outlier(table: pd.DataFrame, by: str = "itl_p50_ms") -> int:
    """The row of `table` (slowest()'s) to offer first: the slowest outlier, else the slowest trace with a value,
    else the first row."""
    if not len(table) or by not in table:
        return 0
    values = pd.to_numeric(table[by], errors="coerce").reset_index(drop=True)
    outlier = table["outlier"].astype(bool).reset_index(drop=True) if "outlier" in table else values.isna() & False
    for pool in (values.where(outlier), values):
        if pool.notna().any():
            return int(pool.idxmax())
    return 0


def slowest(fleet: Fleet, n: int = 20, by: str = "itl_p50_ms") -> pd.DataFrame:
    """The n slowest analysed traces by a metric, plus every outlier, slowest first."""
    t = fleet.traces[fleet.traces["status"] == "ok"]
    top = t.nlargest(n, by) if by in t else t.head(0)
    subset = [c for c in ("key", "rank") if c in t]  # one row per trace, per rank of a multi-rank run
    return pd.concat([top, t[t["outlier"]]]).drop_duplicates(subset).sort_values(by, ascending=False)


def openable_trace(path: str, key: str, rank: int | None = None) -> Path | None:
    """The trace file of a batch row, only if it still holds the bytes the batch analysed (its content hash is
    the row's key; for one rank of a run, the run's key over its folder) and looks like a trace: the page never
    opens an arbitrary path typed or planted in a table."""
    p = Path(path)
    if not p.name.lower().endswith(TRACE_SUFFIXES) or not p.is_file():
        return None
    try:
        if rank is not None and rank == rank:  # one rank of a multi-rank run (NaN: a single trace)
            folder = p.parent
            files = [
                q
                for q in folder.iterdir()
                if q.is_file() and q.name.lower().endswith(TRACE_SUFFIXES) and q.name != "run.json"
            ]
            return p if folder in rank_run_folders(files) and run_key(files)[0] == key else None
        return p if sha256_of_file(p) == key else None
    except OSError:
        return None
