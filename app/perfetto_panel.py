"""The trace as a Perfetto .pftrace (kernels, launches, steps and gaps on their own tracks), made only on request.

The export writes about 30k events/s, so a big trace would hold up every page load: the bytes are
made when the user asks (inside a fragment, so only this part reruns) and cached per trace.
"""

from __future__ import annotations

import streamlit as st

from stepscope.exporters.perfetto_trace import perfetto_trace_bytes
from stepscope.exporters.perfetto_ui import open_in_perfetto_html
from stepscope.exporters.safe_text import for_markdown
from .cache import LoadedTrace
from .components import file_base

EXPORT_EVENTS_PER_S = 30_000  # rough speed of exporters.perfetto_trace, for the button's time estimate
READY_KEY = "perfetto_ready"  # session state: {sha256 of the traces whose export was asked for}
PERFETTO_BUTTON_HEIGHT = 60


@st.cache_resource(max_entries=2, show_spinner=False)
def export_bytes(sha256: str, _loaded: LoadedTrace) -> bytes:
    """The .pftrace bytes of one trace (cache_resource: bytes are immutable, no copy per rerun)."""
    return perfetto_trace_bytes(_loaded.timeline, _loaded.analysis)


def _estimate(events: int) -> str:
    seconds = events / EXPORT_EVENTS_PER_S
    return "under a second" if seconds < 1 else f"about {seconds:,.0f} s"


def _embed(html: str) -> None:
    """The button's HTML (ours: the trace rides as base64 data, no trace text as markup) in an iframe."""
    if hasattr(st, "iframe"):  # Streamlit 1.5x+; st.components.v1.html is on its way out
        st.iframe(html, height=PERFETTO_BUTTON_HEIGHT)
    else:
        import streamlit.components.v1 as st_components

        st_components.html(html, height=PERFETTO_BUTTON_HEIGHT)


@st.fragment
def perfetto_downloads(loaded: LoadedTrace) -> None:
    """A button that makes the export, then the download and the Open in Perfetto UI button."""
    events = len(loaded.timeline.events)
    if loaded.answer_id not in st.session_state.setdefault(READY_KEY, set()):
        st.button(
            f"Prepare for Perfetto ({events:,} events, {_estimate(events)})",
            key=f"perfetto_prepare_{loaded.answer_id}",
            help="Writes the trace with Stepscope's phases and gaps as a Perfetto protobuf trace (.pftrace).",
            on_click=lambda: st.session_state[READY_KEY].add(loaded.answer_id),  # before the rerun: no stale button
        )
        st.caption("Perfetto (ui.perfetto.dev) shows every kernel, launch, step and idle gap on its own track.")
        return
    with st.spinner(f"Writing {events:,} events for Perfetto..."):
        data = export_bytes(loaded.answer_id, loaded)
    left, right = st.columns([1, 2])
    left.download_button(
        "Download for Perfetto (.pftrace)",
        data,
        f"{file_base(loaded.name)}.pftrace",
        "application/octet-stream",
        key=f"perfetto_download_{loaded.answer_id}",
        on_click="ignore",
    )
    left.caption(f"{len(data) / 2**20:,.1f} MB, {events:,} trace events plus the steps and gaps.")
    try:
        html = open_in_perfetto_html(data, title=f"Stepscope: {loaded.name}")
    except ValueError as exc:
        right.info(for_markdown(exc))
        return
    with right:
        _embed(html)
        st.caption(
            "Open in Perfetto UI opens ui.perfetto.dev in a new tab and hands it the trace from your browser "
            "(nothing goes to a server). It needs a browser that can reach ui.perfetto.dev and allows the pop-up; "
            "otherwise download the .pftrace and open it there."
        )
