"""A selection of a trace and everything the app's Selection panel shows of it, computed here once for every door.

A selection is a time range, whole steps, or every match of a find (analysis/event_find.py). Its answer: the kernel
table with wall, busy and idle time (analysis/event_window.py), the host ops and runtime calls that start inside it,
for whole steps their anatomy (categories as "Inside a step" counts them, and the layers when the anatomy's step is
among them), for matches their spread over the steps. Two answers diff per kernel and per category in one table
each (analysis/op_diff.py's rule of what changed), B against a pinned A.

Part 2 of the timeline work (issue 43) offers more ways to make a Selection (a graph launch's replayed span, a
finding's evidence): each is one of these three kinds with its own label.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from stepscope.parsers.timeline import Timeline
from .activity import busy_union
from .categories import categorize
from .event_find import FindQuery, find, per_step
from .event_window import WINDOW_COLUMNS, WorkIndex, range_window, steps_window
from .layers import LayerResult
from .model import Analysis
from .op_diff import compare_rows

HOST_KINDS = ("cpu_op", "runtime", "driver", "annotation", "sync")  # what the host table lists (not python spans)
HOST_COLUMNS = ("name", "kind", "count", "total_us")


@dataclass(frozen=True)
class Selection:
    """What is selected: kind "range" ([start_ns, end_ns) on the trace's clock), "steps" (rows of analysis.steps)
    or "matches" (every event a find matches); `label` says it in words for the panel."""

    kind: str
    start_ns: int = 0
    end_ns: int = 0
    steps: tuple[int, ...] = ()
    query: FindQuery | None = None
    label: str = ""

    @classmethod
    def of_range(cls, start_ns: int, end_ns: int, label: str = "") -> Selection:
        lo, hi = sorted((int(start_ns), int(end_ns)))
        return cls("range", lo, hi, label=label)

    @classmethod
    def of_steps(cls, steps, label: str = "") -> Selection:
        return cls("steps", steps=tuple(sorted({int(s) for s in steps})), label=label)

    @classmethod
    def of_matches(cls, query: FindQuery, label: str = "") -> Selection:
        return cls("matches", query=query, label=label)


@dataclass(frozen=True)
class SelectionAnswer:
    selection: Selection
    kernels: pd.DataFrame  # WINDOW_COLUMNS; attrs wall_us, busy_us, idle_us, start_ms, end_ms, unit, categories...
    host: pd.DataFrame  # HOST_COLUMNS: host ops and runtime calls starting inside it (none for matches)
    categories: pd.DataFrame  # category, count, total_us, share_pct: the kernel table's time by category
    anatomy: pd.DataFrame | None = None  # whole steps: category, count, time_us (analysis.anatomy's step_categories)
    layers: LayerResult | None = None  # whole steps holding the anatomy's step: its layers
    layers_step: int | None = None
    per_step: pd.DataFrame | None = None  # matches: step, kind, count, total_us, first_ms
    notes: tuple[str, ...] = field(default_factory=tuple)


def select(timeline: Timeline, analysis: Analysis, index: WorkIndex, selection: Selection) -> SelectionAnswer:
    """Everything the Selection panel shows of `selection`. ValueError (one line) for one that cannot be read."""
    if selection.kind == "range":
        kernels = range_window(index, selection.start_ns, selection.end_ns)
        host = host_table(timeline, np.array([selection.start_ns]), np.array([selection.end_ns]))
        return SelectionAnswer(selection, kernels, host, category_table(kernels))
    if selection.kind == "steps":
        if not selection.steps:
            raise ValueError("no step chosen")
        kernels = steps_window(index, selection.steps)
        chosen = np.asarray(selection.steps, dtype=np.int64)
        host = host_table(timeline, index.step_start[chosen], index.step_end[chosen])
        anat = analysis.anatomy
        median = anat.median_step if anat is not None else None
        holds_median = median is not None and median in selection.steps and bool(anat.layers.layers)
        return SelectionAnswer(
            selection,
            kernels,
            host,
            category_table(kernels),
            anatomy=steps_anatomy(analysis, chosen),
            layers=anat.layers if holds_median else None,
            layers_step=median if holds_median else None,
        )
    if selection.kind == "matches" and selection.query is not None:
        return _matches(timeline, analysis, index, selection)
    raise ValueError(f"not a selection: {selection.kind!r}")


def _matches(timeline: Timeline, analysis: Analysis, index: WorkIndex, selection: Selection) -> SelectionAnswer:
    """Every match of a find as one selection: the matches by name, the time at least one of them runs (busy) in
    the span from the first's start to the last's end (wall), and their spread over the steps."""
    matches = find(timeline, index, selection.query)
    found, rows = matches.frame, matches.rows
    table = matches_table(found)
    ts = timeline.events["ts"].to_numpy()[rows]
    ends = ts + timeline.events["dur"].to_numpy()[rows]
    blocks = busy_union(ts, ends)
    busy = int((blocks[1] - blocks[0]).sum())
    lo, hi = (int(ts.min()), int(ends.max())) if len(rows) else (index.origin_ns, index.origin_ns)
    table.attrs.update(
        start_ms=(lo - index.origin_ns) / 1e6,
        end_ms=(hi - index.origin_ns) / 1e6,
        wall_us=(hi - lo) / 1e3,
        busy_us=busy / 1e3,
        idle_us=(hi - lo - busy) / 1e3,
        unit="matches",
        kernels=len(found),
        categories={
            r["category"]: {"count": int(r["count"]), "total_us": float(r["total_us"])}
            for r in category_table(table).to_dict("records")
        },
    )
    return SelectionAnswer(
        selection,
        table,
        pd.DataFrame(columns=list(HOST_COLUMNS)),
        category_table(table),
        per_step=per_step(found, analysis.steps),
    )


def matches_table(found: pd.DataFrame) -> pd.DataFrame:
    """The matches of a find grouped by name, as a window's kernel table (WINDOW_COLUMNS)."""
    if found.empty:
        return pd.DataFrame(columns=list(WINDOW_COLUMNS))
    grouped = found.groupby("name", sort=False, observed=True).agg(count=("name", "size"), total_us=("dur_us", "sum"))
    names = pd.Series(grouped.index.astype(str), dtype=object)
    short, category = categorize(names)
    total = grouped["total_us"].to_numpy(dtype=float)
    count = grouped["count"].to_numpy(dtype=np.int64)
    frame = pd.DataFrame(
        {
            "name": names.to_numpy(),
            "short_name": np.asarray(short, dtype=object),
            "category": np.asarray(category, dtype=object),
            "count": count,
            "total_us": total,
            "mean_us": total / np.maximum(count, 1),
            "share_pct": 100.0 * total / total.sum() if total.sum() > 0 else np.zeros(len(total)),
        }
    )
    return frame.sort_values(["total_us", "count"], ascending=False, kind="stable").reset_index(drop=True)


def category_table(kernels: pd.DataFrame) -> pd.DataFrame:
    """The window's kernel time by category (each kernel in the category of its own row: attrs["categories"]
    where the window gives them, else the table's rows summed)."""
    cats = kernels.attrs.get("categories")
    if cats is None:
        grouped = kernels.groupby("category", sort=False).agg(count=("count", "sum"), total_us=("total_us", "sum"))
        cats = {str(c): {"count": int(r["count"]), "total_us": float(r["total_us"])} for c, r in grouped.iterrows()}
    frame = pd.DataFrame(
        [{"category": c, "count": v["count"], "total_us": v["total_us"]} for c, v in cats.items()],
        columns=["category", "count", "total_us"],
    )
    total = frame["total_us"].sum()
    frame["share_pct"] = 100.0 * frame["total_us"] / total if total > 0 else 0.0
    return frame.sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)


def host_table(timeline: Timeline, starts: np.ndarray, ends: np.ndarray) -> pd.DataFrame:
    """The host ops and runtime calls (HOST_KINDS) starting inside the ranges [starts[i], ends[i]) (disjoint),
    grouped by name and kind: count and total time. Rows are found by binary search on the sorted ts; only theirs
    are read."""
    events = timeline.events
    ts = events["ts"].to_numpy()
    first = np.searchsorted(ts, np.asarray(starts, dtype=np.int64), side="left")
    stop = np.maximum(np.searchsorted(ts, np.asarray(ends, dtype=np.int64), side="left"), first)
    lengths = stop - first
    rows = np.repeat(first - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths) + np.arange(lengths.sum())
    kinds = events["kind"].array
    kinds = kinds if isinstance(kinds, pd.Categorical) else pd.Categorical(np.asarray(kinds, dtype=object))
    wanted = np.append(np.isin(np.asarray(kinds.categories, dtype=object), HOST_KINDS), False)
    rows = rows[wanted[np.asarray(kinds.codes)[rows]]]
    if not len(rows):
        return pd.DataFrame(columns=list(HOST_COLUMNS))
    names = events["name"].array
    names = names if isinstance(names, pd.Categorical) else pd.Categorical(np.asarray(names, dtype=object))
    n_kinds = len(kinds.categories) + 1
    key = (np.asarray(names.codes)[rows].astype(np.int64) + 1) * n_kinds + np.asarray(kinds.codes)[rows]
    uniq, group = np.unique(key, return_inverse=True)
    count = np.bincount(group, minlength=len(uniq))
    total = np.bincount(group, weights=events["dur"].to_numpy()[rows].astype(float), minlength=len(uniq))
    name_of = np.append(np.asarray(names.categories, dtype=object), "(no name)")
    kind_of = np.asarray(kinds.categories, dtype=object)
    frame = pd.DataFrame(
        {
            "name": name_of[uniq // n_kinds - 1],  # code -1 (no name) indexes the last
            "kind": kind_of[uniq % n_kinds],
            "count": count.astype(np.int64),
            "total_us": total / 1e3,
        }
    )
    return frame.sort_values(["total_us", "count"], ascending=False, kind="stable").reset_index(drop=True)


def steps_anatomy(analysis: Analysis, steps: np.ndarray) -> pd.DataFrame | None:
    """The steps' categories as the anatomy counts them (analysis.anatomy step_categories, summed over them)."""
    anat = analysis.anatomy
    if anat is None:
        return None
    frame = anat.step_categories
    part = frame[np.isin(frame["step"].to_numpy(), steps)]
    grouped = part.groupby("category", observed=True, sort=False).agg(
        count=("kernels", "sum"), time_ns=("time_ns", "sum")
    )
    out = pd.DataFrame(
        {
            "category": grouped.index.astype(str),
            "count": grouped["count"].to_numpy(dtype=np.int64),
            "time_us": grouped["time_ns"].to_numpy(dtype=float) / 1e3,
        }
    )
    total = out["time_us"].sum()
    out["share_pct"] = 100.0 * out["time_us"] / total if total > 0 else 0.0
    return out.sort_values("time_us", ascending=False, kind="stable").reset_index(drop=True)


def diff(a: SelectionAnswer, b: SelectionAnswer) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per kernel, per category): B against A, one row each with status, count_a, count_b, us_a, us_b, delta_us,
    largest time change first (analysis.op_diff.compare_rows: what counts as a change)."""
    ka, kb = a.kernels, b.kernels
    by_name = compare_rows(_diff_input(ka, "name"), _diff_input(kb, "name"), key="name")
    short = dict(zip(ka["name"], ka["short_name"], strict=True)) | dict(zip(kb["name"], kb["short_name"], strict=True))
    by_name.insert(1, "short_name", by_name["name"].map(short))
    by_category = compare_rows(
        _diff_input(a.categories, "category"), _diff_input(b.categories, "category"), key="category"
    )
    return by_name, by_category


def _diff_input(frame: pd.DataFrame, key: str) -> pd.DataFrame:
    category = frame["category"] if "category" in frame else pd.Series([""] * len(frame))
    return pd.DataFrame(
        {
            key: frame[key].astype(str).to_numpy(),
            "category": category.astype(str).to_numpy(),
            "count": frame["count"].to_numpy(dtype=float),
            "us": frame["total_us"].to_numpy(dtype=float),
        }
    )
