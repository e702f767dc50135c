"""The compiled event scanner (parsers/kineto/scan.py, loaded from Numba's cache by parsers/kineto/compiled.py) reads
a piece of the event list to exactly what msgspec and the column builder make of it, or gives the piece up.

The property that makes it safe: whatever the scanner accepts, msgspec accepts too and the builder's columns,
tables and counts are the same; whatever msgspec rejects, the scanner gives up. Checked on every real trace shipped
(cut into pieces as pieces.py cuts them, at two piece sizes) and on SYNTHETIC events built here (Hypothesis:
every key order, spacing, escapes, number spellings, string ids, phases, and byte-level mutations of them).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import msgspec
import msgspec.structs
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parsers import TraceError
from parsers.kineto import compiled as scanner
from parsers.kineto import pieces as split_decode
from parsers.kineto import scanned as scanned_piece
from parsers.kineto.columns import ColumnBuilder as _ColumnBuilder
from tests.conftest import REAL_TRACES, ROOT, missing
from tests.fuzz_inputs import kineto_event, mutated

CAPTURES = ROOT / "tests" / "data" / "captures"
SAMPLES = ROOT / "sample_traces"


@pytest.fixture(scope="module")
def compiled():
    """The scanner as the other decoding process loads it from Numba's cache (compiled first if it is not there)."""
    if not scanner.ready():
        scanner.compile_now()
    loaded = scanner.load()
    assert loaded is not None, "the compiled scanner does not load"
    return loaded


def _msgspec_builder(piece: bytes) -> tuple[_ColumnBuilder | None, int]:
    """What split_decode's msgspec path makes of the piece: (builder, events), or (None, 0) when it does not
    decode (or the builder refuses a value)."""
    try:
        events = split_decode.PIECE_DECODER.decode(b"[" + piece + b"]")
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        return None, 0
    builder = _ColumnBuilder()
    try:
        builder.add_batch(events)
    except TraceError:
        return None, 0
    return builder, len(events)


def _scanned_builder(compiled, piece: bytes, lo: int = 0, hi: int | None = None, data: bytes | None = None):
    data = piece if data is None else data
    array = np.frombuffer(data, dtype=np.uint8)
    scanned = scanned_piece.scan_piece(compiled, array, lo, len(data) if hi is None else hi)
    if scanned is None:
        return None, 0
    builder = _ColumnBuilder()
    try:
        builder.add_scanned(scanned)
    except TraceError:
        return None, 0
    return builder, scanned.events


def _columns(builder: _ColumnBuilder) -> dict[str, np.ndarray]:
    return {c: np.concatenate(v[::-1]) if v else np.array([]) for c, v in builder.parts.items()}


def assert_same_builder(a: _ColumnBuilder, b: _ColumnBuilder) -> None:
    ca, cb = _columns(a), _columns(b)
    for column in ca:
        np.testing.assert_array_equal(ca[column], cb[column], err_msg=column)
    for table in ("kinds", "names", "dims", "string_ids", "process_names", "thread_names", "sort_order"):
        assert list(getattr(a, table).items()) == list(getattr(b, table).items()), table
    assert list(a.unknown_categories.items()) == list(b.unknown_categories.items())  # shown in a warning, in order
    assert dict(a.skipped) == dict(b.skipped)
    assert (a.duration_events, a.invalid_utf8, a.wide_ids) == (b.duration_events, b.invalid_utf8, b.wide_ids)
    assert a.warnings() == b.warnings()


def assert_scanner_agrees(compiled, piece: bytes) -> bool:
    """The property (see the module); whether the scanner read the piece."""
    mine, my_events = _scanned_builder(compiled, piece)
    theirs, their_events = _msgspec_builder(piece)
    if theirs is None:
        assert mine is None, "the scanner read a piece msgspec rejects"
        return False
    if mine is None:
        return False  # given up: msgspec reads it, as before
    assert my_events == their_events
    assert_same_builder(theirs, mine)
    return True


def _trace_files() -> list[Path]:
    files = sorted(REAL_TRACES.rglob("*.json*")) + sorted(CAPTURES.glob("*.json.gz")) + sorted(SAMPLES.rglob("*.gz"))
    return [f for f in files if not f.name.endswith(".truth.json")]


@pytest.mark.parametrize("piece_bytes", [60_000, 400_000])
def test_every_real_trace_reads_the_same_piece_by_piece(compiled, piece_bytes, monkeypatch):
    files = _trace_files()
    if len(files) < 30:
        missing("the real traces and captures are not in this checkout")
    monkeypatch.setattr(split_decode, "PIECE_BYTES", piece_bytes)
    read = given_up = 0
    for path in files:
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        first, _ = split_decode.array_start(data[: split_decode.HEAD_BYTES])
        for start, stop in split_decode.plan(data, first):
            if stop is None:
                continue  # the last piece holds the document's other keys: msgspec's
            mine, my_events = _scanned_builder(compiled, data, start, stop)
            theirs, their_events = _msgspec_builder(data[start:stop])
            assert theirs is not None, f"{path.name}: a piece msgspec cannot read"
            if mine is None:
                given_up += 1
                continue
            assert my_events == their_events, path.name
            assert_same_builder(theirs, mine)
            read += 1
    assert read > 200 and given_up == 0  # every piece of every real trace is the scanner's


# --- SYNTHETIC events ------------------------------------------------------------------------------------------

keys_in_any_order = st.permutations


@st.composite
def plain_event(draw) -> dict:
    """An event as Kineto writes them (the fuzz suite's kineto_event is mostly hostile values)."""
    category = draw(st.sampled_from(["kernel", "cuda_runtime", "cpu_op", "python_function", "gpu_memcpy", "Kernel"]))
    event = {
        "ph": "X",
        "cat": category,
        "name": draw(st.sampled_from(["aten::linear", "aten::mm", "void gemm<128>(float*)", "<built-in method>"])),
        "pid": draw(st.integers(-3, 70000)),
        "tid": draw(st.integers(-3, 2**40)),
        "ts": draw(
            st.one_of(st.floats(0, 1e16, allow_nan=False), st.integers(0, 2**62), st.decimals(0, 10**13, places=3))
        ),
        "dur": draw(st.one_of(st.floats(0, 1e6), st.integers(0, 10**6))),
    }
    args = {}
    for key in ("correlation", "External id", "external id", "device", "stream", "Python id", "Ev Idx"):
        if draw(st.booleans()):
            args[key] = draw(st.integers(-1, 2**40))
    if draw(st.booleans()):
        args["Input Dims"] = [[draw(st.integers(0, 4096)), 8], []]
    if args or draw(st.booleans()):
        event["args"] = args
    return event


@st.composite
def event_text(draw) -> bytes:
    """One event as some writer might spell it: any key order, spacing, escapes, number spellings."""
    event = dict(draw(st.one_of(plain_event(), plain_event(), kineto_event())))
    if draw(st.integers(0, 3)) == 0:
        event["name"] = draw(st.sampled_from(['a "quoted" name', "tab\there", "naïve ünïcode", "é" * 3, "\\path"]))
    if draw(st.integers(0, 4)) == 0:
        event["tid"] = draw(st.sampled_from(["25738", "-7", "stream 7", "stream 12345678901234567", "007", " 5"]))
    if event.get("ph") == "X" and draw(st.integers(0, 4)) == 0:
        args = dict(event.get("args") or {})
        args[draw(st.sampled_from(["grid", "block"]))] = draw(
            st.one_of(
                st.lists(st.integers(-2, 2**31 + 2), max_size=4),
                st.sampled_from([None, 3, 1.5, "x", [], [2**40, 2**40, 2**40]]),
            )
        )
        args["Python id"] = draw(st.integers(0, 10))
        event["args"] = args
    items = list(event.items())
    order = draw(st.permutations(range(len(items))))
    text = json.dumps(
        {items[i][0]: float(items[i][1]) if isinstance(items[i][1], Decimal) else items[i][1] for i in order},
        ensure_ascii=draw(st.booleans()),
        separators=draw(st.sampled_from([(",", ":"), (", ", ": "), (",\n  ", " :  ")])),
        allow_nan=True,
    )
    return text.encode("utf-8", "surrogatepass")


@st.composite
def piece_text(draw) -> bytes:
    events = draw(st.lists(event_text(), min_size=1, max_size=12))
    flows = [b'{"ph": "s", "id": 1, "ts": 5}', b'{"ph": "f", "id": 1, "ts": 6, "bp": "e"}', b'{"ph": "C", "args": {}}']
    for flow in draw(st.lists(st.sampled_from(flows), max_size=3)):
        events.insert(draw(st.integers(0, len(events))), flow)
    glue = draw(st.sampled_from([b",", b", ", b",\n", b" ,\n  "]))
    return draw(st.sampled_from([b"", b"\n  "])) + glue.join(events) + draw(st.sampled_from([b"", b" \n"]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(piece=piece_text())
def test_synthetic_pieces_read_the_same_or_are_given_up(compiled, piece):
    assert_scanner_agrees(compiled, piece)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_pieces_are_never_read_differently(compiled, data):
    """Flipped bytes, invalid UTF-8, cuts: read to the same values, or given up (msgspec then says what it says)."""
    piece = data.draw(piece_text())
    assert_scanner_agrees(compiled, data.draw(mutated(piece, always=True)))


GIVEN_UP = [
    b'{"ph": "X", "name": "a", "ts": 1, "dur": 1},',  # a trailing comma
    b'{"ph": "X", "n\\u0061me": "a", "ts": 1, "dur": 1}',  # a key spelled with an escape
    b'{"ph": "X", "name": "a", "name": "b", "ts": 1, "dur": 1}',  # a key twice: msgspec keeps the last
    b'{"ph": "X", "pid": "Spans", "ts": 1, "dur": 1}',  # a named lane: the builder's _id_of numbers it
    b'{"ph": "X", "pid": 5.0, "ts": 1, "dur": 1}',  # a float where msgspec wants an int
    b'{"ph": "X", "ts": 1e400, "dur": 1}',  # beyond a double: msgspec refuses it
    b'{"ph": "X", "ts": 1, "dur": 1, "args": {"correlation": null}}',
    b'{"ph": "X", "ts": 1, "dur": 1, "args": {"grid": [1, true]}}',
    b'{"ph": "X", "ts": 1, "dur": 1, "x": "\\ud800"}',  # an escaped lone surrogate
    b'{"ph": "X", "ts": 1, "dur": 1, "x": "\x01"}',  # a control character in a string
    b'{"ph": "X", "name": "\xff", "ts": 1, "dur": 1}',  # invalid UTF-8: the one-process reader repairs it
    b'{"ph": "Q", "ts": 1}',  # not a Chrome phase
    b'{"ts": 1}',  # no phase
    b'{"ph": "X", "ts": 1, "dur": 1, "x": ' + b"[" * 80 + b"]" * 80 + b"}",  # deeper than the scanner goes
    b'{"ph": "X", "ts": 01, "dur": 1}',  # not JSON
    b'{"ph": "X", "pid": 1234567890123456789, "ts": 1, "dur": 1}',  # beyond 18 digits
]


@pytest.mark.parametrize("piece", GIVEN_UP)
def test_what_the_scanner_does_not_read_is_given_up(compiled, piece):
    mine, _ = _scanned_builder(compiled, piece)
    assert mine is None
    assert_scanner_agrees(compiled, piece)


READ = [
    b'{"ph": "X", "cat": "cpu_op", "name": "a \\"q\\" \\u00e9", "pid": 1, "tid": "25738", "ts": 1.5, "dur": 2}',
    b'{"ph":"X","tid":"stream 7","ts":-0.0,"dur":0,"args":{"grid":[2,3,4],"block":[64],"device":0,"stream":7}}',
    b'{"ph": "X", "ts": 1682725898236567.125, "dur": 1e2}',  # beyond Clinger's fast path: Python's float()
    b'{"ph": "M", "name": "thread_name", "pid": "Spans", "tid": 1, "args": {"name": "lane"}}, {"ph": "i", "ts": 1}',
    b'{"dur": 3, "ts": 2, "ph": "X", "args": {"Input Dims": [[1, 2]], "x": {"y": [null, true, false, "z"]}}}',
]


@pytest.mark.parametrize("piece", READ)
def test_what_the_scanner_reads(compiled, piece):
    assert assert_scanner_agrees(compiled, piece)


def test_arrays_that_fill_up_are_grown_and_the_scan_goes_on(compiled, monkeypatch):
    """Tiny first arrays: every ROOM_* status is met many times; the result is the one made with room to spare."""
    events = [
        {"ph": "X", "cat": f"c{i % 40}", "name": f"name {i}", "pid": 1, "tid": 2, "ts": 1e15 + i + 0.125, "dur": 1}
        for i in range(3000)
    ] + [{"ph": "M", "name": "process_name", "pid": i, "args": {"name": "p"}} for i in range(50)]
    piece = b", ".join(json.dumps(e).encode() for e in events)
    roomy, _ = _scanned_builder(compiled, piece)
    monkeypatch.setattr(scanned_piece, "_ROWS_PER_BYTE", 0)
    tight = scanned_piece._Buffers.__init__

    def small(self, size):
        tight(self, size)
        self.name_slots, self.names = scanned_piece._table(1)
        self.cat_slots, self.cats = scanned_piece._table(1)
        self.others = np.empty((1, 2), dtype=np.int64)
        self.inexact = np.empty((1, 4), dtype=np.int64)

    monkeypatch.setattr(scanned_piece._Buffers, "__init__", small)
    grown, _ = _scanned_builder(compiled, piece)
    assert roomy is not None and grown is not None
    assert_same_builder(roomy, grown)
    theirs, _ = _msgspec_builder(piece)
    assert_same_builder(theirs, grown)


def test_the_scan_starts_and_ends_where_it_is_told(compiled):
    """A piece in the middle of a buffer (split_decode's in-memory reads): only its bytes are read."""
    inner = b'{"ph": "X", "name": "in", "ts": 1, "dur": 1}'
    data = b'[{"ph": "X", "name": "before", "ts": 0, "dur": 1},' + inner + b',{"ph": "X", "name": "after"}]'
    lo = data.index(inner)
    mine, events = _scanned_builder(compiled, data, lo, lo + len(inner), data=data)
    assert events == 1 and list(mine.names) == ["in"]


def test_layout_agrees_with_the_schema():
    """The phases the scanner counts are the ones the msgspec schema counts, under the same labels; every field of
    the table has its place in the scanner's rows and in msgspec's structs, and nothing else has one."""
    from parsers.kineto import fields, scan

    counted = {chr(b) for b in np.flatnonzero(scan._COUNTED).tolist()}
    assert counted == set(fields.COUNTED_PHASES) == set(fields.SKIPPED_LABELS)
    assert set(fields.INT_ROWS) | set(fields.FLOAT_ROWS) == set(fields.FIELDS)
    assert len(fields.INT_DEFAULTS) == fields.INT_FIELDS
    keys = {f.key for f in fields.EVENT_FIELDS}
    encoded = {f.encode_name for f in msgspec.structs.fields(fields.Args)}
    encoded |= {f.encode_name for f in msgspec.structs.fields(fields.Complete)} - {"args"}
    assert encoded == keys


def test_no_index_leaves_the_arrays_under_bounds_checks(tmp_path):
    """The source compiled with Numba's bounds checks (a process of its own, its own Numba cache) over thousands of
    mutated real pieces, each ending exactly where its array ends: no read or write outside them (tests/scan_bounds)."""
    env = {**os.environ, "NUMBA_BOUNDSCHECK": "1", "NUMBA_CACHE_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", "from tests.scan_bounds import main; main()"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    ran, read = (int(word) for word in done.stdout.split()[1::2])
    assert ran > 5000 and read > 40
