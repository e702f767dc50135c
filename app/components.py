"""Page pieces shared by Analyze and Compare: summary cards, how steps were found, findings, downloads.

Every string that came from a trace goes through app.safe_text before Markdown sees it.
"""

from __future__ import annotations

import json
import math

import streamlit as st

from analysis.compare import summary_value
from app.cache import LoadedTrace
from app.safe_text import for_markdown

# (summary key, card label, unit) in the order the cards appear
SUMMARY_CARDS = (
    ("ttft_ms", "TTFT", "ms"),
    ("itl_p50_ms", "ITL p50", "ms"),
    ("itl_p90_ms", "ITL p90", "ms"),
    ("decode_tokens_per_s", "Decode tokens/s", ""),
    ("decode_steps", "Decode steps", ""),
    ("kernels_per_decode_step", "Kernels / decode step", ""),
    ("launches_per_decode_step", "Launches / decode step", ""),
    ("gpu_busy_pct", "GPU busy", "%"),
    ("gpu_idle_per_decode_step_us", "GPU idle / decode step", "us"),
)
SEVERITY_ICON = {"critical": ":material/error:", "warn": ":material/warning:", "info": ":material/info:"}


def format_value(value: float, unit: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if unit == "us" and abs(value) >= 1000:
        return f"{value / 1000:,.2f} ms"
    if unit == "ms" and abs(value) < 1:
        return f"{value * 1000:,.1f} us"
    text = f"{value:,.2f}" if abs(value) < 100 and value != int(value) else f"{value:,.0f}"
    return f"{text} {unit}".strip() if unit != "%" else f"{text}%"


def summary_cards(summary: dict, label_prefix: str = "") -> None:
    """The nine headline numbers as st.metric cards, two rows."""
    rows = (SUMMARY_CARDS[:5], SUMMARY_CARDS[5:])
    for row in rows:
        for column, (key, label, unit) in zip(st.columns(5), row, strict=False):
            column.metric(label_prefix + label, format_value(summary_value(summary, key), unit), border=True)
    if summary.get("on_gpu") is False:
        st.caption("CPU-only trace: host ops stand in for kernels and 'GPU idle' means no op running.")


def header(loaded: LoadedTrace) -> None:
    report = loaded.report
    st.caption(
        f"{for_markdown(report['format'])} · device {for_markdown(report['device'] or 'unknown')} · "
        f"{report['events']:,} events · {report['requests']} request(s) · content {loaded.sha256[:15]}"
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
        body = f"**{for_markdown(finding.title)}**  \n{for_markdown(finding.detail)}"
        icon = SEVERITY_ICON.get(finding.severity)
        if finding.severity == "critical":
            st.error(body, icon=icon)
        elif finding.severity == "warn":
            st.warning(body, icon=icon)
        else:
            st.info(body, icon=icon)


def file_base(name: str) -> str:
    """A trace's name made safe as the start of a download's file name."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:80] or "trace"


def downloads(loaded: LoadedTrace, key: str) -> None:
    """Steps and gaps as CSV, the summary (CLI contract minus the step list) as JSON."""
    base = file_base(loaded.name)
    summary = {k: v for k, v in loaded.report.items() if k != "steps"}
    left, middle, right = st.columns(3)
    left.download_button("Steps (CSV)", loaded.analysis.steps.to_csv(index=False), f"{base}_steps.csv",
                         "text/csv", key=f"{key}_steps_csv")
    middle.download_button("Gaps (CSV)", loaded.analysis.gaps.to_csv(index=False), f"{base}_gaps.csv",
                           "text/csv", key=f"{key}_gaps_csv")
    right.download_button("Summary (JSON)", json.dumps(summary, indent=1), f"{base}_summary.json",
                          "application/json", key=f"{key}_summary_json")
