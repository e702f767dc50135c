"""One self-contained HTML report of a trace (and optionally its comparison with another) to share with anyone.

plotly.js is inlined (plotly's offline bundle), so the file opens offline and makes no network request: a
Content-Security-Policy in the file forbids any fetch, so a stray one would fail loudly rather than leak.
Every string that came from a trace is HTML-escaped here (tables, headings) or in Plotly text (figures).

The file stays under MAX_REPORT_BYTES whatever the trace: figures are the step-level overview (never every
kernel), per-step charts draw at most a budget of steps, tables a budget of rows; when a report is still too
big, the budgets shrink and the report says what it left out. Lives in app/ because it composes the app's
Plotly figures (exporters/ must not import app/).
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pandas as pd
import plotly.io as pio
import plotly.offline

from ..analysis import number_format
from ..analysis.compare import Comparison, batches_differ
from ..analysis.gap_table import gaps_by_cause
from ..analysis.metrics import card_metrics
from ..analysis.model import Analysis
from ..parsers.timeline import Timeline
from .anatomy_tables import category_roofline_table, category_table, composition_table
from .compare_formats import format_delta, format_ratio, format_value, op_diff_caption, op_diff_rows
from .figures import compare_charts, memory_chart, step_charts, timeline
from .safe_text import BIDI_CONTROLS, for_html

MAX_REPORT_BYTES = 8_000_000
NAME_CHARS = 160  # kernel names run to kilobytes; tables show their start
# (overview segments per lane, steps per chart, table rows, decode steps in comparison overlays), tried in order
# (a screen shows ~2,000 segments per lane; ~1 MB each at 3,000): a usual report is ~6 MB, plotly.js 4.8 of it
BUDGETS = ((3_000, 2_000, 200, 2_000), (1_000, 800, 60, 800), (300, 200, 20, 200), (100, 60, 10, 60))
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
.finding{border-left:4px solid #339af0;padding:4px 12px;margin:8px 0;background:#f8f9fa}
.finding.warn{border-color:#f59f00} .finding.critical{border-color:#e03131}
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


def esc(text: object) -> str:
    """HTML-escaped, with bidirectional controls and undecodable bytes written as escapes (safe_text.for_html)."""
    return for_html(text)


def _short(text: object, chars: int = NAME_CHARS) -> str:
    text = str(text)
    return text if len(text) <= chars else text[: chars - 1] + "…"


def _figure_html(fig, div_id: str) -> str:
    """A figure as a div and its Plotly.newPlot script (plotly escapes '<' in the JSON: no </script> breakout)."""
    fig.update_layout(template=APP_TEMPLATE, font=APP_FONT)
    return pio.to_html(
        fig, include_plotlyjs=False, full_html=False, config=PLOT_CONFIG, div_id=div_id, default_width="100%"
    )


def _table(frame: pd.DataFrame, numeric: Iterable[str] = (), formats: dict | None = None) -> str:
    formats = formats or {}
    numeric = set(numeric)
    head = "".join(f"<th>{esc(c)}</th>" for c in frame.columns)
    rows = []
    for record in frame.itertuples(index=False):
        cells = []
        for column, value in zip(frame.columns, record, strict=True):
            text = formats[column](value) if column in formats else value
            css = ' class="num"' if column in numeric else ' class="trunc"'
            cells.append(f"<td{css}>{esc(_short(text))}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _num(unit: str = ""):
    """A table cell as every page shows it (analysis.number_format: 3 significant digits, "—" for missing)."""
    return lambda v: number_format.format_value(v, unit) if isinstance(v, int | float) or v is None else v


def _cards(summary) -> str:
    """The app's summary cards (the registry's headline metrics), as HTML."""
    on_gpu = summary.on_gpu
    cards = []
    for m, label in card_metrics(summary):  # the app's labels: CPU wording, no launch card on a CPU trace
        cards.append(
            f'<div class="card"><div class="label">{esc(label)}</div>'
            f'<div class="value">{esc(m.format(m.value(summary)))}</div></div>'
        )
    note = (
        '<p class="note">CPU-only trace: host ops stand in for kernels; busy means some op runs, idle that none '
        "does.</p>"
        if not on_gpu
        else ""
    )
    return f'<div class="cards">{"".join(cards)}</div>{note}'


def _header(trace: ReportTrace, tag: str = "") -> str:
    report = trace.report
    seg = report["segmentation"]
    warnings = "".join(f"<li>{esc(w)}</li>" for w in seg["warnings"])
    return (
        f"<h1>{esc(tag)}{esc(_short(trace.name))}</h1>"
        f'<p class="meta">{esc(report["format"])} · device {esc(report["device"] or "unknown")} · '
        f"{report['events']:,} events · {report['requests']} request(s) · {len(report['steps'])} step(s) found by "
        f"{esc(seg['method'])} (confidence {seg['confidence']:.2f})</p>"
        + (f"<ul class='note'>{warnings}</ul>" if warnings else "")
    )


def _thin_steps(steps: pd.DataFrame, budget: int) -> tuple[pd.DataFrame, str]:
    if len(steps) <= budget:
        return steps, ""
    every = math.ceil(len(steps) / budget)
    return steps.iloc[::every], f"Every {every}th of {len(steps):,} steps drawn (x is the step's number)."


def _trace_sections(trace: ReportTrace, budgets: tuple[int, int, int, int], prefix: str) -> list[str]:
    overview_budget, step_budget, row_budget, _ = budgets
    analysis = trace.analysis
    parts = [_cards(analysis.summary)]
    fig, note = timeline.overview_figure(analysis, overview_budget)
    parts += [
        "<h2>Step overview</h2>",
        _figure_html(fig, f"{prefix}overview"),
        f'<p class="note">{esc(note)}Drag to zoom, double-click to reset.</p>',
    ]
    parts += _memory_section(trace, overview_budget, step_budget, prefix)
    parts.append("<h2>Per step</h2>")
    if analysis.steps.empty:
        parts.append("<p>No steps found, so no per-step charts.</p>")
    else:
        steps, note = _thin_steps(analysis.steps, step_budget)
        on_gpu = analysis.summary.on_gpu
        for name, fig in (
            ("time", step_charts.step_time_chart(steps)),
            ("counts", step_charts.kernels_launches_chart(steps, on_gpu)),
            ("busy", step_charts.busy_idle_chart(steps, on_gpu)),
        ):
            parts.append(_figure_html(fig, f"{prefix}step_{name}"))
        if step_charts.has_composition(steps):
            parts.append(_figure_html(step_charts.batch_chart(steps), f"{prefix}step_batch"))
        if note:
            parts.append(f'<p class="note">{esc(note)}</p>')
    parts += _batch_section(analysis)
    parts += _anatomy_sections(analysis, prefix)
    gaps = analysis.gaps
    parts.append(f"<h2>Idle gaps by cause ({len(gaps):,} gaps)</h2>")
    if gaps.empty:
        parts.append("<p>No idle gaps above the threshold.</p>")
    else:
        parts.append(
            _table(
                gaps_by_cause(gaps),
                ("gaps", "total_ms", "longest_us", "share_pct"),
                {"total_ms": _num("ms"), "longest_us": _num("us"), "share_pct": _num("%")},
            )
        )
        parts.append(_figure_html(step_charts.gap_histogram(gaps), f"{prefix}gap_hist"))
    parts.append("<h2>Findings</h2>")
    if not analysis.findings:
        parts.append("<p>No findings for this trace.</p>")
    for finding in analysis.findings[:row_budget]:
        severity = finding.severity if finding.severity in ("info", "warn", "critical") else "info"
        parts.append(
            f'<div class="finding {severity}"><b>[{esc(severity)}] {esc(finding.title)}</b>'
            f"<br>{esc(finding.detail)}</div>"
        )
    if len(analysis.findings) > row_budget:
        parts.append(f'<p class="note">{row_budget} of {len(analysis.findings)} findings shown.</p>')
    top = analysis.top_kernels
    if not top.empty:
        parts.append("<h2>Top kernels per phase</h2>")
        top = top.groupby("phase", sort=False).head(max(row_budget // 10, 3))
        top = top.assign(total_ms=top["total_ns"] / 1e6)[["phase", "name", "count", "total_ms", "share_pct"]]
        parts.append(_table(top, ("count", "total_ms", "share_pct"), {"total_ms": _num("ms"), "share_pct": _num("%")}))
    return parts


def _batch_section(analysis: Analysis) -> list[str]:
    """What the run's batches held: the app's Batch composition table (exporters.anatomy_tables)."""
    if analysis.steps.empty:
        return []
    return ["<h2>Batch composition</h2>", _table(composition_table(analysis))]


def _anatomy_sections(analysis: Analysis, prefix: str) -> list[str]:
    """Inside a step (categories, layers) and the roofline per category, as the app's Analyze page has them."""
    anat = analysis.anatomy
    if anat is None or anat.median_step is None:
        return []
    on_gpu = anat.on_gpu
    unit = "kernels" if on_gpu else "host ops"
    role = anat.role or f"step {anat.median_step}"
    table = category_table(analysis).rename(columns={"count": unit, "time_us": "time", "share_pct": "share"})
    parts = [
        f"<h2>Inside a step: categories and layers ({esc(role)})</h2>",
        _table(table, (unit, "time", "share"), {"time": _num("us"), "share": _num("%")}),
    ]
    if not anat.step_categories.empty:
        parts.append(_figure_html(step_charts.category_chart(anat.step_categories, on_gpu), f"{prefix}categories"))
    layers = anat.layers
    if layers is not None and layers.layers:
        lu = layers.layer_us or {}
        us = _num("us")
        parts.append(
            f"<p><b>{layers.layers} layers</b> of {layers.kernels_per_layer} {unit}: {esc(us(lu.get('p50')))} each "
            f"(median; min {esc(us(lu.get('min')))}, max {esc(us(lu.get('max')))}); head {esc(us(layers.head_us))}, "
            f"tail {esc(us(layers.tail_us))}.</p>"
        )
    else:
        parts.append("<p>Layers not counted: the step's sequence does not repeat cleanly.</p>")
    roofline = anat.roofline or {}
    parts.append("<h2>Roofline per category</h2>")
    if roofline.get("status") != "ok":
        parts.append(
            f"<p>No per-category roofline: {esc(roofline.get('status', 'it needs a model and a device'))}.</p>"
        )
        return parts
    parts.append(
        f'<p class="note">{esc(roofline["model"])} on {esc(roofline["hardware"])} at '
        f"{esc(number_format.format_value(roofline['memory_gb_s'], 'GB/s'))}; context "
        f"{esc(number_format.compact(roofline['context']))} tokens, batch {esc(roofline['batch'])}.</p>"
    )
    roof = category_roofline_table(roofline).rename(
        columns={
            "time_us": "measured",
            "bytes_MB": "bytes (MB)",
            "floor_us": "floor",
            "achieved_GB_s": "achieved",
            "pct_of_roofline": "of roofline",
        }
    )
    units = {"measured": "us", "bytes (MB)": "", "floor": "us", "achieved": "GB/s", "of roofline": "%"}
    parts.append(_table(roof, list(units), {c: _num(u) for c, u in units.items()}))
    return parts


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
    body = "".join("<tr>" + "".join(f"<td>{esc(_short(c))}</td>" for c in row) + "</tr>" for row in rows)
    return [
        f"<h3>{esc(op_diff_caption(comparison))}</h3>",
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>",
    ]


def _memory_section(trace: ReportTrace, lane_budget: int, step_budget: int, prefix: str) -> list[str]:
    """The memory lane, the model device's memory figures and the per-step memory chart (none without memory)."""
    memory = trace.analysis.summary.memory
    if memory is None:
        return []
    lane = memory_chart.memory_lane_figure(trace.timeline, trace.analysis, lane_budget)
    parts = [f"<h2>Memory ({esc(memory.device)})</h2>"]
    if lane is not None:
        parts.append(_figure_html(lane, f"{prefix}memory_lane"))
    rows = [
        ("peak allocated", memory.peak_allocated_bytes),
        ("peak reserved", memory.peak_reserved_bytes),
        ("KV growth per decode step", memory.kv_growth_bytes_per_token),
        ("expected KV per decode step (model)", memory.expected_kv_bytes_per_token),
        ("expected weights (model)", memory.expected_weights_bytes),
        ("device memory", memory.device_memory_bytes),
    ]
    figures = pd.DataFrame(
        {
            "figure": [label for label, _ in rows] + ["KV tokens that fit (per sequence)"],
            "value": [format_value(v, "B") for _, v in rows] + [format_value(memory.kv_tokens_capacity, "")],
        }
    )
    parts.append(_table(figures, ("value",)))
    steps, _ = _thin_steps(trace.analysis.steps, step_budget)
    chart = memory_chart.step_memory_chart(replace(trace.analysis, steps=steps))
    if chart is not None:
        parts.append(_figure_html(chart, f"{prefix}step_memory"))
    notes = [f"KV growth: {memory.basis}.", *memory.notes]
    parts.append(f'<p class="note">{"<br>".join(esc(n) for n in notes)}</p>')
    return parts


def _comparison_sections(
    a: ReportTrace, b: ReportTrace, comparison: Comparison, budgets: tuple[int, int, int, int]
) -> list[str]:
    decode_budget = budgets[3]
    rows = "".join(
        f"<tr><td>{esc(r.label)}</td><td class='num'>{esc(format_value(r.a, r.unit))}</td>"
        f"<td class='num'>{esc(format_value(r.b, r.unit))}</td><td class='num'>{esc(format_delta(r.delta, r.unit))}"
        f"</td><td class='num'>{esc(format_ratio(r.ratio))}</td></tr>"
        for r in comparison.metrics.itertuples(index=False)
    )
    parts = [
        "<h2>Comparison</h2>",
        f"<p>A (baseline): <b>{esc(_short(comparison.label_a))}</b> · B: <b>{esc(_short(comparison.label_b))}</b></p>",
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
        a_fig, b_fig = (replace(t, name=_short(t.name, 60)) for t in (a, b))
        parts.append(_figure_html(compare_charts.itl_overlay(a_fig, b_fig), "cmp_itl"))
        parts.append(_figure_html(compare_charts.per_step_overlay(a_fig, b_fig), "cmp_steps"))
    return parts


def _composition_rows(comparison: Comparison) -> list[str]:
    """The batches of A and B (sequences per decode step, steps by kind, requests), when either trace tells."""
    rows = comparison.composition
    if rows.empty or not batches_differ(rows):
        return []
    table = rows.drop(columns="key").rename(columns={"label": "batches", "a": "A", "b": "B", "delta": "B − A"})
    return ["<h3>Batches</h3>", _table(table, ("A", "B", "B − A"), {c: _num() for c in ("A", "B", "B − A")})]


# The figures' scripts run where they stand, before plotly.js (4.6 MB, ~1.5 s to compile on a slow machine) has
# loaded at the end of the page: until then Plotly.newPlot only queues its arguments, so the page's text and tables
# paint at once and the figures follow, instead of a blank page until plotly.js is compiled.
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
        f"<title>{esc(_short(title, 120))}</title><style>{CSS}</style>"
        f"<script type='text/javascript'>{_PLOTLY_QUEUE}</script></head><body>"
        + "\n".join(body)
        + '\n<p class="note">Made by Stepscope. Self-contained: opens offline, loads nothing from the network.</p>'
        + PLOTLY_MARK
        + "</body></html>\n"
    )


def _with_plotly(document: str) -> str:
    """The document with plotly.js and the queued figures' drawing at its end (see _PLOTLY_QUEUE)."""
    scripts = (
        f"<script type='text/javascript'>{plotly.offline.get_plotlyjs()}</script>"
        f"<script type='text/javascript'>{_PLOTLY_DRAIN}</script>"
    )
    return document.replace(PLOTLY_MARK, scripts, 1)


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
    max_bytes: int = MAX_REPORT_BYTES,
) -> str:
    """The report as one HTML string, at most max_bytes of UTF-8. `other`: B of a comparison (trace is A)."""
    if other is not None and comparison is None:
        from ..analysis.compare import compare

        comparison = compare(trace.analysis, other.analysis, trace.name, other.name)
    for budgets in BUDGETS:
        if other is None:
            body = [_header(trace), *_trace_sections(trace, budgets, "a_")]
            title = f"Stepscope: {trace.name}"
        else:
            body = ["<h1>Stepscope comparison</h1>", *_comparison_sections(trace, other, comparison, budgets)]
            body += [_header(trace, "A: "), *_trace_sections(trace, budgets, "a_")]
            body += [_header(other, "B: "), *_trace_sections(other, budgets, "b_")]
            title = f"Stepscope: {trace.name} vs {other.name}"
        document = _with_plotly(without_raw_bidi(_document(title, body)))
        if len(document.encode()) <= max_bytes:
            return document
    raise ReportTooLargeError(f"the report would be over {max_bytes / 1e6:.0f} MB even with the smallest figures")


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
