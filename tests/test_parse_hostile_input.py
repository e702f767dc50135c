"""Bad input of every sort gets a TraceError with a one-line reason, never a crash or a hang."""

from __future__ import annotations

import gzip
import json
import math
import random

import pytest

from stepscope.parsers import ReadLimits, TraceError, load_trace, parse_trace_bytes
from tests.synthetic_traces import doc, kernel, launch, write

SMALL = ReadLimits(max_file_bytes=5 << 20, max_decompressed_bytes=20 << 20)


def _error(data: bytes, limits: ReadLimits | None = None) -> str:
    with pytest.raises(TraceError) as info:
        parse_trace_bytes(data, limits)
    message = str(info.value)
    assert "\n" not in message and message
    return message


def test_empty_file(tmp_path):
    path = tmp_path / "empty.json"
    path.write_bytes(b"")
    with pytest.raises(TraceError, match="empty"):
        load_trace(path)
    assert "empty" in _error(b"   \n ")


def test_missing_file(tmp_path):
    with pytest.raises(TraceError, match="cannot open"):
        load_trace(tmp_path / "nope.json")


def test_binary_garbage():
    """Seeded, so the bytes are the same every run (os.urandom sometimes made a valid-looking protobuf start,
    which is then rightly called a truncated Perfetto trace)."""
    garbage = random.Random(17).randbytes(4096).replace(b"\x1f\x8b", b"xx").replace(b"{", b"x").replace(b"[", b"x")
    assert "binary" in _error(garbage)


def test_truncated_json():
    data = json.dumps(doc([kernel("k", 1.0, 1.0, 1)] * 50)).encode()
    assert "truncated" in _error(data[: len(data) // 2])


def test_truncated_gzip():
    data = gzip.compress(json.dumps(doc([kernel("k", 1.0, 1.0, 1)] * 500)).encode())
    assert "truncated gzip" in _error(data[: len(data) - 40])


def test_corrupt_gzip():
    data = bytearray(gzip.compress(json.dumps(doc([kernel("k", 1.0, 1.0, 1)])).encode()))
    data[20:30] = b"\xff" * 10
    assert "gzip" in _error(bytes(data))


def test_gzip_bomb_stops_at_the_decompression_limit():
    bomb = gzip.compress(b"[" + b" " * (200 << 20) + b"]", compresslevel=9)  # 200 MB of spaces, ~200 KB packed
    assert len(bomb) < 1 << 20
    assert "decompression limit" in _error(bomb, SMALL)


def test_file_over_the_size_limit(tmp_path):
    path = tmp_path / "big.json"
    path.write_bytes(b"[" + b" " * (6 << 20) + b"]")
    with pytest.raises(TraceError, match="limit"):
        load_trace(path, SMALL)


def test_valid_json_that_is_not_a_trace():
    assert "traceEvents" in _error(b'{"hello": "world"}')
    assert "event 0" in _error(b"[1, 2, 3]")
    assert "not JSON" in _error(b'"just a string"') or "text" in _error(b'"just a string"')


def test_unknown_phase_is_rejected_with_its_position():
    message = _error(json.dumps([kernel("k", 1.0, 1.0, 1), {"ph": "Z", "name": "x"}]).encode())
    assert "event 1" in message


def test_wrong_typed_field_names_the_event_and_field():
    events = [kernel("k", 1.0, 1.0, 1), kernel("k", 2.0, 1.0, 2)]
    events[1]["ts"] = "soon"
    message = _error(json.dumps(doc(events)).encode())
    assert "event 1" in message and "ts" in message


def test_missing_fields_are_skipped_and_counted():
    events = [kernel("k", 1.0, 1.0, 1), {"ph": "X", "cat": "kernel", "name": "no time"}]
    timeline = parse_trace_bytes(json.dumps(doc(events)).encode())
    assert len(timeline) == 1
    assert timeline.meta.skipped["missing or non-finite ts"] == 1
    assert any("skipped" in w for w in timeline.meta.warnings)


def test_negative_durations_are_skipped_and_counted():
    events = [kernel("k", 1.0, 1.0, 1), kernel("neg", 2.0, -5.0, 2)]
    timeline = parse_trace_bytes(json.dumps(doc(events)).encode())
    assert list(timeline.events["name"]) == ["k"]
    assert timeline.meta.skipped["missing, negative or non-finite dur"] == 1


def test_nan_and_infinite_timestamps():
    # JSON has no NaN or Infinity: Python's json writes them as bare tokens, which are malformed JSON,
    # and a number too large for a double is out of range. Both name the problem in one line.
    assert "malformed" in _error(json.dumps([kernel("k", math.nan, 1.0, 1)]).encode())
    assert "malformed" in _error(json.dumps([kernel("k", math.inf, 1.0, 1)]).encode())
    message = _error(b'[{"ph":"X","cat":"kernel","name":"b","ts":5,"dur":1},{"ph":"X","name":"a","ts":1e999}]')
    assert "event 1" in message and "out of range" in message and "ts" in message


def test_timestamps_beyond_any_clock_are_rejected():
    assert "2^62 ns" in _error(json.dumps([kernel("k", 1e17, 1.0, 1)]).encode())


def test_a_10_mb_name_is_cut_not_fatal():
    events = [kernel("A" * (10 << 20), 1.0, 1.0, 1), launch(0.5, 0.2, 1)]
    timeline = parse_trace_bytes(json.dumps(doc(events)).encode())
    name = timeline.events.loc[timeline.events["kind"] == "kernel", "name"].iloc[0]
    assert len(name) <= 16385
    assert any("cut" in w for w in timeline.meta.warnings)


def test_deeply_nested_json_is_rejected_cleanly():
    data = b'{"traceEvents": [{"ph": "X", "args": ' + b"[" * 100000 + b"]" * 100000 + b"}]}"
    _error(data)


def test_huge_integer_ids_become_unknown_with_a_warning():
    events = [kernel("k", 1.0, 1.0, 1), kernel("k", 3.0, 1.0, 2)]
    events[0]["args"]["correlation"] = 10**30
    timeline = parse_trace_bytes(json.dumps(events).encode())
    assert sorted(timeline.events["correlation"].tolist()) == [-1, 2]
    assert any("1 ids" in w and "64 bits" in w for w in timeline.meta.warnings)


def test_no_duration_events():
    assert "complete" in _error(json.dumps(doc([{"ph": "i", "name": "x", "ts": 1}])).encode())
    assert "no events" in _error(json.dumps(doc([])).encode())


def test_gzip_and_plain_read_the_same(tmp_path):
    events = [kernel("k", 1.5, 2.25, 1), launch(1.0, 0.4, 1)]
    plain = load_trace(write(tmp_path / "t.json", events)).events
    packed = load_trace(write(tmp_path / "t.json.gz", events, gz=True)).events
    assert plain.equals(packed)
    assert math.isclose(plain["dur"].iloc[-1], 2250)


def test_limits_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("STEPSCOPE_MAX_FILE_MB", "7")
    monkeypatch.setenv("STEPSCOPE_MAX_DECOMPRESSED_MB", "9")
    limits = ReadLimits.from_env()
    assert limits.max_file_bytes == 7 << 20 and limits.max_decompressed_bytes == 9 << 20
    monkeypatch.setenv("STEPSCOPE_MAX_FILE_MB", "lots")
    with pytest.raises(TraceError, match="whole number"):
        ReadLimits.from_env()
