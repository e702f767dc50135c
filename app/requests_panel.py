"""The requests view on Analyze (issue 41), under the timeline: one lane per request on the steps' clock, a sortable
table of the requests, the request chosen there outlined on the timeline's phase lane, and a step chosen with the
requests it served and what it held.

A served run (or any trace of several requests) has one; a single request does not. Everything shown is the
analysis's request table (analysis.serving.request_list) and steps, arranged by exporters (figures/request_lanes.py,
request_tables.py); the chosen request and step live in session state, keyed by the answer, so the timeline drawn
above this panel reads the choice on the rerun a click makes.
"""

from __future__ import annotations

from collections.abc import MutableMapping

import pandas as pd
import streamlit as st

from stepscope.analysis.request_figures import step_requests
from stepscope.exporters.figures import request_charts, request_lanes
from stepscope.exporters.request_tables import COLUMNS, requests_table, step_composition
from stepscope.exporters.safe_text import for_markdown
from . import tables
from .cache import LoadedTrace

LANES_SHOWN = request_lanes.PAGE  # more requests than this: packed lanes, or a page of them one a lane
TABLE_KEY = "requests_table_{}"  # st.dataframe's selection, per answer
STEP_KEY = "requests_step_{}"
LAYOUT_KEY = "requests_layout_{}"
PAGE_KEY = "requests_page_{}"
PACKED, PAGED = "packed: requests that do not overlap share a lane", "one lane each, a page at a time"


def has_requests(loaded: LoadedTrace) -> bool:
    """Whether the trace has a requests view: a served run, or several requests."""
    table = loaded.analysis.requests
    if table is None or not len(table.rows):
        return False
    return bool(loaded.analysis.summary.served) or len(table.rows) > 1


def chosen_request(state: MutableMapping, loaded: LoadedTrace) -> int | None:
    """The request chosen in the table (its row, read from the table's selection), None when none is."""
    selection = state.get(TABLE_KEY.format(loaded.answer_id[-12:]))
    rows = _selected_rows(selection)
    table = loaded.analysis.requests
    if not rows or table is None or rows[0] >= len(table.rows):
        return None
    return int(table.rows["request"].iloc[rows[0]])


def mark_chosen(overview, state: MutableMapping, loaded: LoadedTrace):
    """The timeline's overview with the chosen request's steps outlined on its phase lane."""
    request = chosen_request(state, loaded) if has_requests(loaded) else None
    if request is None:
        return overview
    rows = loaded.analysis.requests.rows
    steps = list(rows.loc[rows["request"] == request, "steps"].iloc[0])
    return request_lanes.mark_steps(overview, loaded.analysis, steps, f"request {request}'s steps")


def section(loaded: LoadedTrace) -> None:
    if not has_requests(loaded):
        return
    rows = loaded.analysis.requests.rows
    tag = loaded.answer_id[-12:]
    st.subheader(f"Requests ({len(rows):,})")
    st.caption(
        "Each request on the timeline's clock: queued from its arrival (where the API server's trace says it) to "
        "its first step, its prompt's chunks, decoding from its first token, and its last token. Choose a request "
        "in the table to outline its steps on the timeline above; choose a step to list the requests it served."
    )
    if request_charts.has_distributions(rows):
        runs = [(loaded.name, requests_table(loaded.analysis))]
        st.plotly_chart(request_charts.request_distributions(runs), width="stretch", key=f"request_dists_{tag}")
    chosen = chosen_request(st.session_state, loaded)
    part, packed = _page(rows, tag)
    figure = request_lanes.request_lanes_figure(loaded.analysis, part, packed=packed, chosen=chosen)
    st.plotly_chart(figure, width="stretch", key=f"request_lanes_{tag}")
    if loaded.analysis.summary.unknown_steps:
        st.caption(
            f":material/help: {loaded.analysis.summary.unknown_steps} step(s) of unknown kind, drawn as such on the "
            f"steps lane: {request_lanes.UNKNOWN_LEGEND}."
        )
    left, right = st.columns([3, 1])
    with left:
        _table(loaded, tag)
    with right:
        _step_panel(loaded, tag, chosen)


def _page(rows: pd.DataFrame, tag: str) -> tuple[pd.DataFrame, bool]:
    """The requests the lanes draw, and whether packed: all of them one a lane when few, else as chosen."""
    if len(rows) <= LANES_SHOWN:
        return rows, False
    layout = st.radio("Lanes", (PACKED, PAGED), horizontal=True, key=LAYOUT_KEY.format(tag))
    if layout == PACKED:
        return rows, True
    pages = -(-len(rows) // LANES_SHOWN)
    page = st.number_input(f"Page (of {pages}, {LANES_SHOWN} requests each)", 1, pages, 1, key=PAGE_KEY.format(tag))
    first = (int(page) - 1) * LANES_SHOWN
    return rows.iloc[first : first + LANES_SHOWN], False


def _table(loaded: LoadedTrace, tag: str) -> None:
    table = requests_table(loaded.analysis)
    config = {
        column: st.column_config.NumberColumn(header, help=help_text or None, format="localized")
        for column, (header, help_text) in COLUMNS.items()
        if column != "ttft_from"
    }
    config["ttft_from"] = st.column_config.TextColumn(COLUMNS["ttft_from"][0], help=COLUMNS["ttft_from"][1])
    tables.show(
        table,
        positions=("arrival_ms",),
        column_config=config,
        on_select="rerun",
        selection_mode="single-row",
        key=TABLE_KEY.format(tag),
        height=min(36 * (len(table) + 1) + 3, 420),
    )
    st.caption("Click a column's header to sort; choose a row to outline that request's steps on the timeline.")
    st.download_button(  # written when clicked, as components.downloads
        "Requests (CSV)",
        lambda: table.to_csv(index=False),
        "requests.csv",
        "text/csv",
        key=f"requests_csv_{tag}",
        on_click="ignore",
    )


def _step_panel(loaded: LoadedTrace, tag: str, chosen: int | None) -> None:
    steps = loaded.analysis.steps
    rows = loaded.analysis.requests.rows
    if not len(steps):
        return
    key = STEP_KEY.format(tag)
    if key not in st.session_state:  # a chosen request opens on its first step
        first = rows.loc[rows["request"] == chosen, "first_step"].iloc[0] if chosen is not None else 0
        st.session_state[key] = int(min(max(first, 0), len(steps) - 1))
    step = st.number_input("Step", 0, len(steps) - 1, key=key, help="A step's number, as the timeline's hover says")
    served = step_requests(rows, int(step))
    held = step_composition(loaded.analysis, int(step))
    st.markdown(f"**Step {int(step)}** · {for_markdown(held['kind'])}")
    st.markdown(
        "Requests in it: " + (", ".join(str(r) for r in served) if served else "none the trace tells for certain")
    )
    shown = {k: ("unknown" if v is None else v) for k, v in held.items() if k != "kind"}
    tables.show(pd.DataFrame({"": list(shown), "count": [str(v) for v in shown.values()]}), hide_index=True)


def _selected_rows(selection) -> list[int]:
    if selection is None:
        return []
    try:
        return list(selection["selection"]["rows"])
    except (KeyError, TypeError):
        return list(getattr(getattr(selection, "selection", None), "rows", []) or [])
