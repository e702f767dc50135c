"""Page pieces shared by Analyze and Compare: summary cards, how steps were found, findings, downloads.

Every string that came from a trace goes through exporters.safe_text before Markdown sees it.
"""

from __future__ import annotations

import json

import streamlit as st

from ..analysis.metrics import HEADLINE, card_metrics, format_value
from ..analysis.summary import Summary
from ..exporters.safe_text import for_markdown
from . import tables
from .cache import LoadedTrace

SUMMARY_CARDS = HEADLINE  # the registry's headline metrics, in the order the cards appear
SEVERITY_ICON = {"critical": ":material/error:", "warn": ":material/warning:", "info": ":material/info:"}


def summary_cards(summary: Summary, label_prefix: str = "") -> None:
    """The headline metrics as st.metric cards, rows of five (a stand-in over the main step kind where the
    trace has no decode steps: analysis.metrics.card_metrics)."""
    cards = card_metrics(summary)
    for start in range(0, len(cards), 5):
        row = cards[start : start + 5]
        for column, (m, label) in zip(st.columns(5), row, strict=False):
            column.metric(label_prefix + label, m.format(m.value(summary)), border=True)
    if not summary.on_gpu:
        st.caption("CPU-only trace: host ops stand in for kernels and 'GPU idle' means no op running.")


def header(loaded: LoadedTrace) -> None:
    report = loaded.report
    st.caption(
        f"{for_markdown(report['format'])} · device {for_markdown(report['device'] or 'unknown')} · "
        f"{report['events']:,} events · {report['requests']} request(s) · content {(loaded.digest or '')[:15]}"
    )


def segmentation_box(loaded: LoadedTrace) -> None:
    seg = loaded.analysis.segmentation
    text = f"Steps found by **{for_markdown(seg.method)}**, confidence {seg.confidence:.2f}."
    if seg.method == "none":
        st.info(text + " No generation steps: the timeline below still shows the whole trace.")
    elif seg.confidence < 0.6 or seg.warnings:
        st.warning(text)
    else:
        st.success(text)
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
    """Each finding as an alert box coloured by severity."""
    for finding in findings:
        body = f"**{for_markdown(finding.title)}**  \n{for_markdown(finding.detail)}" + _cost_line(finding)
        icon = SEVERITY_ICON.get(finding.severity)
        if finding.severity == "critical":
            st.error(body, icon=icon)
        elif finding.severity == "warn":
            st.warning(body, icon=icon)
        else:
            st.info(body, icon=icon)


def _cost_line(finding) -> str:
    """The time the finding accounts for (analysis: Finding.cost_us), as the findings' last line."""
    cost = getattr(finding, "cost_us", None)
    return f"  \n*Costs {format_value(cost, 'us')} of the trace's step time.*" if cost else ""


def file_base(name: str) -> str:
    """A trace's name made safe as the start of a download's file name."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:80] or "trace"


def downloads(loaded: LoadedTrace, key: str) -> None:
    """Steps and gaps as CSV, the summary (CLI contract minus the step list) as JSON."""
    base = file_base(loaded.name)
    summary = {k: v for k, v in loaded.report.items() if k != "steps"}
    left, middle, right = st.columns(3)
    left.download_button(
        "Steps (CSV)",
        tables.steps_table(loaded.analysis).to_csv(index=False),
        f"{base}_steps.csv",
        "text/csv",
        key=f"{key}_steps_csv",
    )
    middle.download_button(
        "Gaps (CSV)",
        tables.gaps_table(loaded.analysis).to_csv(index=False),
        f"{base}_gaps.csv",
        "text/csv",
        key=f"{key}_gaps_csv",
    )
    right.download_button(
        "Summary (JSON)",
        json.dumps(summary, indent=1),
        f"{base}_summary.json",
        "application/json",
        key=f"{key}_summary_json",
    )
