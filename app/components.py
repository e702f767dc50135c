"""Page pieces shared by Analyze and Compare: summary cards, how steps were found, findings, downloads.

Every string that came from a trace goes through exporters.safe_text before Markdown sees it.
"""

from __future__ import annotations

import json

import streamlit as st

from stepscope.analysis.metrics import HEADLINE, card_help, card_metrics, card_text, unknown_reason
from stepscope.analysis.number_format import format_count
from stepscope.analysis.step_figures import unknown_tokens_reason
from stepscope.analysis.summary import Summary
from stepscope.exporters.safe_text import for_markdown
from . import tables
from .cache import LoadedTrace
from .findings_panel import alert

SUMMARY_CARDS = HEADLINE  # the registry's headline metrics, in the order the cards appear
CARD_WIDTH_PX = 138  # the widest compact value ("1.67k tok/s") and a two-line label fit
RANGE_EXTRA_PX = 40  # a card whose value is a range ("44.3–133 tok/s", speculative decoding) is this much wider
NAME_EXTRA_PX = 110  # a card whose value is a name (analysis.metrics.CARD_NAME_CHARS of a kernel's), this much


FIRST_ROW_CARDS = 5  # the essential cards on the first screen: one row at 1280 px beside the sidebar (issue 43)


def summary_cards(summary: Summary, label_prefix: str = "", first_row: int | None = None) -> None:
    """The headline metrics as st.metric cards of one width that wrap onto as many rows as the page needs (at
    1280 px six a row), values compact ("1.67k tok/s": analysis.number_format) so that none is cut; a
    stand-in over the main step kind where the trace has no decode steps, CPU wording on a CPU-only trace
    (analysis.metrics.card_metrics, whose order puts the essential cards of the trace's kind first). `first_row`:
    only that many in the row, the rest and the lines that explain them behind "More figures" (the Analyze page's
    first screen, where the timeline must fit at 1280x720)."""
    cards = card_metrics(summary)
    row = st.container(horizontal=True, wrap=True, gap="small", vertical_alignment="center", key="summary_cards")
    shown = cards if first_row is None else cards[:first_row]
    for m, label in shown:
        _card(row, m, label_prefix + label, summary)
    if first_row is None:
        unknown_lines(summary)
        basis_line(summary)
        return
    with row.popover(f"More figures ({len(cards) - len(shown)})" if len(cards) > len(shown) else "More"):
        more = st.container(horizontal=True, wrap=True, gap="small")
        for m, label in cards[len(shown) :]:
            _card(more, m, label_prefix + label, summary)
        unknown_lines(summary)
        basis_line(summary)


def _card(row, m, label: str, summary: Summary) -> None:
    why = unknown_reason(m, summary)  # a served run's figure that is null, with why (analysis.request_figures)
    text = card_text(m, summary)  # "unknown" where why gives a reason
    helptext = for_markdown(card_help(m, summary)) if m.text_item else card_help(m, summary)  # a kernel's name
    row.metric(
        label,
        text,
        border=True,
        help=helptext + (f": {for_markdown(why)}" if why else ""),
        # a range ("44.3–133 tok/s") or a name (the top kernel) is longer than a number
        width=CARD_WIDTH_PX + (RANGE_EXTRA_PX if "–" in text else NAME_EXTRA_PX if m.text_item else 0),
    )


def unknown_lines(summary: Summary) -> None:
    """Under a served run's cards, each figure that is unknown with its reason and what to record next time."""
    seen = set()
    for m, label in card_metrics(summary):
        why = unknown_reason(m, summary)
        if why and why not in seen:
            seen.add(why)
            st.caption(f":material/help: {label} unknown: {for_markdown(why)}.")


def basis_line(summary: Summary) -> None:
    """Under the cards, what the per-token figures rest on: the batch's source, or, when the trace does not say the
    batch, that they are unknown and what would make them known (the reason is the analysis's warning)."""
    if summary.step_kind is None:
        return
    if summary.batch_source:
        st.caption(f"Tokens per step from {for_markdown(summary.batch_source)}.")
    elif summary.tokens_per_step is None:
        reason = unknown_tokens_reason(summary.step_kind, summary.tokens_per_step) or ""
        st.caption(f":material/help: Tokens per step unknown: {for_markdown(reason)}.")


def cpu_note(summary: Summary) -> None:
    """What the cards' words mean on a CPU-only trace (nothing on a GPU trace)."""
    if not summary.on_gpu:
        st.caption("CPU-only trace: host ops stand in for kernels; busy means some op runs, idle that none does.")


def header(loaded: LoadedTrace) -> None:
    """One line of what the trace is: format, device (and where it was read), engine, events, requests."""
    report = loaded.report
    device = report["device"] or ("GPU not named in the trace" if report.get("on_gpu", True) else "CPU")
    engine = f" · {report['engine']}" if report.get("engine") else ""
    st.caption(
        f"**{for_markdown(loaded.name)}** · {for_markdown(report['format'])} · {for_markdown(device)}"
        f"{for_markdown(engine)} · {format_count(report['events'])} events · {report['requests']} request(s)"
    )


def segmentation_box(loaded: LoadedTrace) -> None:
    """How the steps were found, in one line (the evidence folded under it); a warning box when unsure."""
    seg = loaded.analysis.segmentation
    text = f"Steps found by **{for_markdown(seg.method)}**, confidence {seg.confidence:.2f}"
    if seg.method == "none":
        st.info(text + ". No generation steps: the timeline below still shows the whole trace.")
    elif seg.confidence < 0.6 or seg.warnings:
        st.warning(text + ".")
    else:
        evidence = "; ".join(seg.evidence)
        st.caption(text + (f" · evidence: {for_markdown(evidence)}" if evidence else "") + ".")
        return
    for line in seg.evidence:
        st.markdown(f"- evidence: {for_markdown(line)}")
    for warning in seg.warnings:
        st.markdown(f"- {for_markdown(warning)}")


def findings_list(loaded: LoadedTrace) -> None:
    findings = loaded.analysis.findings
    if not findings:
        st.write("No findings for this trace.")
    finding_alerts(findings)


def finding_alerts(findings) -> None:
    """Each finding as an alert box coloured by severity, in the analysis's order (analysis.model.ranked)."""
    for finding in findings:
        alert(finding)


def file_base(name: str) -> str:
    """A trace's name made safe as the start of a download's file name."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:80] or "trace"


def downloads(loaded: LoadedTrace, key: str) -> None:
    """Steps and gaps as CSV, the summary (CLI contract minus the step list) as JSON. Each file is written when its
    button is clicked (Streamlit calls the function then, off the script's thread), not on every run of the page:
    the CSVs alone took a tenth of the sample's page script, and grow with the steps and gaps."""
    base = file_base(loaded.name)
    analysis, report = loaded.analysis, loaded.report
    if loaded.digest:  # which bytes these files come from (the cache's key), out of the first screen
        st.caption(f"{for_markdown(loaded.name)}: content {loaded.digest[:15]} (sha256 of the file's bytes)")
    left, middle, right = st.columns(3)
    files = (
        (left, "Steps (CSV)", lambda: tables.steps_table(analysis).to_csv(index=False), "steps.csv", "text/csv"),
        (middle, "Gaps (CSV)", lambda: tables.gaps_table(analysis).to_csv(index=False), "gaps.csv", "text/csv"),
        (right, "Summary (JSON)", lambda: summary_json(report), "summary.json", "application/json"),
    )
    for column, label, data, name, mime in files:
        column.download_button(
            label, data, f"{base}_{name}", mime, key=f"{key}_{name.replace('.', '_')}", on_click="ignore"
        )


def summary_json(report: dict) -> str:
    """The summary file: the CLI's contract without the step list."""
    return json.dumps({k: v for k, v in report.items() if k != "steps"}, indent=1)
