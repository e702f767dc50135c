"""Findings first: under the summary cards, the findings that cost the most, each with a button that zooms the
timeline to its evidence; every finding, with what it rests on, one click away.

Where a finding points comes from analysis.findings.finding_range; its cost from the contract (cost_us, cost_pct).
Zooming sets the overview's time range and the steps the kernel detail draws (views/analyze.py reads both)."""

from __future__ import annotations

from collections.abc import MutableMapping

import streamlit as st

from ..analysis.findings import finding_range
from ..analysis.number_format import format_value
from ..exporters.safe_text import for_markdown
from .cache import LoadedTrace

TOP = 3  # findings shown under the cards
ZOOM_KEY = "timeline_zoom"  # session state: {content digest: (lo_ns, hi_ns)} the overview is zoomed to
DETAIL_STEPS = 4  # at most this many steps drawn at kernel level after a zoom
SEVERITY_ICON = {"critical": ":material/error:", "warn": ":material/warning:", "info": ":material/info:"}
SEVERITY_ORDER = {"critical": 0, "warn": 1, "info": 2}


def ordered(loaded: LoadedTrace) -> list[tuple[object, dict]]:
    """(finding, its contract object) pairs, the costliest first (a finding without a cost after those with one,
    by severity)."""
    pairs = list(zip(loaded.analysis.findings, loaded.report["findings"], strict=False))
    return sorted(pairs, key=lambda p: (-(p[1].get("cost_us") or 0.0), SEVERITY_ORDER.get(p[0].severity, 3)))


def cost_text(item: dict) -> str:
    """ "costs 8.37 ms (44% of the steps' time)", "" for a finding without a cost of its own."""
    cost, pct = item.get("cost_us"), item.get("cost_pct")
    if not cost:
        return ""
    share = f" ({format_value(pct, '%')} of the steps' time)" if pct is not None else ""
    return f"costs {format_value(cost, 'us')}{share}"


def _place(loaded: LoadedTrace, finding) -> tuple[int, int] | None:
    anat = loaded.analysis.anatomy
    return finding_range(finding, loaded.analysis.steps, anat.median_step if anat is not None else None)


def _content(loaded: LoadedTrace) -> str:
    """What a zoom is kept for: the trace's content (its clock), whatever settings or model the answer has since
    been read with (the first open of a CPU trace measures the machine, which changes the answer's key)."""
    return loaded.digest or loaded.name


def zoom_to(state: MutableMapping, loaded: LoadedTrace, lo: int, hi: int) -> None:
    """Zoom the overview to [lo, hi] (ns) and draw the steps in it (at most DETAIL_STEPS) at kernel level."""
    state[ZOOM_KEY] = {_content(loaded): (int(lo), int(hi))}
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


def _zoom_button(loaded: LoadedTrace, finding, key: str) -> None:
    place = _place(loaded, finding)
    if place is None:
        return
    st.button(
        "Zoom",
        key=key,
        width="content",
        icon=":material/zoom_in:",
        help="Show this finding's evidence on the timeline: the overview zooms to it and the kernel detail "
        "draws its step(s).",
        on_click=zoom_to,
        args=(st.session_state, loaded, *place),
    )


def top_findings(loaded: LoadedTrace) -> None:
    """The costliest findings, one line each with a Zoom button (the line wraps, the button keeps its width)."""
    pairs = ordered(loaded)
    tag = loaded.answer_id[-10:]
    if not pairs:
        st.caption("No findings for this trace: nothing above the thresholds DESIGN.md lists.")
        return
    for i, (finding, item) in enumerate(pairs[:TOP]):
        row = st.container(horizontal=True, wrap=False, vertical_alignment="center", gap="small")
        cost = cost_text(item)
        row.markdown(
            f"{SEVERITY_ICON.get(finding.severity, '')} **{for_markdown(finding.title)}**"
            + (f" · *{cost}*" if cost else ""),
            width="stretch",
        )
        with row:
            _zoom_button(loaded, finding, f"zoom_top_{i}_{tag}")


def all_findings(loaded: LoadedTrace) -> None:
    """Every finding in full, with what it rests on, folded (under the timeline)."""
    pairs = ordered(loaded)
    if not pairs:
        return
    tag = loaded.answer_id[-10:]
    more = f", {len(pairs) - TOP} more than above" if len(pairs) > TOP else ""
    with st.expander(f"All {len(pairs)} finding(s){more}, with what each rests on", expanded=False):
        for i, (finding, item) in enumerate(pairs):
            alert(finding, item)
            _zoom_button(loaded, finding, f"zoom_all_{i}_{tag}")


def alert(finding, item: dict | None = None) -> None:
    """One finding as an alert box coloured by severity, its cost as the last line."""
    cost = cost_text(item or {"cost_us": getattr(finding, "cost_us", None)})
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
