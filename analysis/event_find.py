"""Find events by name across the whole trace (issue 42: "find a kernel everywhere").

A name test is done once per distinct name (the name column is categorical: a million events, a few thousand
names), then the events are picked by their codes: no loop over events. Plain text is a substring, case ignored
unless asked; a regex is compiled for RE2 (analysis/user_patterns.py), so no pattern can take more than linear
time on a name, whatever it is. Each match says its step: for device work (a CPU trace's host ops), the step that
owns it as the steps count it (analysis.event_window.WorkIndex), for everything else the step whose span holds its
start, as the timeline's hover says.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from stepscope.parsers.timeline import Timeline
from .event_window import WorkIndex
from .user_patterns import MAX_PATTERN_CHARS, compile_user_pattern

FIND_COLUMNS = ("start_ms", "dur_us", "name", "kind", "step", "row")  # row: its position in timeline.events
_SEPARATOR = "\x00"  # between the names of the joined text a plain search runs over: no name has it (checked)


@dataclass(frozen=True)
class FindQuery:
    """What to find: `text` as a substring (case ignored unless `case_sensitive`) or, with `regex`, an RE2 pattern
    searched in each name (flags inline: `(?i)`); `kinds`: only events of these kinds (None: every kind)."""

    text: str
    regex: bool = False
    case_sensitive: bool = False
    kinds: tuple[str, ...] | None = None

    def describe(self) -> str:
        """How the query reads in a caption: 'allreduce' or regex /all.?reduce/."""
        return f"regex /{self.text}/" if self.regex else repr(self.text)


def checked(query: FindQuery) -> FindQuery:
    """The query, or ValueError with one line: empty, too long, or a regex RE2 cannot use."""
    if not isinstance(query.text, str) or not query.text:
        raise ValueError("nothing to find: type part of a name (or a regex)")
    if len(query.text) > MAX_PATTERN_CHARS:
        raise ValueError(f"the text to find is longer than {MAX_PATTERN_CHARS} characters")
    if query.regex:
        compile_user_pattern(query.text, "find regex")  # UserPatternError is a ValueError
    return query


def name_hits(names: pd.Index | Iterable[str], query: FindQuery) -> np.ndarray:
    """Which of the distinct `names` match: one bool per name."""
    names = [str(n) for n in names]
    if query.regex:
        pattern = compile_user_pattern(query.text, "find regex")
        return np.fromiter((pattern.search(n) is not None for n in names), dtype=bool, count=len(names))
    text = query.text if query.case_sensitive else query.text.casefold()
    if _SEPARATOR in text or any(_SEPARATOR in n for n in names):
        fold = (lambda n: n) if query.case_sensitive else str.casefold
        return np.fromiter((text in fold(n) for n in names), dtype=bool, count=len(names))
    return _joined_hits(names, text, query.case_sensitive)


def _joined_hits(names: list[str], text: str, case_sensitive: bool) -> np.ndarray:
    """Substring hits over the names joined in one string: str.find runs in C over it, and Python only visits the
    matches (a loop of `in` over a hundred thousand names costs ten times more)."""
    lengths = np.fromiter((len(n) for n in names), dtype=np.int64, count=len(names))
    joined = _SEPARATOR.join(names)
    if not case_sensitive:
        folded = joined.casefold()
        if len(folded) != len(joined):  # a letter whose fold is longer (ß -> ss): positions no longer line up
            return np.fromiter((text in n.casefold() for n in names), dtype=bool, count=len(names))
        joined = folded
    starts = np.concatenate([[0], np.cumsum(lengths + 1)[:-1]]) if len(names) else lengths
    hits = np.zeros(len(names), dtype=bool)
    at = joined.find(text)
    while at >= 0:
        which = int(np.searchsorted(starts, at, side="right")) - 1
        hits[which] = True
        at = joined.find(text, int(starts[which] + lengths[which]) + 1)  # on to the next name
    return hits


def matching_rows(events: pd.DataFrame, query: FindQuery) -> tuple[np.ndarray, np.ndarray]:
    """(positions of the events whose name matches, in ts order; per code of the name column, and a last entry for
    code -1, whether that name matches: what a view looks a drawn event's name up in)."""
    query = checked(query)
    column = events["name"]
    names = column.array if isinstance(column.dtype, pd.CategoricalDtype) else pd.Categorical(column.astype(str))
    hit = np.append(name_hits(names.categories, query), False)  # code -1 (no name) never matches
    mask = hit[np.asarray(names.codes)]
    if query.kinds is not None:
        from .event_rows import kind_mask

        mask &= kind_mask(events, query.kinds)
    return np.flatnonzero(mask), hit


@dataclass(frozen=True)
class Found:
    """The matches of a query: the table (FIND_COLUMNS), their rows in the events, and per name code whether the
    name matches (matching_rows'), for a view that marks the events it draws."""

    query: FindQuery
    frame: pd.DataFrame
    rows: np.ndarray
    hits: np.ndarray


def find(timeline: Timeline, index: WorkIndex, query: FindQuery) -> Found:
    """Every event whose name matches `query`: one row each (FIND_COLUMNS): start in ms from the trace's start,
    duration in us, name, kind, step (-1 outside steps), row (its position in the events)."""
    events = timeline.events
    rows, hits = matching_rows(events, query)
    ts = events["ts"].to_numpy()[rows]
    dur = events["dur"].to_numpy()[rows]
    frame = pd.DataFrame(
        {
            "start_ms": (ts - index.origin_ns) / 1e6,
            "dur_us": dur / 1e3,
            "name": _taken(events["name"], rows),  # categorical, as in the events: no string per match
            "kind": _taken(events["kind"], rows),
            "step": steps_of(index, rows, ts),
            "row": rows.astype(np.int64),  # what launch_of / kernels_of take (analysis/launch_links.py)
        },
        columns=list(FIND_COLUMNS),
    )
    return Found(query, frame, rows, hits)


def find_events(timeline: Timeline, index: WorkIndex, query: FindQuery) -> pd.DataFrame:
    """find()'s table: what `stepscope.load(path).find(...)` returns."""
    return find(timeline, index, query).frame


def _taken(column: pd.Series, rows: np.ndarray):
    values = column.array
    return values.take(rows) if isinstance(values, pd.Categorical) else column.to_numpy(dtype=object)[rows]


def steps_of(index: WorkIndex, rows: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """The step of each event (positions `rows`, starting at `ts`): its owner for work items, else by time."""
    step = np.full(len(rows), -1, dtype=np.int64)
    if len(index.step_start):
        at = np.searchsorted(index.step_start, ts, side="right") - 1
        inside = (at >= 0) & (ts < index.step_end[np.maximum(at, 0)])
        step = np.where(inside, at, -1)
    work_rows = index.event_rows
    if work_rows is not None and len(work_rows) and len(rows):
        pos = np.minimum(np.searchsorted(work_rows, rows), len(work_rows) - 1)
        is_work = work_rows[pos] == rows
        step[is_work] = index.step[pos[is_work]]
    return step


def per_step(found: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """The matches per step: step (-1: outside steps), its kind, count, their time (us) and the first's start."""
    if found.empty:
        return pd.DataFrame(columns=["step", "kind", "count", "total_us", "first_ms"])
    grouped = found.groupby("step", sort=True).agg(
        count=("name", "size"), total_us=("dur_us", "sum"), first_ms=("start_ms", "min")
    )
    step = grouped.index.to_numpy(dtype=np.int64)
    kinds = steps["kind"].astype(str).to_numpy() if len(steps) else np.empty(0, dtype=object)
    kind = np.where(step >= 0, kinds[np.clip(step, 0, max(len(kinds) - 1, 0))] if len(kinds) else "", "outside")
    return pd.DataFrame(
        {
            "step": step,
            "kind": kind,
            "count": grouped["count"].to_numpy(dtype=np.int64),
            "total_us": grouped["total_us"].to_numpy(),
            "first_ms": grouped["first_ms"].to_numpy(),
        }
    )


def count_line(found: pd.DataFrame) -> str:
    """ "12 matches in 4 steps" (and how many lie outside steps)."""
    n = len(found)
    if n == 0:
        return "no match"
    step = found["step"].to_numpy()
    in_steps = len(np.unique(step[step >= 0]))
    outside = int((step < 0).sum())
    line = f"{n:,} match{'es' if n != 1 else ''} in {in_steps:,} step{'s' if in_steps != 1 else ''}"
    return line + (f" ({outside:,} outside steps)" if outside else "")
