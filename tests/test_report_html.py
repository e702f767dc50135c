"""The self-contained HTML report: contents, escaping of hostile trace text, the 1.5 MB bound, atomic writing.

Traces here are SYNTHETIC (built below) so the right numbers follow from how they are built: steps every
STEP_US microseconds, so ITL is exactly STEP_US; the browser check is tests/test_browser_report.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stepscope.analysis import analyze
from stepscope.analysis.number_format import format_value
from stepscope.analysis.report import contract
from stepscope.exporters.report_html import (
    MAX_COMPARISON_BYTES,
    MAX_REPORT_BYTES,
    ReportTooLargeError,
    ReportTrace,
    build_report,
    write_report,
)
from stepscope.parsers import load_trace
from tests.synthetic_traces import annotation, doc, kernel, write

HOSTILE = "</script><script>window.__pwned=1</script><img src=x onerror=alert(1)>"
STEP_US = 100.0
KERNEL_US = 10.0
ROOT = Path(__file__).resolve().parents[1]


def synthetic_steps(steps: int, kernels: int = 4, devices: int = 1, kernel_name: str = "gemm") -> dict:
    """SYNTHETIC: one prefill then decode steps, each a Stepscope marker STEP_US long holding `kernels`
    kernels of KERNEL_US on each device, 5 us apart (so every gap between kernels is 5 us)."""
    events = []
    corr = 1
    for index in range(steps):
        start = 1000.0 + index * STEP_US
        kind = "prefill" if index == 0 else "decode"
        tokens = 8 if index == 0 else 1
        events.append(
            annotation(f"stepscope.{kind}[request=0,index={index},tokens={tokens},batch=1]", start, STEP_US - 1)
        )
        for device in range(devices):
            for k in range(kernels):
                name = kernel_name if k == 1 else f"gemm_{k}"
                events.append(kernel(name, start + 2 + k * (KERNEL_US + 5), KERNEL_US, corr, device=device))
                corr += 1
    return doc(events)


def _report_trace(tmp_path: Path, name: str, document: dict) -> ReportTrace:
    path = write(tmp_path / f"{len(list(tmp_path.iterdir()))}.json", document)
    timeline = load_trace(path)
    analysis = analyze(timeline)
    return ReportTrace(name, timeline, analysis, contract(timeline, analysis))


def test_report_holds_cards_charts_gaps_and_findings(tmp_path):
    trace = _report_trace(tmp_path, "synthetic run", synthetic_steps(12))
    assert trace.analysis.summary.decode_steps == 11  # the builder's count, as the analysis sees it
    html = build_report(trace)
    assert html.startswith("<!DOCTYPE html>")
    cards = dict(re.findall(r'<div class="label">([^<]*)</div><div class="value">([^<]*)</div>', html))
    assert cards["ITL p50"] == "100 us"  # every decode step starts STEP_US after the last
    assert cards["Kernels / decode step"] == "4"
    assert cards["GPU idle / decode step"] == "60.0 us"  # STEP_US minus 4 kernels of KERNEL_US
    assert cards["Decode steps"] == "11"
    assert "Decode is host-bound" in html  # the analysis' finding, shown
    assert "Timeline" in html and "Per step" in html and "Idle gaps by cause" in html and "Findings" in html
    # figures: overview, three per-step charts, the per-step categories, gap histogram, each a Plotly div drawn by
    # an inline script
    assert len(re.findall(r'class="plotly-graph-div"', html)) == 6
    assert html.count("Plotly.newPlot(") == 6
    # no external resource anywhere: no src/href to a URL, and a CSP that forbids fetching
    assert not re.search(r"""<(script|link|img|iframe)[^>]+(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "default-src 'none'" in html and "connect-src 'none'" in html


def test_hostile_names_are_escaped(tmp_path):
    trace = _report_trace(tmp_path, HOSTILE, synthetic_steps(8, kernel_name=HOSTILE))
    other = _report_trace(tmp_path, HOSTILE + " B", synthetic_steps(10, kernel_name=HOSTILE))
    for html in (build_report(trace), build_report(trace, other)):
        assert HOSTILE not in html
        assert "<img src=x" not in html and "window.__pwned=1</script>" not in html
        assert "&lt;/script&gt;&lt;script&gt;window.__pwned=1" in html  # shown as text in the heading/table


def test_report_of_a_big_trace_stays_under_the_limit(tmp_path):
    steps = 6_000  # more steps, gaps and busy intervals than any budget draws
    trace = _report_trace(tmp_path, "big", synthetic_steps(steps, kernels=4, devices=3))
    assert len(trace.analysis.steps) == steps
    html = build_report(trace)
    size = len(html.encode())
    assert size <= MAX_REPORT_BYTES
    assert f"of {steps:,} steps drawn" in html  # the report says it thinned the steps
    both = build_report(trace, trace)
    assert len(both.encode()) <= MAX_COMPARISON_BYTES
    assert "too many for the per-step overlays" in both  # 5,999 decode steps: overlays left out, said so


def test_smaller_limit_shrinks_the_figures_or_fails_clearly(tmp_path):
    trace = _report_trace(tmp_path, "big", synthetic_steps(3_000, kernels=4, devices=2))
    full = len(build_report(trace).encode())
    smaller = build_report(trace, max_bytes=full - 200_000)
    assert len(smaller.encode()) <= full - 200_000
    with pytest.raises(ReportTooLargeError):
        build_report(trace, max_bytes=500_000)  # plotly.js alone, packed, is larger


def test_comparison_report_has_the_table_and_sentence(tmp_path):
    a = _report_trace(tmp_path, "eager", synthetic_steps(10))
    b = _report_trace(tmp_path, "compile", synthetic_steps(10, kernels=2))
    html = build_report(a, b)
    assert "Stepscope comparison" in html and "torch.compile" in html  # the sentence names the switch
    assert html.count("Plotly.newPlot(") == 2 + 2 * 6  # ITL and per-step overlays, then each trace's six
    kernels_row = re.search(
        r"<td>kernels per decode step</td><td class='num'>([^<]*)</td><td class='num'>([^<]*)"
        r"</td><td class='num'>([^<]*)</td>",
        html,
    )
    assert kernels_row is not None
    assert kernels_row.groups() == ("4", "2", "-2")  # the builder's kernels per step, A then B


def test_write_is_atomic(tmp_path):
    target = tmp_path / "report.html"
    written = write_report("<p>first</p>", target)
    assert written == len(b"<p>first</p>") and target.read_text() == "<p>first</p>"
    write_report("<p>second</p>", target)
    assert target.read_text() == "<p>second</p>"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]  # no temp file left behind
    with pytest.raises(OSError):
        write_report("x", tmp_path / "missing" / "report.html")


def test_sample_report_is_built_quickly():
    sample = ROOT / "sample_traces" / "cpu_tiny-llama_eager" / "trace.json.gz"
    if not sample.exists():
        pytest.skip("sample traces are not here")
    timeline = load_trace(sample)
    analysis = analyze(timeline)
    html = build_report(ReportTrace("eager", timeline, analysis, contract(timeline, analysis)))
    assert 530_000 < len(html.encode()) <= MAX_REPORT_BYTES  # plotly.js (0.53 MB packed) plus the figures
    assert "Host ops / decode step" in html and "Host busy" in html  # a CPU trace's cards: what stands in
    assert "Launches / decode step" not in html  # a CPU trace launches nothing


def test_report_has_the_memory_section_of_a_memory_capture(tmp_path):
    """A real capture with profile_memory (tests/data/captures): the memory lane, the figures and the per-step
    memory chart; a trace without memory events gets no memory section."""
    capture = ROOT / "tests" / "data" / "captures" / "memory_fp32_b1_dynamic.json.gz"
    timeline = load_trace(capture)
    analysis = analyze(timeline)
    html = build_report(ReportTrace("memory capture", timeline, analysis, contract(timeline, analysis)))
    assert "<h2>Memory (cpu)</h2>" in html and 'id="a_memory_lane"' in html and 'id="a_step_memory"' in html
    assert 'KV growth per decode step</td><td class="num">1.02 KiB' in html  # 1040 B, to 3 digits
    plain = _report_trace(tmp_path, "no memory", synthetic_steps(4))
    assert "<h2>Memory" not in build_report(plain)


def test_report_has_the_apps_anatomy_roofline_and_batch_sections():
    """The categories, layers, per-category roofline and batch composition the Analyze page shows, in its numbers
    (the shared tables of exporters/anatomy_tables.py) and its template."""
    from stepscope.exporters.anatomy_tables import category_table

    sample = ROOT / "sample_traces" / "cpu_tiny-llama_eager" / "trace.json.gz"
    timeline = load_trace(sample)
    analysis = analyze(timeline)
    html = build_report(ReportTrace("eager", timeline, analysis, contract(timeline, analysis)))
    for title in ("Batch composition", "Inside a step: categories and layers", "Roofline"):
        assert f"<h2>{title}" in html, title
    assert "4 layers</b>" in html  # tiny-llama: 4 decoder layers
    gemm = category_table(analysis).set_index("category").loc["gemm"]
    assert f'<td class="num">{format_value(gemm["time_us"], "us")}</td>' in html
    assert '"plot_bgcolor":"white"' in html and '"plot_bgcolor":"#E5ECF6"' not in html  # white, not Plotly's grey
    assert "None" not in re.sub(r"<script.*?</script>", "", html, flags=re.S)


def test_the_report_paints_before_plotly_js_is_compiled(tmp_path):
    """plotly.js (packed) sits after the last figure, not in the head: the page's text and tables paint at once;
    each figure's script only queues its drawing until then, and the queue is drawn once plotly.js is unpacked."""
    html = build_report(_report_trace(tmp_path, "synthetic run", synthetic_steps(12)))
    head = html[: html.index("</head>")]
    assert len(head) < 50_000 and "window.Plotly={newPlot:" in head  # the queue, not the library
    library = html.index("<script id='stepscope-plotly'")
    last_figure = html.rindex('class="plotly-graph-div"')
    drain = html.index("stepscopePending||[]).forEach")
    assert html.index("</head>") < last_figure < library < drain
    assert html.index("Findings") < drain  # the findings' text comes before any heavy script


# Issue 45: a report that leads with the verdict, on every real trace (tests/data/real, PROVENANCE.md: TraceLens,
# HTA, Kineto, PARAM; MIT / BSD-3-Clause)
REAL = sorted(p.name for p in (ROOT / "tests" / "data" / "real").glob("*.json*"))


def real_report(name: str) -> tuple[str, dict]:
    """The report of one real trace as the CLI's `report` makes it, and its JSON contract."""
    from stepscope.analysis.front_door import open_trace
    from stepscope.exporters.report_html import report_trace

    opened = open_trace(ROOT / "tests" / "data" / "real" / name)
    return build_report(report_trace(opened)), opened.report


@pytest.mark.parametrize("name", REAL)
def test_real_trace_report_leads_with_the_verdict_in_human_words(name):
    from stepscope.exporters.plotly_bundle import BASIC_TRACE_TYPES, packed, trace_types

    html, report = real_report(name)
    assert len(html.encode()) < 1_500_000  # the target, whatever the trace
    assert packed(True) in html and trace_types(html) <= BASIC_TRACE_TYPES  # the basic bundle draws every figure
    order = [html.index('<div class="cards">'), html.index('<h2 id="findings">'), html.index("<h2>Timeline</h2>")]
    rest = [m.start() for m in re.finditer(r"<h2>", html) if m.start() > order[-1]]
    assert order == sorted(order) and all(h > order[-1] for h in rest)  # cards, findings, timeline, then the rest
    headers = re.findall(r"<th>([^<]*)</th>", html)
    assert headers and not [h for h in headers if "_" in h]  # no snake_case header
    # every finding in the JSON's order: one to act on as a details block, one that only describes the run (info,
    # nothing to save) as a "Context:" line, as the app shows it
    titles = re.findall(r'<summary><span class="sev">[^<]*</span> <b>([^<]*)</b>|Context: <b>([^<]*)</b>', html)
    assert [a or b for a, b in titles] == [esc_text(f["title"]) for f in report["findings"]]


def esc_text(text: str) -> str:
    from stepscope.exporters.safe_text import for_html

    return for_html(text)


def test_mangled_kernel_names_are_short_with_the_full_name_on_hover():
    """vLLM gpt-oss on ROCm: hipBLASLt's 160-character Cijk_Alik_Bljk_... names."""
    html, _ = real_report("tracelens_vllm_gptoss_decode_fullgraph_rocm.json.gz")
    cells = re.findall(r'<td class="trunc" title="([^"]*)">([^<]*)</td>', html)
    mangled = [(full, shown) for full, shown in cells if full.startswith("Cijk_")]
    assert mangled
    for full, shown in mangled:
        assert len(shown) <= 80 < len(full) and not shown.startswith("Cijk_Alik_Bljk_BBS_BH_Bias")


def test_report_shows_the_model_proposed_from_the_trace_as_a_proposal():
    html, report = real_report("tracelens_vllm_gptoss_prefill_eager_b200.json.gz")
    proposal = report["summary"]["model_proposal"]
    assert "Proposed model</b> (from the trace, not used in any figure)" in html
    assert esc_text(proposal["text"]) in html


def test_the_vendored_basic_bundle_is_plotly_pys_version_and_others_get_the_full_one():
    """exporters/vendor's plotly.js basic bundle must be the plotly.js plotly.py writes figures for (an upgrade of
    plotly.py must bring its basic bundle); a figure of another trace type gets the full bundle, never a blank."""
    from stepscope.exporters.plotly_bundle import basic_usable, bundle_scripts, packed, types_comment

    assert basic_usable()
    assert packed(True) in bundle_scripts(types_comment({"scatter", "bar"}), "")
    assert packed(False) in bundle_scripts(types_comment({"heatmap"}), "")
