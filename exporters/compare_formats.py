"""A Comparison as DESIGN.md's compare JSON, as a terminal table, and as a Markdown table for a PR comment.

The three forms print the same numbers: the metric table of analysis.compare (delta = B - A, ratio = B / A),
its one-sentence summary and the gate results. Trace names are untrusted text: the Markdown form escapes them
(GitHub renders HTML and Markdown in comments), the JSON form leaves escaping to the JSON encoder.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence

from stepscope.analysis.compare import Comparison
from stepscope.analysis.gate import GateResult
from stepscope.analysis.metrics import BY_KEY
from stepscope.analysis.number_format import format_delta, format_ratio, format_row, format_value, shared_unit
from .safe_text import plain

_MARKDOWN_SPECIALS = re.compile(r"([\\`*_{}\[\]|~$])")  # with < > & as entities: nothing renders as markup


def _json_number(value: float) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def comparison_json(comparison: Comparison, summary_a: dict, summary_b: dict, gates: Sequence[GateResult] = ()) -> dict:
    """DESIGN.md's `compare --json` object. summary_a/b: the analyze contract's summary objects.

    `metrics` holds the Compare page's rows; `better` comes from the metric registry (null: neither)."""
    metrics = [
        {
            "key": row.metric,
            "label": row.label,
            "unit": row.unit,
            "a": _json_number(row.a),
            "b": _json_number(row.b),
            "delta": _json_number(row.delta),
            "ratio": _json_number(row.ratio),
            "better": BY_KEY[row.metric].better if row.metric in BY_KEY else None,
        }
        for row in comparison.metrics.itertuples(index=False)
    ]
    return {
        "a": summary_a,
        "b": summary_b,
        "labels": {"a": comparison.label_a, "b": comparison.label_b},
        "metrics": metrics,
        "sentence": comparison.sentence,
        "gates": [{"expr": r.expr, "ok": r.ok, "detail": r.detail} for r in gates],
        "composition": comparison.composition_json(),
        **_pair_judgement(comparison),
    }


def _pair_judgement(comparison: Comparison) -> dict:
    """`warnings` (always present, [] when the pair is comparable) and `op_diff` (DESIGN.md, 2026-12-01)."""
    return {"warnings": list(comparison.warnings), "op_diff": comparison.op_diff or {"rows": []}}


def metric_cells(row) -> tuple[str, str, str, str]:
    """A, B, B - A and B / A of one metric row, A, B and the change in one unit (analysis.number_format)."""
    shown = shared_unit([row.a, row.b], row.unit)
    return (
        format_value(row.a, row.unit, shown),
        format_value(row.b, row.unit, shown),
        format_delta(row.delta, row.unit, shown),
        format_ratio(row.ratio, row.a, row.b),
    )


def verdict(row) -> str | None:
    """ "better" or "worse" for a metric row's change, from the registry's direction (None: neither)."""
    m = BY_KEY.get(row.metric)
    return m.verdict(row.delta) if m is not None else None


def _rows(comparison: Comparison) -> list[tuple[str, str, str, str, str]]:
    return [(row.label, *metric_cells(row)) for row in comparison.metrics.itertuples(index=False)]


def _verdicts(comparison: Comparison) -> list[str | None]:
    """Each row's "better" / "worse"; none for a pair that is not like for like (no verdict on it)."""
    return [None if comparison.warnings else verdict(row) for row in comparison.metrics.itertuples(index=False)]


def metric_table_rows(comparison: Comparison, on_gpu: bool = True) -> list[dict]:
    """The Compare page's metric table as text cells (one unit per row, 3 significant digits) with each change's
    verdict ("better", "worse", "" for neither): the same cells as the markdown and text tables. Between two
    CPU-only traces (`on_gpu` False) the rows a CPU trace cannot have (launches) are left out."""
    return [
        dict(zip(("metric", "A", "B", "B - A", "B / A"), (row.label, *metric_cells(row)), strict=True))
        | {"verdict": "" if comparison.warnings else verdict(row) or ""}
        for row in comparison.metrics.itertuples(index=False)
        if on_gpu or not (row.metric in BY_KEY and BY_KEY[row.metric].gpu_only)
    ]


MARKDOWN_MARK = {"better": "🟢 ", "worse": "🔴 "}  # GitHub colours no text: a coloured mark before the change
_ANSI = {"better": "\033[32m", "worse": "\033[31m"}


def comparison_text(comparison: Comparison, gates: Sequence[GateResult] = (), color: bool = False) -> str:
    """The comparison as an aligned table for a terminal; the last column says whether B is better or worse (in
    green or red with `color`, for a terminal)."""
    header = ("metric", "A", "B", "B - A", "B / A", "")
    rows = [header, *((*r, v or "") for r, v in zip(_rows(comparison), _verdicts(comparison), strict=True))]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [f"A  {_one_line(comparison.label_a)}", f"B  {_one_line(comparison.label_b)}", ""]
    for row in rows:
        cells = [row[0].ljust(widths[0])] + [
            cell.rjust(width) for cell, width in zip(row[1:5], widths[1:5], strict=True)
        ]
        judged = f"{_ANSI[row[5]]}{row[5]}\033[0m" if color and row[5] in _ANSI else row[5]
        lines.append("  ".join([*cells, judged]).rstrip())
    lines += ["", _one_line(comparison.sentence)]
    lines += _warning_lines(comparison)
    lines += _op_diff_text(comparison)
    if gates:
        lines.append("")
        lines += [_one_line(result.line()) for result in gates]
    return plain("\n".join(lines) + "\n")  # trace names' bidi controls and undecodable bytes as escapes


def _warning_lines(comparison: Comparison) -> list[str]:
    return (
        ["", *(f"warning  not like for like: {_one_line(w)}" for w in comparison.warnings)]
        if comparison.warnings
        else []
    )


def op_diff_rows(comparison: Comparison, top: int = 15) -> list[tuple[str, ...]]:
    """The op diff's first rows as text cells: name, category, status, count A -> B, time A -> B, change."""
    diff = comparison.op_diff or {}
    return [
        (
            str(r["name"]),
            str(r["category"]),
            str(r["status"]),
            " → ".join(format_row([r["a_count"], r["b_count"]], "")),
            " → ".join(format_row([r["a_us"], r["b_us"]], "us")),
            format_delta(r["delta_us"], "us", shared_unit([r["a_us"], r["b_us"]], "us")),
        )
        for r in (diff.get("rows") or [])[:top]
    ]


def op_diff_caption(comparison: Comparison) -> str:
    d = comparison.op_diff or {}
    return (
        f"Op by op ({d.get('unit', 'kernels')} per step: A's {d.get('a_steps', 0)} {d.get('a_kind')} step(s), B's "
        f"{d.get('b_steps', 0)} {d.get('b_kind')} step(s); {d.get('changed', 0)} changed, largest time change first)"
    )


def _op_diff_text(comparison: Comparison) -> list[str]:
    rows = op_diff_rows(comparison)
    if not rows:
        return []
    header = ("op", "category", "status", "count/step", "time/step", "B - A")
    table = [header, *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines = ["", op_diff_caption(comparison)]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table]
    return lines


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def markdown_escape(text: object) -> str:
    """Untrusted text shown literally in GitHub Markdown: HTML entities, then Markdown specials escaped."""
    return _MARKDOWN_SPECIALS.sub(r"\\\1", html.escape(plain(_one_line(text)), quote=True))


def comparison_markdown(comparison: Comparison, gates: Sequence[GateResult] = ()) -> str:
    """A Markdown table ready for a PR comment, the sentence under it, then one bullet per gate."""
    lines = [
        f"**Stepscope comparison**: A = {markdown_escape(comparison.label_a)}, "
        f"B = {markdown_escape(comparison.label_b)}",
        "",
        "| metric | A | B | B − A | B / A |",
        "|---|---:|---:|---:|---:|",
    ]
    lines += [
        "| "
        + " | ".join(
            markdown_escape(c) if i != 3 else MARKDOWN_MARK.get(v or "", "") + markdown_escape(c)
            for i, c in enumerate(row)
        )
        + " |"
        for row, v in zip(_rows(comparison), _verdicts(comparison), strict=True)
    ]
    lines += ["", markdown_escape(comparison.sentence)]
    if comparison.warnings:
        lines += ["", "> **Not like for like.**"]
        lines += [f"> - {markdown_escape(w)}" for w in comparison.warnings]
    rows = op_diff_rows(comparison)
    if rows:
        lines += ["", f"**{markdown_escape(op_diff_caption(comparison))}**", ""]
        lines += ["| op | category | status | count / step | time / step | B − A |", "|---|---|---|---:|---:|---:|"]
        lines += ["| " + " | ".join(markdown_escape(cell) for cell in row) + " |" for row in rows]
    if gates:
        failed = sum(not r.ok for r in gates)
        lines += ["", f"**Gates**: {len(gates) - failed} passed, {failed} failed", ""]
        lines += [f"- {'✅' if r.ok else '❌'} `{r.expr.replace('`', '')}`: {markdown_escape(r.detail)}" for r in gates]
    return plain("\n".join(lines) + "\n")
