"""Two sessions (threads of one server) opening two different big traces at once each get exactly their own digest,
Timeline and answer, equal to a lone open, and the stat index then holds each file's own digest; a stat index entry
that disagrees with the file's bytes is never served.

The failure this guards against (issue 26, class 1): the decoder kept one module-level list of "while decoding"
callbacks, so one open's decode ran the other's hash and "already cached" signal, and got the other's Timeline and
recorded the other's digest for its own path. It showed when one of the two files held content already cached under
another stat (a copy, or a `touch`), so every round here sets that up.

Traces here are SYNTHETIC (tests/synthetic_traces.py), each over the two-process threshold
(parsers.split_decode.MIN_SPLIT_BYTES, not lowered here): the real two-process path runs, forked by the decode
helper since the opens run in threads.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import streamlit as st

from stepscope.analysis import analyze
from stepscope.analysis.front_door import NO_CACHE, open_trace
from stepscope.analysis.report import contract
from stepscope.parsers import Timeline, load_trace
from stepscope.parsers.kineto import pieces as split_decode
from stepscope.trace_cache import keys, timelines
from stepscope.trace_cache.store import CacheStore
from tests.conftest import ROOT
from tests.synthetic_traces import synthetic_generation, write

ROUNDS = 6  # on the old code, every round went wrong


@dataclass(frozen=True)
class Lone:
    """A trace and what a lone open of it gives, outside every cache."""

    path: Path
    digest: str
    timeline: Timeline
    answer: dict  # contract(timeline, analyze(timeline))
    report: dict  # the front door's answer (what the app shows)


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> dict[str, Lone]:
    folder = tmp_path_factory.mktemp("big")
    out = {}
    for name, steps in (("cached", 8500), ("new", 9000)):
        (folder / name).mkdir()
        path = write(folder / name / "trace.json", synthetic_generation(decode_steps=steps))
        assert path.stat().st_size > split_decode.MIN_SPLIT_BYTES
        timeline = load_trace(path)
        report = open_trace(path, cache=NO_CACHE).report
        digest = keys.hash_bytes(path.read_bytes())
        out[name] = Lone(path, digest, timeline, contract(timeline, analyze(timeline)), report)
    assert len(out["cached"].timeline.events) != len(out["new"].timeline.events)
    return out


def _assert_same(got: Timeline, lone: Lone) -> None:
    """Equal frames (column by column: codes and categories, or values and dtypes) and equal metadata.
    (pandas' assert_frame_equal boxes every categorical value: tens of seconds on these traces.)"""
    expected = lone.timeline.events
    assert list(got.events.columns) == list(expected.columns) and len(got.events) == len(expected)
    for name in expected.columns:
        a, b = got.events[name], expected[name]
        if isinstance(b.dtype, pd.CategoricalDtype):
            assert isinstance(a.dtype, pd.CategoricalDtype), name
            assert list(a.cat.categories) == list(b.cat.categories), name
            assert np.array_equal(a.cat.codes.to_numpy(), b.cat.codes.to_numpy()), name
        else:
            assert a.dtype == b.dtype and np.array_equal(a.to_numpy(), b.to_numpy()), name
    assert got.meta == lone.timeline.meta


def _renewed(lone: Lone, folder: Path, round_: int) -> Path:
    """The cached content under a stat the index has not seen: a copy on even rounds, a `touch` on odd ones."""
    if round_ % 2 == 0:
        copy = folder / f"copy{round_}" / "trace.json"
        copy.parent.mkdir(parents=True)
        shutil.copyfile(lone.path, copy)
        return copy
    st_ = lone.path.stat()
    os.utime(lone.path, ns=(st_.st_atime_ns, st_.st_mtime_ns + 1_000_000_000))
    return lone.path


def _at_once(*work) -> list:
    """Run each callable in a thread of its own, all released together; their results in order (errors raised)."""
    barrier = threading.Barrier(len(work))
    results: list = [None] * len(work)

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = work[i]()
        except BaseException as exc:  # re-raised below, in the test's thread
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(work))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results


def _session(path: Path, store: CacheStore) -> tuple[str, Timeline, dict]:
    """What a session does with a trace: open it through the cache, analyse it."""
    digest, timeline = timelines.open_trace_cached(path, store=store)
    return digest, timeline, contract(timeline, analyze(timeline))


def test_two_big_traces_opened_at_once_each_get_their_own(big, tmp_path):
    cached, new = big["cached"], big["new"]
    for round_ in range(ROUNDS):
        store = CacheStore(tmp_path / f"cache{round_}")
        timelines.open_trace_cached(cached.path, store=store)  # its content is in the cache
        renewed = _renewed(cached, tmp_path, round_)

        got_cached, got_new = _at_once(partial(_session, renewed, store), partial(_session, new.path, store))
        for (digest, timeline, answer), lone in ((got_cached, cached), (got_new, new)):
            assert digest == lone.digest, (round_, lone.path.parent.name)
            _assert_same(timeline, lone)
            assert answer == lone.answer
        assert keys.known_digest(store, renewed) == cached.digest  # each path's own digest, nothing else's
        assert keys.known_digest(store, new.path) == new.digest


def test_two_sessions_through_the_app_cache_each_get_their_own(big, tmp_path, monkeypatch):
    """The same through app/cache.py, as two sessions of the app open them."""
    from stepscope.app import cache as app_cache

    cached, new = big["cached"], big["new"]
    for round_ in range(ROUNDS):
        monkeypatch.setenv("STEPSCOPE_CACHE_DIR", str(tmp_path / f"cache{round_}"))
        st.cache_data.clear()
        st.cache_resource.clear()
        timelines.open_trace_cached(cached.path, store=CacheStore())  # on disk only, not in the app's memory
        renewed = _renewed(cached, tmp_path, round_)
        got_cached, got_new = _at_once(partial(app_cache.load_path, renewed), partial(app_cache.load_path, new.path))
        for loaded, lone in ((got_cached, cached), (got_new, new)):
            assert loaded.digest == lone.digest, (round_, lone.path.parent.name)
            _assert_same(loaded.timeline, lone)
            assert loaded.report == lone.report
        assert keys.known_digest(CacheStore(), renewed) == cached.digest
        assert keys.known_digest(CacheStore(), new.path) == new.digest
    st.cache_data.clear()
    st.cache_resource.clear()


def test_a_lone_open_in_a_thread_equals_one_in_the_main_thread(big, tmp_path):
    """In a thread the decode helper forks the second process (from its clean state), in the main thread a plain
    fork does: the same Timeline either way, through the cache too."""
    new = big["new"]
    (from_thread,) = _at_once(lambda: timelines.open_trace_cached(new.path, store=CacheStore(tmp_path / "a")))
    from_main = timelines.open_trace_cached(new.path, store=CacheStore(tmp_path / "b"))
    for digest, timeline in (from_thread, from_main):
        assert digest == new.digest
        _assert_same(timeline, new)


# --- the stat index is checked against the bytes ------------------------------------------------------------------


def _cli(args: list[str], cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "STEPSCOPE_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300
    )


def test_a_stat_entry_that_disagrees_with_the_bytes_is_never_served(tmp_path):
    """A hand-written entry for one trace's path holding another trace's digest (in the older format, and with
    the other trace's own sample, as a mixed-up open would have written it) is not served: not by the cache, not by
    the command line's warm path; the file is hashed again and its own digest recorded."""
    cache = tmp_path / "cache"
    store = CacheStore(cache)
    for folder in ("other", "mine"):
        (tmp_path / folder).mkdir()
    other = write(tmp_path / "other" / "trace.json", synthetic_generation(decode_steps=3))
    mine = write(tmp_path / "mine" / "trace.json", synthetic_generation(decode_steps=7))
    assert _cli(["analyze", str(other), "--json"], cache).returncode == 0  # its Timeline and answer are cached
    other_digest = keys.known_digest(store, other)
    assert other_digest == keys.hash_bytes(other.read_bytes())
    other_entry = store.read_bytes("stat", keys._stat_name(other)[0])
    expected = len(load_trace(mine).events)
    for forged in (other_digest.encode(), other_entry):
        store.put_bytes("stat", keys._stat_name(mine)[0], forged)
        warm = _cli(["analyze", str(mine), "--json"], cache)
        assert warm.returncode == 0, warm.stderr
        assert json.loads(warm.stdout)["events"] == expected  # its own answer, not the other trace's
        assert keys.known_digest(store, mine) == keys.hash_bytes(mine.read_bytes())  # recorded again, right
        store.put_bytes("stat", keys._stat_name(mine)[0], forged)
        digest, timeline = timelines.open_trace_cached(mine, store=store)
        assert digest == keys.hash_bytes(mine.read_bytes()) and len(timeline.events) == expected


def test_a_rewrite_the_stat_does_not_show_is_not_served(tmp_path):
    """Other bytes under a stat the index knows (a same-size rewrite within one tick of a coarse clock, a file system
    that keeps no ctime): simulated by moving the entry to the rewritten file's stat. The sample differs: the old
    digest is dropped and the file hashed again."""
    store = CacheStore(tmp_path / "cache")
    trace = write(tmp_path / "trace.json", synthetic_generation(decode_steps=5))
    digest, _ = timelines.open_trace_cached(trace, store=store)
    entry = store.read_bytes("stat", keys._stat_name(trace)[0])
    data = trace.read_bytes()
    rewritten = data[:-60] + data[-60:].replace(b"1", b"2")  # the last events' numbers: same size, other bytes
    assert len(rewritten) == len(data) and rewritten != data
    trace.write_bytes(rewritten)
    store.put_bytes("stat", keys._stat_name(trace)[0], entry)  # as if the stat had not changed
    assert keys.known_digest(store, trace) is None
    new_digest, _ = timelines.open_trace_cached(trace, store=store)
    assert new_digest == keys.hash_bytes(rewritten) != digest
    assert keys.known_digest(store, trace) == new_digest
