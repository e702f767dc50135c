"""Issue 42 on the Analyze page, run headless through streamlit.testing's AppTest: Find, the Selection panel and the
A/B diff show the API's numbers (`stepscope.load(path).find(...)` / `.window(...)`), and a kernel named like an XSS
probe (the SYNTHETIC trace of tests/app_samples.py) is shown as text. A drag on the detail is a Plotly event the
AppTest cannot make: its callback (app/selection_panel.on_box) is called with the state Streamlit gives it."""

from __future__ import annotations

from pathlib import Path

import pytest

import stepscope
from stepscope.analysis.event_find import count_line
from stepscope.analysis.number_format import format_count, format_value
from stepscope.analysis.selection import Selection
from stepscope.app.navigation import ANALYZE_KEY
from stepscope.app.selection_panel import on_box
from stepscope.app.workbench import Bench
from stepscope.exporters.safe_text import for_markdown
from tests.app_pages import page_test, too_precise
from tests.app_samples import XSS_KERNEL, sample_folder, write_synthetic_trace

TIMEOUT_S = 120


@pytest.fixture
def samples(tmp_path, monkeypatch) -> Path:
    folder = sample_folder(tmp_path, monkeypatch)
    write_synthetic_trace(folder, "synthetic")
    return folder


def _page(samples: Path, sample: str = "cpu_tiny-llama_eager"):
    at = page_test("analyze", TIMEOUT_S)
    at.session_state[ANALYZE_KEY] = f"sample:{sample}"
    at.run()
    assert not at.exception
    return at


def _find_box(at):
    return next(t for t in at.text_input if t.label == "Find in event names")


def _button(at, label: str):
    return next(b for b in at.button if b.label == label)


def _metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_find_counts_what_the_api_finds_and_select_all_sums_them(samples):
    at = _page(samples)
    _find_box(at).input("aten::mm").run()
    api = stepscope.load(samples / "cpu_tiny-llama_eager" / "trace.json.gz").find("aten::mm")
    assert any(count_line(api) in m.value for m in at.markdown)
    _button(at, "Select all matches").click().run()
    assert not at.exception
    metrics = _metrics(at)
    assert metrics["Matches"] == format_count(len(api))
    assert too_precise(at) == []
    _button(at, "Next").click().run()
    assert any("match 1" in m.value for m in at.markdown)
    _button(at, "Next").click().run()
    assert any("match 2" in m.value for m in at.markdown)
    step = int(api["step"].iloc[1])
    slider = next(s for s in at.slider if s.label == "Steps drawn at kernel level")
    assert tuple(slider.value) == (step, step)  # the detail drew the second match's step


def test_a_steps_selection_shows_the_steps_busy_and_kernels(samples):
    at = _page(samples)
    trace = stepscope.load(samples / "cpu_tiny-llama_eager" / "trace.json.gz")
    row = trace.report["steps"][5]
    next(n for n in at.number_input if n.label == "step").set_value(5).run()
    _button(at, "Select steps").click().run()
    assert not at.exception
    metrics = _metrics(at)
    assert metrics["Host busy"] == format_value(row["gpu_busy_us"], "us")  # a CPU trace: host ops stand in
    assert metrics["Idle"] == format_value(row["gpu_idle_us"], "us")
    assert metrics["Host ops"] == format_count(row["kernels"])
    assert any(for_markdown("step 5 (decode)") in m.value for m in at.markdown)
    assert "Anatomy of these steps" in [t.label for t in at.tabs]


def test_pin_a_then_b_gives_the_diff(samples):
    at = _page(samples)
    _button(at, "Select steps").click().run()  # step 0, the prefill
    _button(at, "Pin as A").click().run()
    assert any("this selection" in m.value for m in at.markdown)
    next(n for n in at.number_input if n.label == "step").set_value(3).run()
    _button(at, "Select steps").click().run()
    assert not at.exception
    headers = [m.value for m in at.markdown if m.value.startswith("#### B - A")]
    assert headers and "step 3" in headers[0] and "step 0" in headers[0]
    _button(at, "Clear A").click().run()
    assert not [m.value for m in at.markdown if m.value.startswith("#### B - A")]


def test_a_typed_range_is_the_windows_answer(samples):
    at = _page(samples)
    next(n for n in at.number_input if n.label == "start (ms)").set_value(100.0)
    next(n for n in at.number_input if n.label == "end (ms)").set_value(130.0)
    next(b for b in at.button if b.label == "Select range").click().run()
    assert not at.exception
    window = stepscope.load(samples / "cpu_tiny-llama_eager" / "trace.json.gz").window(100, 130)
    metrics = _metrics(at)
    assert metrics["Wall"] == format_value(window.attrs["wall_us"], "us")
    assert metrics["Host busy"] == format_value(window.attrs["busy_us"], "us")
    assert metrics["Host ops"] == format_count(int(window["count"].sum()))


def test_a_kernel_named_like_markup_is_text_everywhere(samples):
    at = _page(samples, "synthetic")
    _find_box(at).input("onerror").run()
    _button(at, "Select all matches").click().run()
    assert not at.exception
    label = next(m.value for m in at.markdown if "matches of" in m.value)
    assert "<img" not in label  # the query is escaped in the panel's label
    tables = [d.value for d in at.dataframe]
    assert any(XSS_KERNEL in set(t.get("kernel", [])) for t in tables)  # a table cell (a canvas), never markup
    assert not any("<img" in m.value and "\\<img" not in m.value for m in at.markdown)
    assert _metrics(at)["Matches"] == format_count(6 + 1)  # one a forward: 6 decodes and the prefill


def test_a_drag_on_the_detail_is_a_range_selection(samples):
    trace = stepscope.load(samples / "cpu_tiny-llama_eager" / "trace.json.gz")
    state: dict = {"detail_timeline": {"selection": {"box": [{"x": [130.5, 120.25], "y": [0, 1]}], "points": []}}}
    bench = Bench(trace.opened, trace._work, state)
    on_box(bench, "detail_timeline")
    origin = trace.analysis.time_origin_ns
    assert bench.selection == Selection.of_range(origin + 120_250_000, origin + 130_500_000, bench.selection.label)
    assert "(dragged)" in bench.selection.label
    state["detail_timeline"] = {"selection": {"box": [], "points": []}}  # a click that clears the box: kept as is
    on_box(bench, "detail_timeline")
    assert bench.selection.kind == "range"
