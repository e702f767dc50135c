"""Issues 27, 47: a trace read in pieces is joined in one pass (parsers/kineto/join.py) and written into the cache's
column file (trace_cache/column_file.py: pyarrow's IPC writer), then mapped back from it. SYNTHETIC columns and
traces: the join against a plain stable sort, the column file's round trip, and every way the entry can fail (an
unwritable cache, a full disk) leaving the same Timeline, built in memory, and no file behind."""

from __future__ import annotations

import errno
import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stepscope.parsers.kineto import pieces as split_decode
from stepscope.parsers.kineto.join import Placement, Run, in_memory, narrow_run, sort_run
from stepscope.parsers.kineto.reader import read_chrome_trace
from stepscope.trace_cache import timelines
from stepscope.trace_cache.column_file import read_entry
from stepscope.trace_cache.store import CacheStore
from tests.synthetic_traces import doc, synthetic_generation


def test_the_table_of_fields_is_what_msgspec_decodes_and_the_frame_holds():
    """One table (parsers/kineto/fields.py): msgspec's structs read exactly its keys; its columns are the frame's."""
    import msgspec.structs

    from stepscope.parsers.kineto import fields
    from stepscope.parsers.timeline import COLUMNS

    assert fields.FRAME_COLUMNS == COLUMNS
    keys = {f.key for f in fields.EVENT_FIELDS}
    decoded = {f.encode_name for f in msgspec.structs.fields(fields.Args)}
    decoded |= {f.encode_name for f in msgspec.structs.fields(fields.Complete)} - {"args"}
    assert decoded == keys


def test_narrowed_columns_keep_every_value():
    extremes = np.array([-1, 0, 127, -128, 2**31 - 1, -(2**31), 2**62, -(2**63), 2**63 - 1], dtype=np.int64)
    cases = {"device": np.array([-1, 0, 3]), "stream": np.array([-1, 300]), "correlation": extremes}
    parts = {name: [values.astype(np.int64)] for name, values in cases.items()}
    narrow_run(parts)
    assert parts["device"][0].dtype == np.int8 and parts["stream"][0].dtype == np.int16
    for name, values in cases.items():
        assert parts[name][0].astype(np.int64).tolist() == values.tolist()


def test_joined_runs_are_the_stable_sort_of_the_pieces_in_file_order():
    rng = np.random.default_rng(11)
    runs, all_ts, all_ids = [], [], []
    for _ in range(6):  # overlapping in time, with ties inside and across runs
        n = int(rng.integers(1, 400))
        ts = rng.integers(0, 1000, n).astype(np.int64)
        ids = rng.integers(-1, 10**12, n).astype(np.int64)
        all_ts.append(ts)
        all_ids.append(ids)
        parts = {"ts": [ts.copy()], "correlation": [ids.copy()]}
        sort_run(parts)
        narrow_run(parts)
        runs.append(Run(n, in_memory({k: v[0] for k, v in parts.items()})))
    place = Placement(runs)
    out = np.empty(place.rows, dtype=np.int64)
    place.fill("correlation", out)
    ts_out = np.empty(place.rows, dtype=np.int64)
    place.fill("ts", ts_out)
    order = np.argsort(np.concatenate(all_ts), kind="stable")
    assert ts_out.tolist() == np.concatenate(all_ts)[order].tolist()
    assert out.tolist() == np.concatenate(all_ids)[order].tolist()


def _joined(runs_ts: list[np.ndarray]) -> tuple[Placement, list[int], list[int]]:
    """The Placement of these runs' ts (each sorted, ids = row number in file order), its ts and ids columns."""
    runs, start = [], 0
    for ts in runs_ts:
        ts = np.sort(np.asarray(ts, dtype=np.int64), kind="stable")
        ids = np.arange(start, start + len(ts), dtype=np.int64)
        start += len(ts)
        runs.append(Run(len(ts), in_memory({"ts": ts, "correlation": ids})))
    place = Placement(runs)
    ts_out, ids_out = np.empty(place.rows, dtype=np.int64), np.empty(place.rows, dtype=np.int64)
    place.fill("ts", ts_out)
    place.fill("correlation", ids_out)
    return place, ts_out.tolist(), ids_out.tolist()


def _stable_sort(runs_ts: list) -> tuple[list[int], list[int]]:
    ts = np.concatenate(
        [np.sort(np.asarray(t, dtype=np.int64), kind="stable") for t in runs_ts] + [np.array([], np.int64)]
    )
    order = np.argsort(ts, kind="stable")
    return ts[order].tolist(), order.tolist()


@pytest.mark.parametrize(
    "layout",
    [
        [[0, 1, 2], [3, 4], [5, 9]],  # one after another: nothing moves
        [[0, 5], [5, 5, 6], [6, 7]],  # ties across each boundary stay in file order
        [[0, 10], [20, 30], [1, 2]],  # a late run reaching back before every other: one group of three
        [[0, 10], [2, 3], [11, 12], [12, 12], [11, 13]],  # two groups, the second with ties
        [[5], [], [1], [], [9]],  # empty runs
    ],
)
def test_runs_are_merged_only_where_their_times_interleave(layout):
    place, ts, ids = _joined(layout)
    assert (ts, ids) == _stable_sort(layout)
    runs = [r for r in layout if r]
    alone = [
        max([max(x) for x in runs[:i]], default=-1) <= min(runs[i])
        and max(runs[i]) <= min([min(x) for x in runs[i + 1 :]], default=1 << 60)
        for i in range(len(runs))
    ]
    assert place.in_place == alone  # a run is copied as it is exactly when no other run's times cross its own


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 20), st.integers(0, 12)), max_size=12))
def test_grouped_placement_is_the_stable_sort_of_the_whole(shape):
    """Any layout of sorted runs (each: a start, a width, a number of rows): the same rows in the same order as one
    stable sort of the whole frame."""
    rng = np.random.default_rng(len(shape))
    layout = [rng.integers(base, base + width + 1, rows) for base, width, rows in shape]
    _, ts, ids = _joined(layout)
    assert (ts, ids) == _stable_sort(layout)


def test_a_column_file_reads_back_as_the_values_written(tmp_path):
    """The cache's column file (trace_cache/column_file.py: pyarrow's IPC writer, read back memory-mapped): the
    frame's values, its categories and its meta, each as written; a changed byte is refused, never read."""
    import pandas as pd

    from stepscope.parsers.timeline import Timeline, TraceMeta
    from stepscope.trace_cache.column_file import write_entry

    rows = 1000
    kinds = pd.Categorical.from_codes(np.arange(rows, dtype=np.int8) % 2, categories=["kernel", "cpu_op"])
    frame = pd.DataFrame({"ts": np.arange(rows, dtype=np.int64) * 7, "kind": kinds})
    meta = TraceMeta(source_format="kineto-json", event_count=rows, warnings=("w",))
    path = tmp_path / "entry.arrow"
    with open(path, "w+b") as handle:  # read and write, as the store's temporary file: the seal reads it back
        write_entry(handle, Timeline(events=frame, meta=meta), key="entry.arrow")
    back = read_entry(path, key="entry.arrow")
    assert back.events["ts"].tolist() == (np.arange(rows) * 7).tolist()
    assert back.events["kind"].tolist() == ["kernel", "cpu_op"] * (rows // 2)
    assert back.meta.warnings == ("w",) and back.meta.event_count == rows
    assert not back.events["ts"].to_numpy().flags.writeable  # a view of the mapped file
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError):
        read_entry(path, key="entry.arrow")


@pytest.fixture
def tiled(tmp_path, monkeypatch):
    monkeypatch.setattr(split_decode, "MIN_SPLIT_BYTES", 0)
    monkeypatch.setattr(split_decode, "PIECE_BYTES", 8 << 10)
    monkeypatch.setattr(timelines, "MAPPED_ROWS", 1)  # small traces mapped back too, as a big one is
    monkeypatch.setenv("STEPSCOPE_PARSE_WORKERS", "2")
    data = json.dumps(doc(synthetic_generation(decode_steps=200))).encode()
    path = tmp_path / "trace.json"
    path.write_bytes(data)
    return path, read_chrome_trace(data)


def _leftovers(store: CacheStore) -> list[str]:
    folder = store.root / "timelines"
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".tmp-")) if folder.exists() else []


def test_the_entry_written_in_place_is_the_timeline(tmp_path, tiled):
    path, whole = tiled
    store = CacheStore(tmp_path / "cache")
    _, timeline = timelines.open_trace_cached(path, store=store)
    pd.testing.assert_frame_equal(timeline.events, whole.events)
    assert not timeline.events["ts"].to_numpy().flags.writeable  # mapped from the entry, not held
    assert _leftovers(store) == []
    (entry,) = (store.root / "timelines").iterdir()
    again = read_entry(entry, key=entry.name)  # the seal hashed while writing is the file's: a check finds it whole
    pd.testing.assert_frame_equal(again.events, whole.events)


@pytest.mark.parametrize("failure", ["unwritable", "disk full"])
def test_an_entry_that_cannot_be_written_leaves_the_same_timeline_and_no_file(tmp_path, tiled, monkeypatch, failure):
    path, whole = tiled
    store = CacheStore(tmp_path / "cache")
    if failure == "unwritable":
        from stepscope.trace_cache import store as store_module

        def refuse(*args, **kwargs):
            raise OSError(errno.EACCES, "read-only")

        monkeypatch.setattr(store_module.tempfile, "mkstemp", refuse)
    else:
        from stepscope.trace_cache.entry_seal import SealingWriter

        def full(sink):
            sink.write(b"x" * 100)
            raise OSError(errno.ENOSPC, "no space left on device")

        monkeypatch.setattr(SealingWriter, "seal", full)
    _, timeline = timelines.open_trace_cached(path, store=store)
    pd.testing.assert_frame_equal(timeline.events, whole.events)
    assert _leftovers(store) == []
