"""The frame of a trace decoded in pieces (pieces.py): each piece sorted by time on its own, joined by one pass.

Why: the pieces' columns used to be concatenated in file order and then reordered by time, two passes over every
column through fresh memory, in this process alone while the other one sat idle. Now each process sorts every
piece it decodes by ts (stable, tens of thousands of rows: in cache), so the file is a sequence of sorted runs; the
join finds where every row of every run goes (one stable argsort of the runs' ts, which merges the runs, and its
inverse) and writes each piece's column straight to those places, its string codes mapped to the joined tables
on the way. The result is the one-pass reader's frame exactly: a stable sort of pieces that were each stably
sorted, in file order, is the stable sort of the whole file.

A run's columns are read through `column(name)`: arrays in memory (this process's pieces) or read-only views of the
file the other process wrote them to (parsers/kineto/channel.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .columns import ColumnBuilder, code_dtype
from .fields import CODE_COLUMNS, OPTIONAL_COLUMNS
from .fields import FRAME_COLUMNS as COLUMNS

if TYPE_CHECKING:
    import pandas as pd

FRAME_COLUMNS = (*COLUMNS, *OPTIONAL_COLUMNS)  # a piece's columns that become frame columns
ID_COLUMNS = ("pid", "tid")  # ids that may stand for a string (a named lane), mapped to the joined ones


def sort_run(parts: dict[str, list[np.ndarray]]) -> None:
    """Put one piece's frame columns in ts order, stably, in place, each as one array: a piece built in slices
    (columns.SLICE_EVENTS) has several, kept last-first as the builder keeps its batches."""
    for name in FRAME_COLUMNS:
        if len(parts.get(name, ())) > 1:
            parts[name] = [np.concatenate(parts[name][::-1])]
    ts = parts["ts"]
    if len(ts) != 1 or len(ts[0]) < 2 or bool((ts[0][1:] >= ts[0][:-1]).all()):
        return
    order = np.argsort(ts[0], kind="stable")
    for name in FRAME_COLUMNS:
        if parts.get(name):
            parts[name][0] = parts[name][0][order]


def narrow_run(parts: dict[str, list[np.ndarray]]) -> None:
    """Store one piece's frame columns in the narrowest integer type their values fit (in place): most are
    small codes, ids and -1 (python spans have no device, stream, correlation), so a piece takes about 40 bytes a
    row instead of 104 in this process, in the other one's shared file and in the join's reads. The join writes
    them into int64 (or the code) columns, so nothing downstream sees the narrow types."""
    for name in FRAME_COLUMNS:
        arrays = parts.get(name)
        if arrays and len(arrays) == 1 and len(arrays[0]) and arrays[0].dtype == np.int64:
            parts[name][0] = arrays[0].astype(_fitting(int(arrays[0].min()), int(arrays[0].max())), copy=False)


def _fitting(lo: int, hi: int) -> type:
    for dtype in (np.int8, np.int16, np.int32):
        info = np.iinfo(dtype)
        if info.min <= lo and hi <= info.max:
            return dtype
    return np.int64


@dataclass
class Run:
    """One piece's frame columns, sorted by ts; `remaps` turn its string codes into the joined tables' codes,
    `ids` its string pid/tid ids into the joined ones (only those that change)."""

    rows: int
    column: Callable[[str], np.ndarray]  # the piece's int64 column of that name
    remaps: dict[str, np.ndarray] = field(default_factory=dict)
    ids: dict[int, int] = field(default_factory=dict)


def in_memory(columns: dict[str, np.ndarray]) -> Callable[[str], np.ndarray]:
    return columns.__getitem__


def _values(run: Run, name: str, dtype) -> np.ndarray:
    values = run.column(name)
    if name in run.remaps:
        return run.remaps[name].astype(dtype)[values]  # the table narrowed first: a narrow gather
    if name in ID_COLUMNS and run.ids:
        return _remap_ids(values, run.ids)
    return values


class Placement:
    """Where each run's rows go in the joined frame: nowhere new where the runs follow each other in time.

    The runs are cut into groups at every boundary where nothing before it is later than anything after it (the
    largest ts so far <= the smallest ts from there on); only the runs of a group that holds more than one are
    merged (a stable argsort of the group's ts, tens of thousands to a few million rows, instead of one over the
    whole frame), and a run alone in its group is copied to its place as it is. The concatenation of the groups'
    stable sorts is the stable sort of the whole: every row of a group sorts after every row of the groups
    before it, and equal times keep file order. A trace cut into pieces whose times interleave only nearby (a
    serving window written step after step; copies of a trace end to end) makes many small groups; one whose GPU
    activity comes after all of its host events makes one group, the single sort of before."""

    def __init__(self, runs: list[Run]) -> None:
        self.runs = [r for r in runs if r.rows]
        self.offsets = np.cumsum([0, *(r.rows for r in self.runs)])
        self.rows = int(self.offsets[-1])
        ts = np.empty(self.rows, dtype=np.int64)
        for run, start in zip(self.runs, self.offsets, strict=False):
            ts[start : start + run.rows] = run.column("ts")
        self.ts = ts
        self.positions = None  # where each row goes, when some group is merged; None: every row stays
        self.in_place = [True] * len(self.runs)  # whether the run's rows stay where they are
        if len(self.runs) < 2:
            return
        firsts, lasts = ts[self.offsets[:-1]], ts[self.offsets[1:] - 1]  # each run is sorted: its least and most
        latest_before = np.maximum.accumulate(lasts)[:-1]  # boundary i (before run i+1): the latest ts before it
        earliest_after = np.minimum.accumulate(firsts[::-1])[::-1][1:]  # the earliest ts from run i+1 on
        cuts = np.flatnonzero(latest_before <= earliest_after) + 1
        if len(cuts) == len(self.runs) - 1:  # each run starts no earlier than every run before it ends
            return
        index = np.int32 if self.rows < 1 << 31 else np.int64  # half the bytes written and read
        self.positions = np.arange(self.rows, dtype=index)
        for first, end in zip([0, *cuts.tolist()], [*cuts.tolist(), len(self.runs)], strict=True):
            if end - first < 2:
                continue
            lo, hi = int(self.offsets[first]), int(self.offsets[end])
            order = np.argsort(ts[lo:hi], kind="stable")
            ts[lo:hi] = ts[lo:hi][order]
            self.positions[lo + order] = np.arange(lo, hi, dtype=index)
            self.in_place[first:end] = [False] * (end - first)

    def fill(self, name: str, out: np.ndarray) -> None:
        """Write the joined column into `out`: each run's values where its rows go."""
        if name == "ts":
            out[:] = self.ts
            return
        for run, start, in_place in zip(self.runs, self.offsets, self.in_place, strict=False):
            values = _values(run, name, out.dtype)
            if in_place:
                out[start : start + run.rows] = values
            else:
                out[self.positions[start : start + run.rows]] = values

    def specs(self, tables: dict[str, dict]) -> list[tuple[str, np.dtype, list[str] | None]]:
        """The frame's columns in the one-pass reader's order: (name, type, categories or None)."""
        names = list(COLUMNS)
        if self.runs and any(bool(run.column("grid").any()) for run in self.runs):  # only traces with launch shapes
            names += ["grid", "block"]
        out = []
        for name in [*names, "input_dims"]:
            if name in CODE_COLUMNS:
                out.append((name, np.dtype(code_dtype(len(tables[name]))), list(tables[name])))
            else:
                out.append((name, np.dtype(np.int64), None))
        return out


def joined_frame(runs: list[Run], tables: dict[str, dict]) -> pd.DataFrame:
    """The frame of the runs, as _ColumnBuilder.frame() makes it from the same events in file order."""
    import pandas as pd

    place = Placement(runs)
    specs = place.specs(tables)
    arrays = {name: np.empty(place.rows, dtype=dtype) for name, dtype, _ in specs}
    _fill_all(place, list(arrays.items()))
    data = {}
    for name, _, categories in specs:
        values = arrays[name]
        if categories is not None:
            data[name] = pd.Categorical.from_codes(values, categories=categories, validate=False)
        else:
            data[name] = values
    return pd.DataFrame(data, copy=False)


def _fill_all(place: Placement, columns: list[tuple[str, np.ndarray]]) -> None:
    """Every column filled, two at a time: numpy's gathers and scatters release the GIL, and by now the other
    decoding process is done, so both cores write (each column's first write into fresh pages costs the most)."""
    from concurrent.futures import ThreadPoolExecutor

    if len(columns) < 2 or place.rows < 1 << 20:
        for name, out in columns:
            place.fill(name, out)
        return
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="stepscope-join") as pool:
        for done in [pool.submit(place.fill, name, out) for name, out in columns]:
            done.result()


class JoinedBuilder(ColumnBuilder):
    """The pieces' builder (pieces.merge_all): tables joined, frame columns kept as sorted runs."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[Run] = []

    def tables(self) -> dict[str, dict]:
        return {"kind": self.kinds, "name": self.names, "input_dims": self.dims}

    def frame(self) -> pd.DataFrame:
        return joined_frame(self.runs, self.tables())


def _remap_ids(values: np.ndarray, id_map: dict[int, int]) -> np.ndarray:
    """Each value that is a key of `id_map` replaced by its value (the map holds only the ids that change)."""
    if not id_map or not len(values):
        return values
    keys = np.array(sorted(id_map), dtype=np.int64)
    targets = np.array([id_map[k] for k in keys.tolist()], dtype=np.int64)
    pos = np.clip(np.searchsorted(keys, values), 0, len(keys) - 1)
    hit = keys[pos] == values
    return np.where(hit, targets[pos], values)
