"""Findings first: under the summary cards, the findings that could save the most, each with a button that zooms the
timeline to its evidence, then the descriptive ones as lines of context; every finding, with what it rests on, one
click away.

The order is the analysis's own (analysis.model.ranked: critical, warn, info, each by saving), the JSON's order.
Where a finding points comes from analysis.findings.finding_range; its saving from the contract (saving_us,
cost_pct). Zooming sets the overview's time range and the steps the kernel detail draws (views/analyze.py reads
both)."""

from __future__ import annotations

from collections.abc import MutableMapping

import streamlit as st

from stepscope.analysis.findings import finding_range
from stepscope.analysis.report import saving_text
from stepscope.exporters.safe_text import for_markdown
from .cache import LoadedTrace

TOP = 3  # findings shown under the cards
ZOOM_KEY = "timeline_zoom"  # session state: {content digest: (lo_ns, hi_ns)} the overview is zoomed to
DETAIL_STEPS = 4  # at most this many steps drawn at kernel level after a zoom
SEVERITY_ICON = {"critical": ":material/error:", "warn": ":material/warning:", "info": ":material/info:"}


def ordered(loaded: LoadedTrace) -> list[tuple[object, dict]]:
    """(finding, its contract object) pairs in the JSON's order (analysis.model.ranked)."""
    return list(zip(loaded.analysis.findings, loaded.report["findings"], strict=False))


def cost_text(item: dict) -> str:
    """ "could save up to 8.37 ms (44% of the steps' time)" (analysis.report.saving_text), "" for a finding with
    nothing to win (a description of the run: its time is not a saving)."""
    return saving_text(item)


def _place(loaded: LoadedTrace, finding) -> tuple[int, int] | None:
    anat = loaded.analysis.anatomy
    median = anat.median_step if anat is not None else None
    return finding_range(finding, loaded.analysis.steps, median, loaded.analysis.gaps)


def _content(loaded: LoadedTrace) -> str:
    """What a zoom is kept for: the trace's content (its clock), whatever settings or model the answer has since
    been read with (the first open of a CPU trace measures the machine, which changes the answer's key)."""
    return loaded.digest or loaded.name


def zoom_to(state: MutableMapping, loaded: LoadedTrace, lo: int, hi: int, label: str = "evidence") -> None:
    """Zoom the overview to [lo, hi] (ns), the finding's exact evidence, outlined on the overview and the detail
    (`label` beside it), and draw the steps in it (at most DETAIL_STEPS) at kernel level."""
    state[ZOOM_KEY] = {_content(loaded): (int(lo), int(hi), label)}
    steps = loaded.analysis.steps
    if len(steps) >= 2:
        starts, ends = steps["start_ns"].to_numpy(), steps["end_ns"].to_numpy()
        inside = [i for i in range(len(steps)) if ends[i] > lo and starts[i] < hi] or [0]
        first = inside[0]
        state[f"detail_steps_{loaded.answer_id}"] = (first, min(inside[-1], first + DETAIL_STEPS - 1))
    elif not len(steps):
        origin = loaded.analysis.time_origin_ns
        state[f"detail_ms_{loaded.answer_id}"] = ((lo - origin) / 1e6, (hi - origin) / 1e6)


def zoomed_range_ms(state: MutableMapping, loaded: LoadedTrace) -> tuple[float, float] | None:
    """The overview's x range (ms from the trace's start) a Zoom asked for, a little wider than the evidence."""
    zoom = (state.get(ZOOM_KEY) or {}).get(_content(loaded))
    if zoom is None:
        return None
    origin = loaded.analysis.time_origin_ns
    lo, hi = (zoom[0] - origin) / 1e6, (zoom[1] - origin) / 1e6
    pad = max((hi - lo) * 0.15, 1e-3)
    return lo - pad, hi + pad


def evidence_ms(state: MutableMapping, loaded: LoadedTrace) -> tuple[float, float, str] | None:
    """The evidence a Zoom outlines: (start, end) in ms from the trace's start and its label."""
    zoom = (state.get(ZOOM_KEY) or {}).get(_content(loaded))
    if zoom is None:
        return None
    origin = loaded.analysis.time_origin_ns
    return (zoom[0] - origin) / 1e6, (zoom[1] - origin) / 1e6, zoom[2]


def _zoom_button(loaded: LoadedTrace, finding, key: str) -> None:
    place = _place(loaded, finding)
    if place is None:
        return
    st.button(
        "Zoom",
        key=key,
        width="content",
        icon=":material/zoom_in:",
        help="Show this finding's evidence on the timeline: the overview zooms to its exact span (outlined; drag "
        "the brush under it to look around) and the kernel detail draws its step(s).",
        on_click=zoom_to,
        args=(st.session_state, loaded, *place, f"evidence: {finding.id}"),
    )


def top_findings(loaded: LoadedTrace) -> None:
    """The first findings that say what to change, one compact line each (cut with an ellipsis, whole on hover and
    in "All findings" below) with a Zoom button: they stay above the timeline on a 1280x720 screen (issue 43). The
    descriptive findings are lines of context under the timeline (context_lines)."""
    pairs = ordered(loaded)
    tag = loaded.answer_id[-10:]
    actionable = [p for p in pairs if not p[0].context]
    if not actionable:
        st.caption("No findings that say what to change: nothing above the thresholds DESIGN.md lists.")
    box = st.container(key="top_findings", gap=None)
    for i, (finding, item) in enumerate(actionable[:TOP]):
        row = box.container(horizontal=True, wrap=False, vertical_alignment="center", gap="small")
        cost = cost_text(item)
        row.markdown(
            f"{SEVERITY_ICON.get(finding.severity, '')} **{for_markdown(finding.title)}**"
            + (f" · *{cost}*" if cost else ""),
            width="stretch",
        )
        with row:
            _zoom_button(loaded, finding, f"zoom_top_{i}_{tag}")


def context_lines(pairs: list[tuple[object, dict]]) -> None:
    """The descriptive findings (information with nothing to win: a phase's share, a dominant category), each one
    line of context under the findings, without a cost."""
    for finding, _ in pairs:
        if finding.context:
            st.caption(f":material/info: Context: {for_markdown(finding.title)}")


def all_findings(loaded: LoadedTrace) -> None:
    """Every finding in full, with what it rests on, folded (under the timeline)."""
    pairs = ordered(loaded)
    if not pairs:
        return
    tag = loaded.answer_id[-10:]
    with st.expander(f"All {len(pairs)} finding(s) and context, with what each rests on", expanded=False):
        for i, (finding, item) in enumerate(pairs):
            alert(finding, item)
            _zoom_button(loaded, finding, f"zoom_all_{i}_{tag}")


def alert(finding, item: dict | None = None) -> None:
    """One finding as an alert box coloured by severity, what it could save as the last line; a descriptive one
    (context) as plain text: it says what the run is, not what to change."""
    if getattr(finding, "context", False):
        st.markdown(f":material/info: **Context: {for_markdown(finding.title)}**  \n{for_markdown(finding.detail)}")
        return
    cost = cost_text(item or {"saving_us": getattr(finding, "saving_us", None)})
    body = f"**{for_markdown(finding.title)}**  \n{for_markdown(finding.detail)}"
    if cost:
        body += f"  \n*{cost[:1].upper()}{cost[1:]}.*"
    icon = SEVERITY_ICON.get(finding.severity)
    if finding.severity == "critical":
        st.error(body, icon=icon)
    elif finding.severity == "warn":
        st.warning(body, icon=icon)
    else:
        st.info(body, icon=icon)
