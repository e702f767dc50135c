"""One trace's part of the HTML report, in the Analyze page's order: the verdict first (cards, then the findings in
the JSON's order), the timeline, then the rest (per step, memory, batches, inside a step, roofline, gaps, kernels).

Tables have human headers with their unit, values written by analysis/number_format.py (the one formatter every
output uses), kernel names short with the full name on hover. Every string from a trace is HTML-escaped here or in
Plotly text. Figures are written by `figure` (report_html passes its own, which adds the app's template).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import pandas as pd

from stepscope.analysis import number_format
from stepscope.analysis.gap_table import gaps_by_cause
from stepscope.analysis.metrics import card_metrics, card_text, unknown_reason
from stepscope.analysis.model import Analysis
from stepscope.analysis.model_proposal import roofline_text
from stepscope.analysis.report import saving_text
from .anatomy_tables import category_roofline_table, category_table, composition_table
from .figures import memory_chart, step_charts, timeline
from .safe_text import for_html

NAME_CHARS = 160  # kernel names run to kilobytes; a cell shows their start, the hover all of it (to this)
HOVER_CHARS = 2000
FIRST_FINDINGS = 6  # findings listed on the first screen; the rest one click away under them
SEVERITIES = ("info", "warn", "critical")
Figure = Callable[[object, str], str]


@dataclass(frozen=True)
class Column:
    """A table column: the frame's column, its header, the unit its values are written in (None: as they are) and
    the column whose text shows on hover (the full kernel name)."""

    source: str
    header: str
    unit: str | None = None
    hover: str | None = None


def esc(text: object) -> str:
    """HTML-escaped, with bidirectional controls and undecodable bytes written as escapes (safe_text.for_html)."""
    return for_html(text)


def short(text: object, chars: int = NAME_CHARS) -> str:
    text = str(text)
    return text if len(text) <= chars else text[: chars - 1] + "…"


def value_text(value: object, unit: str | None) -> str:
    if unit is None or not (isinstance(value, int | float) or value is None):
        return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)
    return number_format.format_value(value, unit)


def table(frame: pd.DataFrame, columns: list[Column]) -> str:
    head = "".join(f"<th>{esc(c.header)}</th>" for c in columns)
    rows = []
    for record in frame.to_dict("records"):
        cells = []
        for c in columns:
            text = value_text(record.get(c.source), c.unit)
            full = str(record.get(c.hover) or "") if c.hover else ""
            title = f' title="{esc(short(full, HOVER_CHARS))}"' if full and full != text else ""
            css = "num" if c.unit is not None else "trunc"
            cells.append(f'<td class="{css}"{title}>{esc(short(text))}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def cards(summary) -> str:
    """The app's summary cards (the registry's headline metrics), as HTML; a figure the trace does not have reads
    "unknown" where the analysis says why (summary.unknown_reasons), the reason under the cards."""
    items, reasons = [], {}
    for m, label in card_metrics(summary):  # the app's labels: CPU wording, no launch card on a CPU trace
        why = unknown_reason(m, summary)
        text = card_text(m, summary)
        if why:
            reasons.setdefault(why, label)
        value = f'<div class="value">{esc(text)}</div>'
        items.append(f'<div class="card"><div class="label">{esc(label)}</div>{value}</div>')
    note = (
        ""
        if summary.on_gpu
        else '<p class="note">CPU-only trace: host ops stand in for kernels; busy means some op runs, idle that none '
        "does.</p>"
    )
    note += "".join(f'<p class="note">{esc(label)} unknown: {esc(why)}.</p>' for why, label in reasons.items())
    return f'<div class="cards">{"".join(items)}</div>{note}'


def finding_cost(item: dict) -> str:
    """What fixing a finding could save, in the words every output uses (analysis.report.saving_text); "" for a
    finding with nothing to win."""
    return saving_text(item)


def _finding(item: dict) -> str:
    severity = item.get("severity") if item.get("severity") in SEVERITIES else "info"
    if severity == "info" and item.get("saving_us") is None:  # describes the run, nothing to win: context, as the app
        return f'<p class="note">Context: <b>{esc(item.get("title", ""))}</b>. {esc(item.get("detail", ""))}</p>'
    cost = finding_cost(item)
    cost_html = f' <span class="cost">· {esc(cost)}</span>' if cost else ""
    return (
        f'<details class="finding {severity}"><summary><span class="sev">{esc(severity)}</span> '
        f"<b>{esc(item.get('title', ''))}</b>{cost_html}</summary><p>{esc(item.get('detail', ''))}</p></details>"
    )


def findings(report: dict, limit: int) -> list[str]:
    """The findings in the JSON's order (the order the page shows), one line each, the detail a click away."""
    items = report.get("findings") or []
    parts = ['<h2 id="findings">Findings</h2>']
    if not items:
        return [*parts, "<p>No findings for this trace: nothing above the thresholds DESIGN.md lists.</p>"]
    items = items[:limit]
    parts += [_finding(i) for i in items[:FIRST_FINDINGS]]
    rest = items[FIRST_FINDINGS:]
    if rest:
        inner = "".join(_finding(i) for i in rest)
        parts.append(f'<details class="more"><summary>{len(rest)} more finding(s)</summary>{inner}</details>')
    total = len(report.get("findings") or [])
    if total > limit:
        parts.append(f'<p class="note">{limit} of {total} findings shown.</p>')
    return parts


def header(name: str, report: dict, tag: str = "") -> str:
    """The title and one line of what the trace is (the segmentation's warnings come after the verdict)."""
    seg = report["segmentation"]
    return (
        f"<h1>{esc(tag)}{esc(short(name))}</h1>"
        f'<p class="meta">{esc(report["format"])} · device {esc(report["device"] or "unknown")} · '
        f"{report['events']:,} events · {report['requests']} request(s) · {len(report['steps'])} step(s) found by "
        f"{esc(seg['method'])} (confidence {seg['confidence']:.2f})</p>"
    )


def how_steps_were_found(report: dict) -> list[str]:
    warnings = report["segmentation"]["warnings"]
    if not warnings:
        return []
    items = "".join(f"<li>{esc(w)}</li>" for w in warnings)
    return ["<h2>How the steps were found: caveats</h2>", f"<ul class='note'>{items}</ul>"]


def thin_steps(steps: pd.DataFrame, budget: int) -> tuple[pd.DataFrame, str]:
    if len(steps) <= budget:
        return steps, ""
    every = math.ceil(len(steps) / budget)
    return steps.iloc[::every], f"Every {every}th of {len(steps):,} steps drawn (x is the step's number)."


def overview(analysis: Analysis, budget: int, prefix: str, figure: Figure) -> list[str]:
    fig, note = timeline.overview_figure(analysis, budget)
    return [
        "<h2>Timeline</h2>",
        figure(fig, f"{prefix}overview"),
        f'<p class="note">{esc(note)}Drag to zoom, double-click to reset.</p>',
    ]


def per_step(analysis: Analysis, budget: int, prefix: str, figure: Figure) -> list[str]:
    parts = ["<h2>Per step</h2>"]
    if analysis.steps.empty:
        return [*parts, "<p>No steps found, so no per-step charts.</p>"]
    steps, note = thin_steps(analysis.steps, budget)
    on_gpu = analysis.summary.on_gpu
    for name, fig in (
        ("time", step_charts.step_time_chart(steps)),
        ("counts", step_charts.kernels_launches_chart(steps, on_gpu)),
        ("busy", step_charts.busy_idle_chart(steps, on_gpu)),
    ):
        parts.append(figure(fig, f"{prefix}step_{name}"))
    if step_charts.has_composition(steps):
        parts.append(figure(step_charts.batch_chart(steps), f"{prefix}step_batch"))
    if note:
        parts.append(f'<p class="note">{esc(note)}</p>')
    return parts


def memory(analysis: Analysis, trace_timeline, lane_budget: int, step_budget: int, prefix: str, figure: Figure):
    """The memory lane, the model device's memory figures and the per-step memory chart (none without memory)."""
    mem = analysis.summary.memory
    if mem is None:
        return []
    lane = memory_chart.memory_lane_figure(trace_timeline, analysis, lane_budget)
    parts = [f"<h2>Memory ({esc(mem.device)})</h2>"]
    if lane is not None:
        parts.append(figure(lane, f"{prefix}memory_lane"))
    rows = [
        ("Peak allocated", mem.peak_allocated_bytes, "B"),
        ("Peak reserved", mem.peak_reserved_bytes, "B"),
        ("KV growth per decode step", mem.kv_growth_bytes_per_token, "B"),
        ("Expected KV per decode step (model)", mem.expected_kv_bytes_per_token, "B"),
        ("Expected weights (model)", mem.expected_weights_bytes, "B"),
        ("Device memory", mem.device_memory_bytes, "B"),
        ("KV tokens that fit (per sequence)", mem.kv_tokens_capacity, ""),
    ]
    values = pd.DataFrame({"figure": [r[0] for r in rows], "value": [value_text(r[1], r[2]) for r in rows]})
    parts.append(table(values, [Column("figure", "Figure"), Column("value", "Value", "")]))
    steps, _ = thin_steps(analysis.steps, step_budget)
    chart = memory_chart.step_memory_chart(replace(analysis, steps=steps))
    if chart is not None:
        parts.append(figure(chart, f"{prefix}step_memory"))
    notes = [f"KV growth: {mem.basis}.", *mem.notes]
    parts.append(f'<p class="note">{"<br>".join(esc(n) for n in notes)}</p>')
    return parts


def batches(analysis: Analysis) -> list[str]:
    """What the run's batches held: the app's Batch composition table (exporters.anatomy_tables)."""
    if analysis.steps.empty:
        return []
    frame = composition_table(analysis)
    return ["<h2>Batch composition</h2>", table(frame, [Column("figure", "Figure"), Column("value", "Value", "")])]


def inside_a_step(analysis: Analysis, prefix: str, figure: Figure) -> list[str]:
    """Categories and layers of the anatomy's step, as the app's Analyze page has them."""
    anat = analysis.anatomy
    if anat is None or anat.median_step is None:
        return []
    unit = "kernels" if anat.on_gpu else "host ops"
    role = anat.role or f"step {anat.median_step}"
    columns = [
        Column("category", "Category"),
        Column("count", unit.capitalize(), ""),
        Column("time_us", "Time", "us"),
        Column("share_pct", "Share", "%"),
    ]
    parts = [f"<h2>Inside a step: categories and layers ({esc(role)})</h2>", table(category_table(analysis), columns)]
    if not anat.step_categories.empty:
        parts.append(figure(step_charts.category_chart(anat.step_categories, anat.on_gpu), f"{prefix}categories"))
    layers = anat.layers
    if layers is not None and layers.layers:
        lu = layers.layer_us or {}

        def us(v) -> str:
            return esc(number_format.format_value(v, "us"))

        parts.append(
            f"<p><b>{layers.layers} layers</b> of {layers.kernels_per_layer} {unit}: {us(lu.get('p50'))} each "
            f"(median; min {us(lu.get('min'))}, max {us(lu.get('max'))}); head {us(layers.head_us)}, "
            f"tail {us(layers.tail_us)}.</p>"
        )
    else:
        parts.append("<p>Layers not counted: the step's sequence does not repeat cleanly.</p>")
    return parts


def roofline(analysis: Analysis, report: dict) -> list[str]:
    """The roofline per category, and without a model the one the trace shows, proposed (not used)."""
    anat = analysis.anatomy
    parts = ["<h2>Roofline</h2>"]
    proposal = report.get("summary", {}).get("model_proposal")
    if proposal and analysis.roofline is None:
        line = f"<b>Proposed model</b> (from the trace, not used in any figure): {esc(proposal['text'])}"
        if proposal.get("weights_roofline"):
            line += f"<br>Weights-only roofline (proposed): {esc(roofline_text(proposal['weights_roofline']))}."
        parts.append(f'<p class="proposal">{line}</p>')
    roof = (anat.roofline if anat is not None else None) or {}
    if roof.get("status") != "ok":
        why = roof.get("status", "it needs a model and a device")
        return [*parts, f"<p>No per-category roofline: {esc(why)}.</p>"]
    parts.append(
        f'<p class="note">{esc(roof["model"])} on {esc(roof["hardware"])} at '
        f"{esc(number_format.format_value(roof['memory_gb_s'], 'GB/s'))}; context "
        f"{esc(number_format.compact(roof['context']))} tokens, batch {esc(roof['batch'])}.</p>"
    )
    frame = category_roofline_table(roof).assign(bytes=lambda f: f["bytes_MB"] * 1e6)
    columns = [
        Column("category", "Category"),
        Column("time_us", "Measured", "us"),
        Column("bytes", "Bytes", "B"),
        Column("floor_us", "Floor", "us"),
        Column("achieved_GB_s", "Achieved", "GB/s"),
        Column("pct_of_roofline", "Of roofline", "%"),
    ]
    return [*parts, table(frame, columns)]


def gaps(analysis: Analysis, prefix: str, figure: Figure) -> list[str]:
    found = analysis.gaps
    parts = [f"<h2>Idle gaps by cause ({len(found):,} gaps)</h2>"]
    if found.empty:
        return [*parts, "<p>No idle gaps above the threshold.</p>"]
    columns = [
        Column("cause", "Likely cause"),
        Column("placement", "Where"),
        Column("gaps", "Gaps", ""),
        Column("total_ms", "Idle time", "ms"),
        Column("longest_us", "Longest", "us"),
        Column("share_pct", "Share of idle time", "%"),
    ]
    return [*parts, table(gaps_by_cause(found), columns), figure(step_charts.gap_histogram(found), f"{prefix}gap_hist")]


def top_kernels(analysis: Analysis, row_budget: int) -> list[str]:
    top = analysis.top_kernels
    if top.empty:
        return []
    what = "kernel" if analysis.summary.on_gpu else "host op"
    top = top.groupby("phase", sort=False).head(max(row_budget // 10, 3))
    top = top.assign(total_ms=top["total_ns"] / 1e6)
    columns = [
        Column("phase", "Phase"),
        Column("short", what.capitalize() + " (hover for the full name)", hover="name"),
        Column("count", "Count", ""),
        Column("total_ms", "Total time", "ms"),
        Column("share_pct", "Share of the phase", "%"),
    ]
    return [f"<h2>Top {what}s per phase</h2>", table(top, columns)]


def requests(analysis: Analysis, row_budget: int, prefix: str, figure: Figure) -> list[str]:
    """A served run's requests (issue 41), as the app's requests view shows them: the per-request distributions,
    the lanes of the first `row_budget` requests on the steps' clock, and their table."""
    from .figures import request_charts, request_lanes
    from .request_tables import COLUMNS, requests_table

    table_rows = analysis.requests.rows if analysis.requests is not None else None
    if table_rows is None or not len(table_rows) or not (analysis.summary.served or len(table_rows) > 1):
        return []
    shown = requests_table(analysis)
    parts = [f'<h2 id="{prefix}requests">Requests ({len(shown):,})</h2>']
    if request_charts.has_distributions(shown):
        parts.append(figure(request_charts.request_distributions([("this run", shown)]), f"{prefix}request_dists"))
    part = table_rows.iloc[:row_budget]
    parts.append(figure(request_lanes.request_lanes_figure(analysis, part), f"{prefix}request_lanes"))
    units = {"request": "", "prompt_tokens": "", "output_tokens": "", "first_step": "", "last_step": "", "steps": ""}
    columns = [
        Column(c, header, units.get(c, "ms") if c != "ttft_from" else None)
        for c, (header, _) in COLUMNS.items()
        if c != "first_token_step"
    ]
    parts.append(table(shown.iloc[:row_budget].astype(object).where(shown.iloc[:row_budget].notna(), None), columns))
    if len(shown) > row_budget:
        parts.append(f'<p class="note">The first {row_budget} of {len(shown):,} requests; the app shows them all.</p>')
    return parts
