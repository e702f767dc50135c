"""A trace with profiler output but no forward stays a success (no steps, method none) and says what it looks like
and what to change. The real launching-thread captures are in tests/test_captures.py; the traces here are
SYNTHETIC, built to the shape each case leaves."""

from __future__ import annotations

from stepscope.analysis import analyze
from stepscope.parsers import load_trace
from tests.synthetic_traces import cpu_op, write


def _python(name: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "python_function", "name": name, "pid": 100, "tid": 100, "ts": ts, "dur": dur}


def _warnings(tmp_path, events) -> tuple[str, list[str]]:
    result = analyze(load_trace(write(tmp_path / "synthetic.json", events)))
    assert result.steps.empty
    return result.segmentation.method, list(result.segmentation.warnings)


def test_a_front_end_process_is_named(tmp_path):
    """SYNTHETIC: an API server's process: request handling and tokenisation, no model op."""
    events = [
        _python("uvicorn/protocols/http/httptools_impl.py(401): run_asgi", 1000, 900),
        _python("vllm/entrypoints/openai/serving_chat.py(180): create_chat_completion", 1010, 800),
        cpu_op("aten::to", 1100, 5),
    ]
    method, warnings = _warnings(tmp_path, events)
    assert method == "none"
    assert any("front-end process" in w and "serving_chat" in w for w in warnings)


def test_a_profile_that_missed_the_generation_says_so(tmp_path):
    """SYNTHETIC: input preparation only (the profile ended before generate() ran)."""
    events = [cpu_op("aten::to", 1000 + 10 * i, 5) for i in range(20)] + [cpu_op("aten::cat", 1300, 8)]
    method, warnings = _warnings(tmp_path, events)
    assert method == "none"
    assert any("no model op" in w and "inside the `with profile(...)` block" in w for w in warnings)


def test_a_trace_with_model_ops_but_no_steps_adds_no_reason(tmp_path):
    """SYNTHETIC: one matmul, nothing repeating: not an empty-for-a-reason case."""
    method, warnings = _warnings(tmp_path, [cpu_op("aten::mm", 1000, 50), cpu_op("aten::add", 1060, 5)])
    assert method == "none"
    assert warnings == ["nothing in the trace looks like token generation"]
