"""The second decoding process in a process with other threads: a fresh interpreter started for the read (never a fork
of this process), with the same result as a plain fork, and gone when the read ends; one that cannot start leaves
this process decoding alone; the caller's work, its stop and its progress belong to its own decode only; a read
leaves the cycle collector as it found it.

SYNTHETIC traces (tests/test_split_decode.py's builders); the split threshold is lowered so small files take the
two-process path.
"""

from __future__ import annotations

import os
import threading

import pytest

from stepscope.parsers.kineto import pieces as split_decode
from stepscope.parsers.kineto import two_processes
from stepscope.parsers.kineto.reader import read_chrome_trace, read_chrome_trace_file
from tests.test_split_decode import _assert_same, _doc_bytes, _events, _serial


@pytest.fixture(autouse=True)
def _split_small_files(monkeypatch):
    monkeypatch.setattr(split_decode, "MIN_SPLIT_BYTES", 0)
    monkeypatch.setattr(split_decode, "PIECE_BYTES", 4096)
    monkeypatch.setenv("STEPSCOPE_PARSE_WORKERS", "2")


@pytest.fixture
def no_fork_here(monkeypatch):
    """This process may not fork (subprocess starts a fresh interpreter without os.fork)."""

    def refused():
        raise AssertionError("forked a process that runs other threads")

    monkeypatch.setattr(os, "fork", refused)


def _in_a_thread(work):
    out: dict = {}

    def run() -> None:
        try:
            out["value"] = work()
        except BaseException as exc:  # re-raised in the test's thread
            out["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


def _counted(received: list):
    """A PieceChannel.received that counts the pieces the other process sent."""
    from stepscope.parsers.kineto.channel import PieceChannel

    original = PieceChannel.received

    def counting(self, records):
        got = original(self, records)
        received.append(len(got or {}))
        return got

    return counting


def test_a_buffer_decoded_from_a_thread_goes_to_a_fresh_interpreter(monkeypatch, no_fork_here):
    from stepscope.parsers.kineto.channel import PieceChannel

    received: list[int] = []
    monkeypatch.setattr(PieceChannel, "received", _counted(received))
    monkeypatch.setattr(split_decode, "decode_piece", _slow(split_decode.decode_piece))
    data = _doc_bytes(_events(400), traceName="tail")
    _, builder, count = _in_a_thread(lambda: two_processes.decode_in_two([data]))
    assert count == 5 * 400 + 3 and builder.duration_events == 4 * 400
    assert received and received[0] > 0  # the other process decoded some of the pieces
    monkeypatch.undo()
    _assert_same(_in_a_thread(lambda: read_chrome_trace([data])), _serial(data, monkeypatch))


def test_a_file_decoded_from_a_thread_goes_to_a_fresh_interpreter(tmp_path, monkeypatch, no_fork_here):
    from stepscope.parsers.kineto.channel import PieceChannel

    data = _doc_bytes(_events(400), traceName="after the list", baseTimeNanoseconds=123)
    path = tmp_path / "trace.json"
    path.write_bytes(data)
    expected = _serial(data, monkeypatch)
    received: list[int] = []
    monkeypatch.setattr(PieceChannel, "received", _counted(received))
    monkeypatch.setattr(split_decode, "decode_piece", _slow(split_decode.decode_piece))
    from_file = _in_a_thread(lambda: read_chrome_trace_file(path))
    assert received and received[0] > 0
    _assert_same(from_file, expected)
    assert from_file.meta.extra["trace_name"] == "after the list" and from_file.meta.base_time_ns == 123


def _slow(decode):
    """This process's pieces take longer (the other process runs the real code), so that the other, though it may
    still be starting, surely takes some of them."""
    import time

    def slowed(*args, **kwargs):
        time.sleep(0.3)
        return decode(*args, **kwargs)

    return slowed


def _children() -> list[int]:
    """This process's child processes (every thread's)."""
    found = []
    for task in os.listdir(f"/proc/{os.getpid()}/task"):
        with open(f"/proc/{os.getpid()}/task/{task}/children") as handle:
            found += [int(pid) for pid in handle.read().split()]
    return found


def test_no_process_is_left_behind_and_one_that_cannot_start_leaves_this_process_decoding_alone(monkeypatch):
    import subprocess

    data = _doc_bytes(_events(300))
    expected = _serial(data, monkeypatch)
    before = _children()
    _assert_same(_in_a_thread(lambda: read_chrome_trace([data])), expected)
    _assert_same(read_chrome_trace([data]), expected)  # the main thread alone: a fork
    assert _children() == before

    def cannot_start(*args, **kwargs):
        raise OSError("no more processes")

    monkeypatch.setattr(subprocess, "Popen", cannot_start)
    _assert_same(_in_a_thread(lambda: read_chrome_trace([data])), expected)


@pytest.mark.parametrize("where", ["main thread", "thread"])
def test_meanwhile_runs_once_for_its_own_decode_and_its_true_stops_it(where, monkeypatch):
    """Two decodes at once, each with its own work: each work runs once, in its own decode; the one that says
    "stop" (its content is cached, say) stops only its own decode."""
    run = (lambda work: work()) if where == "main thread" else _in_a_thread
    data = _doc_bytes(_events(300))
    calls: list[str] = []

    def keep_going() -> bool:
        calls.append("keep going")
        return False

    def stop() -> bool:
        calls.append("stop")
        return True

    _, builder, _ = run(lambda: two_processes.decode_in_two([data], meanwhile=keep_going))
    assert calls == ["keep going"] and builder.duration_events == 4 * 300
    with pytest.raises(split_decode.DecodeStoppedError):
        run(lambda: two_processes.decode_in_two([data], meanwhile=stop))
    assert calls == ["keep going", "stop"]
    assert _in_a_thread(lambda: two_processes.decode_in_two([data]))[2] == 5 * 300 + 3  # nothing left behind


def test_two_decodes_in_two_threads_each_run_only_their_own_work(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_bytes(_doc_bytes(_events(300)))
    b.write_bytes(_doc_bytes(_events(500)))
    barrier, seen = threading.Barrier(2), {"a": [], "b": []}

    def decode(path, name):
        def work() -> bool:
            seen[name].append(threading.current_thread().name)
            return name == "a"  # a's caller has what it needs: only a's decode stops

        barrier.wait()
        try:
            return two_processes.decode_file_in_two(path, meanwhile=work)[2]
        except split_decode.DecodeStoppedError:
            return "stopped"

    results: dict = {}
    pairs = (("a", a), ("b", b))
    threads = [threading.Thread(target=lambda p=p, n=n: results.update({n: decode(p, n)}), name=n) for n, p in pairs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {"a": "stopped", "b": 5 * 500 + 3}
    assert seen == {"a": ["a"], "b": ["b"]}


@pytest.mark.parametrize("where", ["main thread", "thread"])
def test_progress_rises_to_one(where, tmp_path):
    from stepscope.parsers.load import read_trace_file

    path = tmp_path / "trace.json"
    path.write_bytes(_doc_bytes(_events(600)))
    heard: list[float] = []
    run = (lambda work: work()) if where == "main thread" else _in_a_thread
    timeline = run(lambda: read_trace_file(path, progress=heard.append))
    assert timeline is not None and len(timeline.events) == 4 * 600
    assert len(heard) > 3 and heard == sorted(heard) and heard[-1] == 1.0
    assert heard[0] == 0.0 and 0 < heard[1] < 1  # told once the pieces are planned, before any is decoded


@pytest.mark.parametrize("enabled", [True, False])
def test_a_read_leaves_the_cycle_collector_as_it_found_it(enabled):
    """Global state is the caller's: parsers/ neither switches the collector off while it reads nor on after."""
    import gc

    data = _doc_bytes(_events(300))
    seen = []
    was = gc.isenabled()
    try:
        (gc.enable if enabled else gc.disable)()
        two_processes.decode_in_two([data], meanwhile=lambda: seen.append(gc.isenabled()))
        assert seen == [enabled] and gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


def test_progress_through_the_cache_ends_at_one_on_a_miss_and_on_a_hit(tmp_path):
    from stepscope.trace_cache import timelines
    from stepscope.trace_cache.store import CacheStore

    path = tmp_path / "trace.json"
    path.write_bytes(_doc_bytes(_events(600)))
    store = CacheStore(tmp_path / "cache")
    miss: list[float] = []
    hit: list[float] = []
    timelines.open_trace_cached(path, store=store, progress=miss.append)
    timelines.open_trace_cached(path, store=store, progress=hit.append)
    assert len(miss) > 2 and miss == sorted(miss) and miss[-1] == 1.0
    assert hit == [1.0]
