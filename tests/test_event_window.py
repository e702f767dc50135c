"""Issue 27: the kernel detail of a chosen range reads only that range, and per-step tables go to the browser a
bounded page at a time (analysis/event_window.py). SYNTHETIC frames, checked against a plain mask."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from stepscope.analysis.event_window import events_in_range, range_rows, table_page
from stepscope.parsers.timeline import Timeline, TraceMeta


def _timeline(n: int = 5000, seed: int = 3) -> Timeline:
    rng = np.random.default_rng(seed)
    ts = np.sort(rng.integers(0, 1_000_000, n)).astype(np.int64)
    ts[100:110] = ts[100]  # ties: a range edge on a time several events share
    kinds = pd.Categorical(rng.choice(["kernel", "runtime", "cpu_op"], n))
    frame = pd.DataFrame(
        {
            "ts": ts,
            "dur": rng.integers(1, 500, n).astype(np.int64),
            "kind": kinds,
            "name": pd.Categorical([f"k{i % 7}" for i in range(n)]),
            "pid": np.zeros(n, np.int64),
            "tid": np.ones(n, np.int64),
            "device": np.zeros(n, np.int64),
            "stream": np.full(n, 7, np.int64),
            "correlation": np.arange(n, dtype=np.int64),
            "external_id": np.full(n, -1, np.int64),
        }
    )
    return Timeline(events=frame, meta=TraceMeta(source_format="synthetic", event_count=n))


@pytest.mark.parametrize("edges", [(0, 1), (1000, 250_000), "tie", (999_999, 2_000_000), (-5, 0), (300, 300)])
def test_a_range_read_returns_exactly_the_events_starting_in_it(edges):
    timeline = _timeline()
    ts = timeline.events["ts"].to_numpy()
    lo, hi = (int(ts[100]), int(ts[100]) + 1) if edges == "tie" else edges
    got = events_in_range(timeline, lo, hi)
    want = timeline.events[(ts >= lo) & (ts < hi)]
    pd.testing.assert_frame_equal(got, want)
    kernels = got[got["kind"] == "kernel"]
    assert kernels["correlation"].tolist() == want[want["kind"] == "kernel"]["correlation"].tolist()
    if edges == "tie":
        assert len(got) == 10  # every event at the shared time, none after it


def test_a_range_read_is_a_slice_of_the_frame_not_a_pass_over_it():
    timeline = _timeline()
    first, stop = range_rows(timeline, 200_000, 400_000)
    got = events_in_range(timeline, 200_000, 400_000)
    assert 0 < first < stop < len(timeline.events)
    assert np.shares_memory(got["ts"].to_numpy(), timeline.events["ts"].to_numpy())  # a view: nothing copied


def test_a_table_page_is_bounded_and_the_pages_cover_the_table():
    frame = pd.DataFrame({"step": np.arange(12_345)})
    pages = [table_page(frame, p, 5000) for p in range(3)]
    assert [len(p.rows) for p in pages] == [5000, 5000, 2345]
    assert pd.concat([p.rows for p in pages])["step"].tolist() == list(range(12_345))
    assert all(p.total == 12_345 and not p.complete for p in pages)
    assert table_page(frame, 99, 5000).start == 10_000  # past the end: the last page
    small = table_page(frame.iloc[:10])
    assert small.complete and len(small.rows) == 10
    assert table_page(frame.iloc[:0]).complete
