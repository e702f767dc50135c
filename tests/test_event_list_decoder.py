"""The event decoder's fast path (categories from a fixed list) gives the very structs of the open one, and falls
back to the open one, for good, at the first list it rejects; python spans' link ids are not read. SYNTHETIC event
lists and traces, built here."""

from __future__ import annotations

import json

import msgspec
import pytest

from parsers.chrome_trace import read_chrome_trace
from parsers.kineto_schema import _OPEN_DECODER, CATEGORY_KINDS, EventListDecoder, _Complete
from tests.synthetic_traces import cpu_op, kernel, launch


def _events(categories: list[str]) -> bytes:
    return json.dumps(
        [
            {"ph": "X", "cat": c, "name": f"op{i}", "pid": 1, "tid": 2, "ts": i, "dur": 1}
            for i, c in enumerate(categories)
        ]
    ).encode()


def test_known_categories_decode_to_the_open_decoders_structs():
    text = _events(list(CATEGORY_KINDS))
    decoder = EventListDecoder()
    fast = decoder.decode(text)
    assert decoder.fixed_categories  # every category known: the fast path was taken
    assert [msgspec.structs.asdict(e) for e in fast] == [msgspec.structs.asdict(e) for e in _OPEN_DECODER.decode(text)]
    assert all(isinstance(e, _Complete) for e in fast)


def test_an_unknown_category_switches_the_decoder_to_the_open_one_for_good():
    decoder = EventListDecoder()
    mixed = decoder.decode(_events(["kernel", "my_engine_span"]))
    assert [e.cat for e in mixed] == ["kernel", "my_engine_span"]
    assert not decoder.fixed_categories
    assert [e.cat for e in decoder.decode(_events(["cpu_op"]))] == ["cpu_op"]  # still right, the open decoder


def test_a_bad_event_is_still_reported_by_the_open_decoder():
    with pytest.raises(msgspec.ValidationError, match=r"\$\[1\]\.ts"):
        EventListDecoder().decode(b'[{"ph": "X", "cat": "kernel"}, {"ph": "X", "cat": "kernel", "ts": "soon"}]')


def test_a_trace_with_unknown_categories_reads_them_as_other():
    events = [cpu_op("aten::mm", 0, 10), launch(2, 3, corr=7), kernel("gemm", 20, 5, corr=7)]
    events += [{"ph": "X", "cat": "my_engine_span", "name": "batch", "pid": 1, "tid": 1, "ts": 0, "dur": 30}]
    timeline = read_chrome_trace(json.dumps({"traceEvents": events}).encode())
    assert timeline.meta.unknown_categories == {"my_engine_span": 1}
    assert (timeline.events["kind"] == "other").sum() == 1
    assert (timeline.events["kind"] == "kernel").sum() == 1


def test_python_spans_ids_are_not_read_and_every_other_rows_are():
    """with_stack's python_function spans link by Python ids; their correlation and External id are not read (-1),
    which spares two passes over most events of such a trace. Every other row keeps its own."""
    python = {"ph": "X", "cat": "python_function", "name": "model.py(10): forward", "pid": 1, "tid": 100}
    python |= {"ts": 0, "dur": 40, "args": {"Python id": 3, "External id": 99, "correlation": 98}}
    events = [python, cpu_op("aten::mm", 1, 10), launch(2, 3, corr=7), kernel("gemm", 20, 5, corr=7)]
    ev = read_chrome_trace(json.dumps({"traceEvents": events}).encode()).events.set_index("name")
    assert (ev.loc["model.py(10): forward", "correlation"], ev.loc["model.py(10): forward", "external_id"]) == (-1, -1)
    assert ev.loc["aten::mm", "external_id"] == 1
    assert (ev.loc["cudaLaunchKernel", "correlation"], ev.loc["gemm", "correlation"]) == (7, 7)
