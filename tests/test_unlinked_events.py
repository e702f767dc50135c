"""What the Kineto reader keeps of events it does not link: python spans' ids are not read, and a category it does
not know is kept as 'other' and counted. SYNTHETIC traces, built here."""

from __future__ import annotations

import json

from stepscope.parsers.kineto.reader import read_chrome_trace
from tests.synthetic_traces import cpu_op, kernel, launch


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
