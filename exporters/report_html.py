"""One self-contained HTML report of a trace (and optionally its comparison with another) to share with anyone.

It reads like the app's Analyze page: the verdict first (the summary cards and the findings, on the first screen),
the timeline, then the rest (exporters/report_sections.py). plotly.js is inside the file, packed
(exporters/plotly_bundle.py: plotly's basic bundle, gzipped), so the file opens offline and makes no network
request: a Content-Security-Policy in the file forbids any fetch, so a stray one would fail loudly rather than leak.
Every string that came from a trace is HTML-escaped (tables, headings) or Plotly text (figures).

Its size grows with what it shows, not with the trace: figures are the step-level overview (never every kernel),
per-step charts draw at most a budget of steps, tables a budget of rows; a single trace's report stays under
MAX_REPORT_BYTES (1.5 MB): when it would not, the budgets shrink and the report says what it left out.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio

from stepscope.analysis.compare import Comparison, batches_differ
from stepscope.analysis.model import Analysis
from stepscope.parsers.timeline import Timeline
from . import report_sections as sections
from .compare_formats import format_delta, format_ratio, format_value, op_diff_caption, op_diff_rows
from .figures import compare_charts
from .plotly_bundle import BASIC_TRACE_TYPES, bundle_scripts, types_comment
from .report_sections import Column, esc, short
from .safe_text import BIDI_CONTROLS

MAX_REPORT_BYTES = 1_500_000  # one trace's report (issue 45: plotly.js packed is 0.53 MB of it)
MAX_COMPARISON_BYTES = 3_000_000  # a comparison holds two traces' sections and its own figures
# (overview segments per lane, steps per chart, table rows, decode steps in comparison overlays), tried in order:
# a 1,200 px plot shows about one segment per pixel, and a lane of 1,000 segments writes ~0.2 MB of figure JSON
BUDGETS = ((1_000, 800, 60, 800), (400, 300, 30, 300), (150, 120, 15, 120), (60, 60, 10, 60))
PLOT_CONFIG = {"displaylogo": False, "responsive": True}
APP_TEMPLATE = "plotly_white"  # as the app draws them (Streamlit's theme is white-based), not Plotly's grey default
APP_FONT = {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "color": "#31333f"}
CSP = (
    "default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
    "img-src data: blob:; font-src data:; worker-src blob:; connect-src 'none'"
)
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;max-width:1200px;padding:16px;
color:#212529}
h1{font-size:1.5rem;margin-bottom:4px} h2{font-size:1.2rem;margin-top:28px;border-bottom:1px solid #dee2e6}
.meta{color:#6c757d;font-size:.9rem}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(200px,1fr));gap:8px;margin:12px 0}
.card{border:1px solid #dee2e6;border-radius:6px;padding:8px 12px}
.card .label{color:#6c757d;font-size:.8rem} .card .value{font-size:1.3rem;font-weight:600}
table{border-collapse:collapse;font-size:.85rem;margin:8px 0} th,td{border:1px solid #dee2e6;padding:3px 8px}
td.num{text-align:right;font-variant-numeric:tabular-nums} th{background:#f1f3f5}
.finding{border-left:4px solid #339af0;padding:3px 10px;margin:4px 0;background:#f8f9fa}
.finding.warn{border-color:#f59f00} .finding.critical{border-color:#e03131} .finding summary{cursor:pointer}
.finding p{margin:4px 0 2px} .sev{font-size:.75rem;text-transform:uppercase;color:#495057} .cost{color:#6c757d}
.more>summary{cursor:pointer;color:#1c7ed6;margin:4px 0} .proposal{background:#fff9db;padding:6px 12px}
.pairwarn{background:#fff4e6;border-left:4px solid #f59f00;padding:6px 12px}
.note{color:#6c757d;font-size:.85rem} .sentence{font-size:1.05rem;background:#ebfbee;padding:8px 12px}
.trunc{word-break:break-all}
"""


@dataclass(frozen=True)
class ReportTrace:
    """What the report reads of one trace: the front door's answer (analysis.front_door.Opened) has these fields."""

    name: str
    timeline: Timeline
    analysis: Analysis
    report: dict  # the contract the front door built


def report_trace(opened) -> ReportTrace:
    """The report's view of one opened trace (analysis.front_door.Opened)."""
    return ReportTrace(opened.name, opened.timeline, opened.analysis, opened.report)


class ReportTooLargeError(ValueError):
    """Even the smallest budgets gave a file over the limit (should not happen; a clear error if it does)."""


@lru_cache(maxsize=1)
def _template() -> go.layout.Template:
    """The app's template with the defaults of the trace types the report draws only: plotly_white's defaults for
    every type are 10 kB per figure (and would name types plotly_bundle then thinks are drawn)."""
    white = pio.templates[APP_TEMPLATE]
    return go.layout.Template(layout=white.layout, data={t: white.data[t] for t in BASIC_TRACE_TYPES})


def _figure_html(fig, div_id: str) -> str:
    """A figure as a div and its Plotly.newPlot script (plotly escapes '<' in the JSON: no </script> breakout),
    after a comment naming its trace types (plotly_bundle picks the bundle by them)."""
    fig.update_layout(template=_template(), font=APP_FONT)
    html = pio.to_html(
        fig, include_plotlyjs=False, full_html=False, config=PLOT_CONFIG, div_id=div_id, default_width="100%"
    )
    return types_comment({str(t.type) for t in fig.data}) + html


def _trace_sections(trace: ReportTrace, budgets: tuple[int, int, int, int], prefix: str) -> list[str]:
    """The app's order: cards, findings (the JSON's order), timeline, then the rest."""
    overview_budget, step_budget, row_budget, _ = budgets
    analysis = trace.analysis
    return [
        sections.cards(analysis.summary),
        *sections.findings(trace.report, row_budget),
        *sections.overview(analysis, overview_budget, prefix, _figure_html),
        *sections.requests(analysis, row_budget, prefix, _figure_html),
        *sections.how_steps_were_found(trace.report),
        *sections.per_step(analysis, step_budget, prefix, _figure_html),
        *sections.memory(analysis, trace.timeline, overview_budget, step_budget, prefix, _figure_html),
        *sections.batches(analysis),
        *sections.inside_a_step(analysis, prefix, _figure_html),
        *sections.roofline(analysis, trace.report),
        *sections.gaps(analysis, prefix, _figure_html),
        *sections.top_kernels(analysis, row_budget),
    ]


def _pair_banner(comparison: Comparison) -> list[str]:
    """What makes the pair not like for like (analysis.compare_warnings)."""
    if not comparison.warnings:
        return []
    items = "".join(f"<li>{esc(w)}</li>" for w in comparison.warnings)
    return [f'<div class="pairwarn"><b>Not like for like.</b><ul>{items}</ul></div>']


def _op_diff_table(comparison: Comparison) -> list[str]:
    """Kernels that appeared, disappeared or changed per step (analysis.op_diff), largest change first."""
    rows = op_diff_rows(comparison)
    if not rows:
        return []
    head = "".join(f"<th>{h}</th>" for h in ("op", "category", "status", "count / step", "time / step", "B − A"))
    body = "".join("<tr>" + "".join(f"<td>{esc(short(c))}</td>" for c in row) + "</tr>" for row in rows)
    return [
        f"<h3>{esc(op_diff_caption(comparison))}</h3>",
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>",
    ]


def _comparison_sections(
    a: ReportTrace, b: ReportTrace, comparison: Comparison, budgets: tuple[int, int, int, int]
) -> list[str]:
    decode_budget = budgets[3]
    rows = "".join(
        f"<tr><td>{esc(r.label)}</td><td class='num'>{esc(format_value(r.a, r.unit))}</td>"
        f"<td class='num'>{esc(format_value(r.b, r.unit))}</td><td class='num'>{esc(format_delta(r.delta, r.unit))}"
        f"</td><td class='num'>{esc(format_ratio(r.ratio, r.a, r.b))}</td></tr>"
        for r in comparison.metrics.itertuples(index=False)
    )
    parts = [
        "<h2>Comparison</h2>",
        f"<p>A (baseline): <b>{esc(short(comparison.label_a))}</b> · B: <b>{esc(short(comparison.label_b))}</b></p>",
        *_pair_banner(comparison),
        f'<p class="sentence">{esc(comparison.sentence)}</p>',
        "<table><thead><tr><th>metric</th><th>A</th><th>B</th><th>B − A</th><th>B / A</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>",
        *_composition_rows(comparison),
        *_op_diff_table(comparison),
    ]
    decode = [int((t.analysis.steps["kind"] == "decode").sum()) if len(t.analysis.steps) else 0 for t in (a, b)]
    if max(decode) > decode_budget:
        parts.append(
            f'<p class="note">{max(decode):,} decode steps: too many for the per-step overlays in a '
            "shareable file; open the traces in the app to see them.</p>"
        )
    else:
        # Plotly renders a little HTML in legends and titles: the charts escape the names (safe_text.for_plotly)
        a_fig, b_fig = (replace(t, name=short(t.name, 60)) for t in (a, b))
        parts.append(_figure_html(compare_charts.itl_overlay(a_fig, b_fig), "cmp_itl"))
        parts.append(_figure_html(compare_charts.per_step_overlay(a_fig, b_fig), "cmp_steps"))
    return parts


def _composition_rows(comparison: Comparison) -> list[str]:
    """The batches of A and B (sequences per decode step, steps by kind, requests), when either trace tells."""
    rows = comparison.composition
    if rows.empty or not batches_differ(rows):
        return []
    columns = [Column("label", "Batches"), Column("a", "A", ""), Column("b", "B", ""), Column("delta", "B − A", "")]
    return ["<h3>Batches</h3>", sections.table(rows, columns)]


# The figures' scripts run where they stand, before plotly.js (unpacked and compiled at the end of the page, after
# the load event) is there: until then Plotly.newPlot only queues its arguments, so the page's text and tables paint
# at once and the figures follow, instead of a blank page until plotly.js is compiled.
_PLOTLY_QUEUE = (
    "window.Plotly={newPlot:function(){(window.stepscopePending=window.stepscopePending||[]).push(arguments)}};"
)
_PLOTLY_DRAIN = "(window.stepscopePending||[]).forEach(function(a){Plotly.newPlot.apply(Plotly,a)});"
PLOTLY_MARK = "<!-- stepscope: plotly.js -->"  # where plotly.js goes, after the bidi guard (trace text has no '<')


def _document(title: str, body: Sequence[str]) -> str:
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{esc(short(title, 120))}</title><style>{CSS}</style>"
        f"<script type='text/javascript'>{_PLOTLY_QUEUE}</script></head><body>"
        + "\n".join(body)
        + '\n<p class="note">Made by Stepscope. Self-contained: opens offline, loads nothing from the network.</p>'
        + PLOTLY_MARK
        + "</body></html>\n"
    )


def _with_plotly(document: str) -> str:
    """The document with plotly.js (packed) and the queued figures' drawing at its end (see _PLOTLY_QUEUE)."""
    return document.replace(PLOTLY_MARK, bundle_scripts(document, _PLOTLY_DRAIN), 1)


def without_raw_bidi(document: str) -> str:
    """The document with no raw bidirectional control after </head>, the figures' JSON and scripts included.

    Every text from a trace is already escaped (esc, safe_text.for_plotly write a control as the text \\u202e);
    this is the guard for anything that was not: in a script or JSON a control becomes the escape \\u202e (the
    same string once parsed), in the page's text the visible \\u202e. A name ending in U+202E can then never
    draw "confidence 0.50" backwards."""
    head, sep, body = document.partition("</head>")
    if not sep:
        head, body = "", document
    return head + sep + BIDI_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", body)


def build_report(
    trace: ReportTrace,
    other: ReportTrace | None = None,
    comparison: Comparison | None = None,
    max_bytes: int | None = None,
) -> str:
    """The report as one HTML string, at most max_bytes of UTF-8 (MAX_REPORT_BYTES for one trace,
    MAX_COMPARISON_BYTES for a comparison). `other`: B of a comparison (trace is A)."""
    if max_bytes is None:
        max_bytes = MAX_REPORT_BYTES if other is None else MAX_COMPARISON_BYTES
    if other is not None and comparison is None:
        from stepscope.analysis.compare import compare

        comparison = compare(trace.analysis, other.analysis, trace.name, other.name)
    for budgets in BUDGETS:
        if other is None:
            body = [sections.header(trace.name, trace.report), *_trace_sections(trace, budgets, "a_")]
            title = f"Stepscope: {trace.name}"
        else:
            body = ["<h1>Stepscope comparison</h1>", *_comparison_sections(trace, other, comparison, budgets)]
            body += [sections.header(trace.name, trace.report, "A: "), *_trace_sections(trace, budgets, "a_")]
            body += [sections.header(other.name, other.report, "B: "), *_trace_sections(other, budgets, "b_")]
            title = f"Stepscope: {trace.name} vs {other.name}"
        document = _with_plotly(without_raw_bidi(_document(title, body)))
        if len(document.encode()) <= max_bytes:
            return document
    raise ReportTooLargeError(f"the report would be over {max_bytes / 1e6:.3g} MB even with the smallest figures")


def write_report(html_text: str, out_path: str | os.PathLike) -> int:
    """Write atomically (temp file in the same folder, then rename); returns the bytes written."""
    out = Path(out_path)
    data = html_text.encode()
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return len(data)
