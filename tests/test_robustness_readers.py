"""Regression tests for the reader defect classes of issue 16, each on a small SYNTHETIC input built here.

Classes: 3 (64-bit overflow in all three readers), 6 (sqlite errors through pandas), 7 (Perfetto: invalid
UTF-8, numbers beyond int64, a quadratic track-parent chain), 8 (Kineto JSON: invalid UTF-8, metadata
pids), 10 (decompression amplification: event-count limit, multi-member gzip), 12 (messages say where).
"""

from __future__ import annotations

import gzip
import json
import sqlite3
import time
import zlib

import numpy as np
import pytest

from stepscope.parsers import ReadLimits, TraceError, parse_trace_bytes
from stepscope.parsers.limits import DEFAULT_MAX_DECOMPRESSED_MB, DEFAULT_MAX_EVENTS, MAX_EVENTS_ENV
from stepscope.parsers.numbers import MAX_TIME, bounded_int, int64_column
from tests.synthetic_traces import doc, kernel, launch

pb = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")


def _best_of_two(fn, data) -> float:
    """The faster of two timed calls: a shared machine's noise only ever adds time."""
    best = float("inf")
    for _ in range(2):
        start = time.perf_counter()
        fn(data)
        best = min(best, time.perf_counter() - start)
    return best


def _no_event_ends_before_it_starts(timeline) -> None:
    ev = timeline.events
    assert (ev["dur"] >= 0).all()
    assert (ev["ts"] + ev["dur"] >= ev["ts"]).all()  # no wrap-around
    assert ev["ts"].abs().max() <= MAX_TIME and ev["dur"].max() <= MAX_TIME


# --- class 3: overflow and wrap-around


def test_kineto_huge_dur_and_ts_plus_dur_past_int64_are_skipped_and_counted():
    events = [
        kernel("ok", 10.0, 5.0, 1),
        kernel("huge dur", 20.0, 1e300, 2),
        kernel("wraps", 4.5e15, 4.5e15, 3),
        kernel("far ts", 9.3e15, 1.0, 4),
    ]
    timeline = parse_trace_bytes(json.dumps(doc(events)).encode())
    assert timeline.events["name"].astype(str).tolist() == ["ok", "wraps"]  # 4.5e15 us each: sum still < 2^63 ns
    skipped = timeline.meta.skipped["ts or dur beyond 2^62 ns (would overflow 64-bit time)"]
    assert skipped == 2
    assert any("2 events skipped: ts or dur beyond 2^62" in w for w in timeline.meta.warnings)
    _no_event_ends_before_it_starts(timeline)


def _perfetto(slices, track_name="GPU 0 stream 7", extra=None) -> bytes:
    trace = pb.Trace()
    desc = trace.packet.add().track_descriptor
    desc.uuid, desc.name = 1, track_name
    for begin_ts, end_ts, name, corr in slices:
        b = trace.packet.add()
        b.trusted_packet_sequence_id, b.timestamp = 1, begin_ts
        b.track_event.type, b.track_event.track_uuid, b.track_event.name = pb.TrackEvent.TYPE_SLICE_BEGIN, 1, name
        b.track_event.categories.append("kernel")
        if corr is not None:
            b.track_event.correlation_id = corr
        e = trace.packet.add()
        e.trusted_packet_sequence_id, e.timestamp = 1, end_ts
        e.track_event.type, e.track_event.track_uuid = pb.TrackEvent.TYPE_SLICE_END, 1
    data = trace.SerializeToString()
    return data + (extra or b"")


def test_perfetto_varints_beyond_int64_never_wrap():
    data = _perfetto([(100, 200, "ok", 2**64 - 1), (2**63 + 5, 2**64 - 1, "far", 1), (300, 2**63, "end far", 3)])
    timeline = parse_trace_bytes(data)
    assert timeline.events["name"].astype(str).tolist() == ["ok"]
    assert timeline.events["correlation"].tolist() == [-1]  # 2^64-1 is no correlation id
    assert timeline.meta.skipped["track events with a timestamp beyond 2^62 ns (would overflow 64-bit time)"] == 3
    _no_event_ends_before_it_starts(timeline)


def _nsys(rows) -> bytes:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "r.sqlite"
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
        conn.execute("INSERT INTO StringIds VALUES (1, 'k')")
        conn.execute(
            "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, streamId, correlationId, demangledName)"
        )
        conn.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 7, ?, 1)", rows)
        conn.commit()
        conn.close()
        return path.read_bytes()


def test_nsys_inf_1e300_text_null_and_huge_times_are_skipped_not_wrapped():
    rows = [
        (100, 200, 1),
        (300, float("inf"), 2),
        (400, 1e300, 3),
        ("soon", 600, 4),
        (700, None, 5),
        (2**63 - 1, 2**63 - 1, 6),
        (900, 800, 7),
        (1000, 1100, "x"),
    ]
    timeline = parse_trace_bytes(_nsys(rows))
    assert timeline.events["ts"].tolist() == [100, 1000]
    assert timeline.events["correlation"].tolist() == [1, -1]  # text correlation: unknown
    assert timeline.meta.skipped["start or end missing, not a number or beyond 2^62 ns"] == 5
    assert timeline.meta.skipped["ending before start"] == 1
    _no_event_ends_before_it_starts(timeline)


# --- class 6: sqlite errors that pandas wraps


def test_nsys_missing_column_names_the_table():
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "r.sqlite"
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
        conn.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start, end, streamId, correlationId)")  # no deviceId
        conn.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1, 2, 7, 1)")
        conn.commit()
        conn.close()
        data = path.read_bytes()
    with pytest.raises(TraceError) as info:
        parse_trace_bytes(data)
    message = str(info.value)
    assert "CUPTI_ACTIVITY_KIND_KERNEL" in message and "deviceId" in message and "\n" not in message


def test_nsys_corrupt_page_is_one_line():
    data = bytearray(_nsys([(100 + i, 200 + i, i) for i in range(400)]))
    for page_start in range(0, len(data), 4096):  # every page's header and cell pointers trashed
        data[page_start + 100 : page_start + 400] = b"\xa5" * 300
    with pytest.raises(TraceError) as info:
        parse_trace_bytes(bytes(data))
    assert "\n" not in str(info.value) and "SQLite" in str(info.value)


# --- class 7: Perfetto


def test_perfetto_invalid_utf8_in_names_is_replaced_and_counted():
    data = _perfetto([(100, 200, "good", None), (300, 400, "badname", None)], track_name="GPU 0 stream 7")
    data = data.replace(b"badname", b"bad\xffnam")
    timeline = parse_trace_bytes(data)
    assert timeline.events["name"].astype(str).tolist() == ["good", "bad\ufffdnam"]
    assert any("invalid UTF-8" in w for w in timeline.meta.warnings)


def test_perfetto_numbers_in_track_names_beyond_int64_are_not_lane_ids():
    timeline = parse_trace_bytes(_perfetto([(100, 200, "k", None)], track_name="GPU 99999999999999999999 stream 1"))
    assert len(timeline.events) == 1 and timeline.events["device"].abs().max() < 2**31


def _chain_trace(depth: int) -> bytes:
    """`depth` tracks, each the parent of the next, every one holding a slice."""
    trace = pb.Trace()
    for uuid in range(1, depth + 1):
        desc = trace.packet.add().track_descriptor
        desc.uuid, desc.parent_uuid, desc.name = uuid, uuid - 1, f"t{uuid}"
    for uuid in range(1, depth + 1):
        for kind, ts in ((pb.TrackEvent.TYPE_SLICE_BEGIN, uuid * 10), (pb.TrackEvent.TYPE_SLICE_END, uuid * 10 + 5)):
            p = trace.packet.add()
            p.trusted_packet_sequence_id, p.timestamp = 1, ts
            p.track_event.type, p.track_event.track_uuid, p.track_event.name = kind, uuid, "s"
    return trace.SerializeToString()


def test_perfetto_long_track_parent_chain_reads_in_linear_time():
    timings = [_best_of_two(parse_trace_bytes, _chain_trace(n)) for n in (1000, 8000)]
    # 8x the tracks: a quadratic walk would take ~64x as long; linear ~8x. Allow noise, refuse quadratic.
    assert timings[1] < 40 * max(timings[0], 0.01), timings
    assert len(parse_trace_bytes(_chain_trace(4000)).events) == 4000


# --- class 8: Kineto JSON


def test_kineto_invalid_utf8_in_a_name_is_replaced_and_counted():
    data = json.dumps(doc([kernel("kern_A", 1.0, 1.0, 1), kernel("kern_B", 3.0, 1.0, 2)])).encode()
    data = data.replace(b"kern_B", b"kern\xff\xfeB")
    timeline = parse_trace_bytes(data)
    assert sorted(timeline.events["name"].astype(str)) == ["kern_A", "kern\ufffd\ufffdB"]
    assert any("2 invalid UTF-8 sequences" in w for w in timeline.meta.warnings)


@pytest.mark.parametrize("pid", [2**64, 10**30, "x" * 300, -(2**70)])
def test_kineto_metadata_with_unparseable_pid_is_not_fatal(pid):
    events = [
        {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": "proc"}},
        {"ph": "M", "name": "process_sort_index", "pid": 1, "args": {"sort_index": 1e300}},
        kernel("k", 1.0, 1.0, 1),
    ]
    timeline = parse_trace_bytes(json.dumps(doc(events)).encode())
    assert len(timeline.events) == 1


# --- class 10: decompression amplification


def test_default_limits_are_2_gib_and_20_million_events():
    limits = ReadLimits.from_env()
    assert limits.max_decompressed_bytes == 2048 << 20 == DEFAULT_MAX_DECOMPRESSED_MB << 20
    assert limits.max_events == 20_000_000 == DEFAULT_MAX_EVENTS


def test_too_many_tiny_events_are_refused_by_count_naming_the_variable(monkeypatch):
    tiny = b'{"ph":"i","ts":1},'
    data = gzip.compress(b'{"traceEvents":[' + tiny * 50_000 + b'{"ph":"i","ts":1}]}')
    monkeypatch.setenv(MAX_EVENTS_ENV, "10000")
    with pytest.raises(TraceError, match=MAX_EVENTS_ENV) as info:
        parse_trace_bytes(data)
    assert "50,001" in str(info.value)


def test_many_gzip_members_decompress_in_linear_time():
    def members(n: int) -> bytes:
        one = gzip.compress(b" ")
        return gzip.compress(json.dumps(doc([kernel("k", 1.0, 1.0, 1)])).encode()) + one * n

    assert len(parse_trace_bytes(members(10)).events) == 1
    timings = [_best_of_two(parse_trace_bytes, members(n)) for n in (2_000, 16_000)]
    assert timings[1] < 40 * max(timings[0], 0.01), timings  # quadratic would be ~64x


def test_gzip_trailing_zero_padding_is_fine_but_garbage_is_not():
    body = gzip.compress(json.dumps(doc([kernel("k", 1.0, 1.0, 1)])).encode())
    assert len(parse_trace_bytes(body + b"\x00" * 100).events) == 1
    with pytest.raises(TraceError, match="gzip"):
        parse_trace_bytes(body + b"\x00" * 10 + b"junk")
    with pytest.raises(TraceError, match="corrupt gzip"):
        parse_trace_bytes(body + zlib.compress(b"x"))


# --- class 12: messages say what and where


def test_value_errors_name_the_event_and_field():
    events = [kernel("k", 1.0, 1.0, 1), {"ph": "X", "cat": "kernel", "name": "k", "ts": "soon", "dur": 1}]
    with pytest.raises(TraceError) as info:
        parse_trace_bytes(json.dumps(events).encode())
    assert "event 1" in str(info.value) and "ts" in str(info.value)


# --- the helpers themselves


def test_bounded_helpers():
    assert bounded_int("12") == 12 and bounded_int("9" * 20) is None and bounded_int("-3") is None
    assert bounded_int(str(2**40)) is None and bounded_int(str(2**40 - 1)) == 2**40 - 1
    values, ok = int64_column(np.array([1, 2**63, 3], dtype=np.uint64))
    assert values.tolist() == [1, -1, 3] and ok.tolist() == [True, False, True]


def test_launch_helper_is_used():  # keeps the import honest for ruff
    assert launch(1.0, 1.0, 1)["cat"] == "cuda_runtime"
