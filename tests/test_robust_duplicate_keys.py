"""Issue 26, class 6: a JSON object with `traceEvents` twice reads the same whatever the file's size.

The rule: the last one wins, as json.load (and the one-process reader) has it. The two-process decoder, which
big files take, used to read the first list (or a mix): it now leaves such a file to the one-process reader.
SYNTHETIC documents written here as text (a dict cannot hold a key twice).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stepscope.parsers import TraceError
from stepscope.parsers.kineto import pieces as split_decode
from stepscope.parsers.kineto.reader import read_chrome_trace, read_chrome_trace_file
from tests.bounded_cli import assert_sane_outcome, run_bounded
from tests.synthetic_traces import doc, synthetic_generation
from tests.test_split_decode import _assert_same, _events


def _twice(first: list[dict], second: list[dict], between: str = "") -> bytes:
    """SYNTHETIC: {"schemaVersion": 1, "traceEvents": FIRST, ...between..., "traceEvents": SECOND}."""
    head = '{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Synthetic GPU"}], '
    return (head + f'"traceEvents": {json.dumps(first)}, {between}"traceEvents": {json.dumps(second)}' + "}").encode()


def _names(timeline) -> set[str]:
    return set(timeline.events["name"].astype(str))


@pytest.fixture
def split_small(monkeypatch):
    monkeypatch.setattr(split_decode, "MIN_SPLIT_BYTES", 0)
    monkeypatch.setattr(split_decode, "PIECE_BYTES", 4096)
    monkeypatch.setenv("STEPSCOPE_PARSE_WORKERS", "2")


def _serial(data: bytes, monkeypatch):
    with monkeypatch.context() as m:
        m.setenv("STEPSCOPE_PARSE_WORKERS", "1")
        m.setattr(split_decode, "MIN_SPLIT_BYTES", 1 << 40)
        return read_chrome_trace([data])


FIRST = [dict(e, name=f"first {e['name']}") for e in _events(300)]
SECOND = [dict(e, name=f"second {e['name']}") for e in _events(200)]


@pytest.mark.parametrize(
    ("first", "second", "between"),
    [
        (FIRST, SECOND, ""),
        (FIRST, SECOND, '"traceName": "between", '),
        ([], SECOND, ""),
        (FIRST, [], ""),
        (FIRST, FIRST[:50], '"baseTimeNanoseconds": 5, '),
        (FIRST, SECOND[:4], ""),
    ],
    ids=["after", "keys between", "first empty", "second empty", "second shorter", "second within the last piece"],
)
def test_the_last_list_wins_in_both_readers(tmp_path, monkeypatch, split_small, first, second, between):
    data = _twice(first, second, between)
    assert json.loads(data)["traceEvents"] == second  # what json.load reads
    path = tmp_path / "twice.json"
    path.write_bytes(data)
    serial = _answer(_serial, data, monkeypatch)
    for split in (
        _answer(lambda d, _: read_chrome_trace([d]), data, None),
        _answer(lambda p, _: _from_file(p), path, None),
    ):
        if isinstance(serial, str):  # an empty last list: both say the same one line
            assert split == serial == "the trace has no events"
        else:
            _assert_same(split, serial)
    if second:  # the last list's events, none of the first's
        assert _names(serial) == {e["name"] for e in second if e["ph"] == "X"}


def _answer(read, source, monkeypatch):
    try:
        return read(source, monkeypatch)
    except TraceError as exc:
        return str(exc)


def _from_file(path: Path):
    try:
        return read_chrome_trace_file(path)
    except split_decode.SplitNotPossibleError:  # what parsers.load does: the one-process reader, same rule
        return read_chrome_trace([path.read_bytes()])


def test_a_nested_traceevents_key_still_reads_the_same(monkeypatch, split_small):
    events = [dict(e, args={**e.get("args", {}), "traceEvents": 1}) for e in _events(200)]
    data = json.dumps(doc(events)).encode()
    _assert_same(read_chrome_trace([data]), _serial(data, monkeypatch))


def test_the_command_line_answers_the_same_for_a_big_and_a_small_file(tmp_path):
    """Over the split size (16 MB) and under it, the answer is the last list's."""
    second = doc(synthetic_generation(decode_steps=5))["traceEvents"]
    padding = [
        {"ph": "X", "cat": "cpu_op", "name": f"padding op {i}", "pid": 1, "tid": 1, "ts": i, "dur": 1}
        for i in range(200_000)
    ]
    big, small = tmp_path / "big.json", tmp_path / "small.json"
    big.write_bytes(_twice(padding, second))
    small.write_bytes(_twice(padding[:100], second))
    assert big.stat().st_size > split_decode.MIN_SPLIT_BYTES > small.stat().st_size
    reference = tmp_path / "last_only.json"
    reference.write_text(json.dumps(doc(second)))
    answers = []
    for path in (big, small, reference):
        outcome = run_bounded("analyze", path, "--json", "--no-cache", cache_dir=tmp_path / "c", timeout=60)
        assert_sane_outcome(outcome)
        assert outcome.status == 0
        answers.append(json.loads(outcome.stdout))
    assert answers[0] == answers[1] == answers[2]
    assert answers[0]["events"] == len([e for e in second if e.get("ph") == "X"])
