"""The part of a trace the app draws or lists at full detail: a time range of events, a bounded page of a table.

Why: a big trace's frame is memory-mapped from the cache's entry (trace_cache.timelines), and a view that filtered
it with a mask over every row would read (fault in) every column of millions of rows for each redraw of a range
of a few steps. The frame is sorted by ts (parsers.timeline), so a range is a binary search on the ts column and a
slice: the rows outside the range are never read, and the slice is a view, not a copy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..parsers.timeline import Timeline

TABLE_ROWS_SHOWN = 5_000  # rows of a per-step table sent to the browser at once


def range_rows(timeline: Timeline, lo: int, hi: int) -> tuple[int, int]:
    """(first, stop): the rows of the frame whose ts lies in [lo, hi), by binary search on the sorted ts."""
    ts = timeline.events["ts"].to_numpy()
    return int(np.searchsorted(ts, lo, side="left")), int(np.searchsorted(ts, hi, side="left"))


def events_in_range(timeline: Timeline, lo: int, hi: int) -> pd.DataFrame:
    """The events starting in [lo, hi) (ns on the trace's clock), in ts order: a slice of the frame, the rest
    never read."""
    first, stop = range_rows(timeline, lo, hi)
    return timeline.events.iloc[first:stop]


@dataclass(frozen=True)
class TablePage:
    """One page of a table: its rows, where they start, and how many the whole table has."""

    rows: pd.DataFrame
    start: int
    total: int

    @property
    def complete(self) -> bool:
        return len(self.rows) == self.total


def table_page(frame: pd.DataFrame, page: int = 0, size: int = TABLE_ROWS_SHOWN) -> TablePage:
    """Page `page` (from 0; past the end: the last page) of `size` rows of a table, for a view that must not ship
    every row of a long table to the browser (the download keeps them all)."""
    size = max(1, size)
    last = max(0, (len(frame) - 1) // size)
    start = min(max(0, page), last) * size
    return TablePage(frame.iloc[start : start + size], start, len(frame))
