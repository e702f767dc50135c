"""Issue 26, class 7: a device or kernel name with bidirectional controls cannot reorder a report's own words.

SYNTHETIC traces built here name their device, a kernel, an annotation and a step-regex with each control
(U+202A-U+202E, U+2066-U+2069), most often ending in U+202E (right-to-left override), which drew "confidence 0.50"
as "(05.0 ecnedifnoc)". Checked: the HTML report (no raw control after </head> outside <bdi>, the figures' JSON and
scripts included), the command line's text and Markdown, and every element the app's Analyze page sends.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import streamlit as st

from stepscope.analysis import analyze
from stepscope.analysis.compare import compare
from stepscope.analysis.report import contract
from stepscope.exporters.compare_formats import comparison_markdown, comparison_text
from stepscope.exporters.report_html import ReportTrace, build_report
from stepscope.exporters.text_report import render_text
from stepscope.parsers import load_trace
from tests.app_pages import page_test
from tests.bounded_cli import assert_sane_outcome, run_bounded
from tests.synthetic_traces import write
from tests.test_report_html import synthetic_steps

CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
RAW = re.compile(f"[{CONTROLS}]")
RLO = "\u202e"


def _hostile_doc() -> dict:
    """SYNTHETIC: steps whose device, one kernel and the file's metadata carry the controls."""
    document = synthetic_steps(12, kernel_name=f"gemm_bf16{RLO}")
    document["deviceProperties"][0]["name"] = f"Synthetic GPU{RLO}"
    for i, event in enumerate(document["traceEvents"][:9]):
        if event.get("cat") == "kernel":
            event["name"] = f"kernel_{CONTROLS[i % len(CONTROLS)]}{i}"
    return document


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    return write(tmp_path / "synthetic_bidi.json", _hostile_doc())


def _outside_bdi(text: str) -> str:
    return re.sub(r"<bdi>.*?</bdi>", "", text, flags=re.DOTALL)


def _report(path: Path, name: str) -> ReportTrace:
    timeline = load_trace(path)
    analysis = analyze(timeline)
    return ReportTrace(name, timeline, analysis, contract(timeline, analysis))


def test_the_html_report_has_no_raw_control_after_its_head(hostile):
    trace = _report(hostile, f"run{RLO}")
    assert RLO in trace.timeline.device_name  # the trace really carries it
    for document in (build_report(trace), build_report(trace, _report(hostile, f"other{RLO}"))):
        body = document.partition("</head>")[2]
        assert body and not RAW.search(_outside_bdi(body))
        assert "confidence 1.00" in body  # the report's own words, in order
        for script in re.findall(r"<script[^>]*>(.*?)</script>", body, flags=re.DOTALL):
            assert not RAW.search(script)


def test_the_guard_escapes_what_nothing_else_did():
    from stepscope.exporters.report_html import without_raw_bidi

    document = f"<head><title>t{RLO}</title></head><body>x{RLO}<script>var a = '{RLO}';</script></body>"
    guarded = without_raw_bidi(document)
    body = guarded.partition("</head>")[2]
    assert not RAW.search(body) and "\\u202e" in body and guarded.startswith(f"<head><title>t{RLO}")


def test_escaping_functions_write_controls_as_text():
    from stepscope.exporters.safe_text import for_markdown, for_plotly, plain

    for control in CONTROLS:
        for fn in (plain, for_markdown, for_plotly):
            out = fn(f"name{control} confidence 0.50")
            assert not RAW.search(out) and "confidence 0" in out
    assert plain(f"a{RLO}b") == "a\\u202eb"


def test_command_line_text_outputs_carry_no_raw_control(hostile, tmp_path):
    for args in (("analyze", hostile), ("analyze", hostile, "--step-regex", f"^gemm{RLO}")):
        outcome = run_bounded(*args, cache_dir=tmp_path / "c")
        assert_sane_outcome(outcome)
        assert outcome.status == 0 and not RAW.search(outcome.stdout) and not RAW.search(outcome.stderr)
        assert "Synthetic GPU\\u202e" in outcome.stdout and "confidence 1.00" in outcome.stdout
    cached = run_bounded("analyze", hostile, cache_dir=tmp_path / "c")  # the cached answer's text, too
    assert cached.status == 0 and not RAW.search(cached.stdout)
    for fmt in ("text", "markdown"):
        outcome = run_bounded("compare", hostile, hostile, "--format", fmt, cache_dir=tmp_path / "c")
        assert_sane_outcome(outcome)
        assert outcome.status == 0 and not RAW.search(outcome.stdout)


def test_text_renderers_neutralise_whatever_the_report_holds(hostile):
    trace = _report(hostile, f"run{RLO}")
    assert not RAW.search(render_text(trace.report))
    comparison = compare(trace.analysis, trace.analysis, f"a{RLO}", f"b{RLO}")
    assert not RAW.search(comparison_text(comparison)) and not RAW.search(comparison_markdown(comparison))


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def test_the_analyze_page_sends_no_raw_control(hostile, tmp_path, monkeypatch):
    """AppTest: the page opened on the hostile trace from --logdir; every element it sends is checked, the
    charts' JSON after parsing (a JSON escape of U+202E would still reach the browser as the control)."""
    logs = hostile.parent
    (logs / f"named{RLO}.json").write_bytes(hostile.read_bytes())  # a file name with the control, too
    monkeypatch.setenv("STEPSCOPE_LOGDIR", str(logs))
    monkeypatch.setenv("STEPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    st.cache_data.clear()
    at = page_test("analyze", 120).run()
    pick = at.selectbox(key="logdir_pick")
    pick.select(next(o for o in pick.options if "named" in o)).run()
    at.button(key="logdir_open").click().run()
    assert not at.exception
    assert any("Synthetic GPU" in c.value for c in at.caption)
    for chart in at.get("plotly_chart"):
        assert not any(RAW.search(s) for s in _strings(json.loads(chart.proto.spec)))
    for kind in ("markdown", "caption", "error", "warning", "info", "metric", "subheader", "selectbox", "dataframe"):
        for element in at.get(kind):
            raw = element.proto.SerializeToString().decode("utf-8", "replace")
            assert not RAW.search(raw), (kind, raw[:300])
