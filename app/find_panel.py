"""The Find box over the kernel detail (issue 42): a name, or an RE2 regex, searched in every event of the trace
(analysis/event_find.py, the same rows as `stepscope.load(path).find(...)`); "N matches in M steps"; Previous and
Next step the detail to each match in turn (app/detail_window.py); the matches per step and over the whole run;
"Select all matches" makes them the Selection panel's selection. The kernel detail marks the matches and dims the
rest (exporters/figures/timeline_marks.py). Text from the trace and the query are escaped wherever shown.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from stepscope.analysis.event_find import FindQuery, Found, count_line, per_step
from stepscope.analysis.event_window import table_page
from stepscope.analysis.number_format import format_value
from stepscope.analysis.selection import Selection
from stepscope.analysis.user_patterns import MAX_PATTERN_CHARS
from stepscope.exporters.figures import timeline_marks
from stepscope.exporters.safe_text import for_markdown
from . import tables
from .detail_window import show_event
from .workbench import Bench

FIND_HELP = (
    "Every event whose name holds this text (case ignored), in the whole trace: kernels, host ops, runtime calls, "
    "annotations. With regex on, an RE2 pattern (linear time on any name; (?i) ignores case)."
)


@dataclass(frozen=True)
class FindState:
    found: Found
    at: int | None  # the match stepped to (a row of found.frame), None before Previous or Next


def find_box(bench: Bench) -> FindState | None:
    """The Find row: the query, its count, Previous / Next / Select all; the matches per step folded below."""
    left, right = st.columns([6, 1], vertical_alignment="bottom")
    text = left.text_input(
        "Find in event names",
        key=bench.key("find_text"),
        placeholder="part of a name: allreduce, gemm, cudaGraphLaunch",
        max_chars=MAX_PATTERN_CHARS,
        help=FIND_HELP,
    )
    regex = right.toggle("regex", key=bench.key("find_regex"))
    if not text:
        return None
    query = FindQuery(text, regex=regex)
    try:
        found = bench.found(query)
    except ValueError as exc:
        st.error(for_markdown(exc))
        return None
    memo = bench.state.get(bench.key("find_at"))
    at = memo[1] if memo is not None and memo[0] == query and memo[1] < len(found.frame) else None
    _count_row(bench, found, at)
    _matches_section(bench, found, at)
    return FindState(found, at)


def _count_row(bench: Bench, found: Found, at: int | None) -> None:
    row = st.container(horizontal=True, vertical_alignment="center", gap="small", key=bench.key("find_row"))
    where = f" · match {at + 1:,}" if at is not None else ""
    row.markdown(f"**{count_line(found.frame)}**{where}", width="content")
    empty = found.frame.empty
    tag = bench.tag
    for label, icon, delta in (("Previous", "arrow_back", -1), ("Next", "arrow_forward", 1)):
        row.button(
            label,
            key=f"find_{label.lower()}_{tag}",
            icon=f":material/{icon}:",
            disabled=empty,
            on_click=_step,
            args=(bench, found, delta),
        )
    row.button(
        "Select all matches",
        key=f"find_all_{tag}",
        icon=":material/select_all:",
        disabled=empty,
        on_click=_select_all,
        args=(bench, found),
        help="Make every match the selection: the panel below sums them by name and per step.",
    )


def _step(bench: Bench, found: Found, delta: int) -> None:
    """Previous / Next: the match before or after the one shown (wrapping), drawn in the detail."""
    n = len(found.frame)
    if n == 0:
        return
    memo = bench.state.get(bench.key("find_at"))
    at = memo[1] if memo is not None and memo[0] == found.query else (-1 if delta > 0 else 0)
    at = (at + delta) % n
    bench.state[bench.key("find_at")] = (found.query, at)
    events = bench.loaded.timeline.events
    row = int(found.rows[at])
    start = int(events["ts"].iloc[row])
    show_event(bench, start, start + int(events["dur"].iloc[row]), int(found.frame["step"].iloc[at]))


def _select_all(bench: Bench, found: Found) -> None:
    n = len(found.frame)
    label = f"all {n:,} match{'es' if n != 1 else ''} of {found.query.describe()}"
    bench.select(Selection.of_matches(found.query, label=label))


def focus_ms(bench: Bench, state: FindState | None) -> tuple[float, float] | None:
    """The match stepped to, as (start, end) in ms from the trace's start, for the detail to zoom to."""
    if state is None or state.at is None:
        return None
    row = state.found.frame.iloc[state.at]
    return float(row["start_ms"]), float(row["start_ms"] + row["dur_us"] / 1e3)


def _matches_section(bench: Bench, found: Found, at: int | None) -> None:
    """Where the matches are: over the whole run (a strip of counts) and per step (count and time)."""
    frame = found.frame
    if frame.empty:
        return
    table = per_step(frame, bench.loaded.analysis.steps)
    rows = f"{len(table):,} row{'s' if len(table) != 1 else ''}"
    with st.expander(f"Matches per step ({rows}) and over the whole run"):
        span_ms = bench.ms(int(bench.loaded.timeline.events["ts"].to_numpy()[-1]))
        focus = float(frame["start_ms"].iloc[at]) if at is not None else None
        strip = timeline_marks.match_strip(frame["start_ms"].to_numpy(), frame["dur_us"].to_numpy(), span_ms, focus)
        st.plotly_chart(strip, width="stretch", key=bench.key("find_strip"), config={"displayModeBar": False})
        shown = table.assign(step=table["step"].astype("Int64").mask(table["step"] < 0))
        page = table_page(shown.rename(columns={"total_us": "time_us", "first_ms": "first start_ms"}))  # a place
        tables.show(
            page.rows,
            column_config={
                "step": st.column_config.NumberColumn("step", help="empty: outside every step"),
                "time_us": st.column_config.NumberColumn("time (us)", format="localized"),
                "first start_ms": st.column_config.NumberColumn("first match (ms from trace start)"),
            },
            height=min(35 * (len(page.rows) + 1) + 3, 320),
        )
        total = format_value(frame["dur_us"].sum(), "us")
        st.caption(
            f"{len(frame):,} matches, {total} in all. A device kernel's step is the step that launched it (as the "
            "steps count kernels); anything else's is the step its start lies in."
            + (f" The first {len(page.rows):,} of {page.total:,} rows." if not page.complete else "")
        )
