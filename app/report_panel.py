"""The HTML report as a download on Analyze and Compare, built only when asked (like the Perfetto export).

Building takes a fraction of a second but the file is ~5 MB: making it on every rerun would send those bytes
to the browser each time, so a button asks for it first, and the bytes are cached per trace (pair).
"""

from __future__ import annotations

import streamlit as st

from stepscope.analysis.compare import Comparison
from stepscope.exporters.report_html import build_report
from .cache import LoadedTrace
from .components import file_base

READY_KEY = "html_report_ready"  # session state: {cache key of each report asked for}


@st.cache_resource(max_entries=4, show_spinner=False)
def report_bytes(key: str, _a: LoadedTrace, _b: LoadedTrace | None, _comparison: Comparison | None) -> bytes:
    """The report's bytes, keyed by the traces' hashes (cache_resource: no copy per rerun)."""
    return build_report(_a, _b, _comparison).encode()


@st.fragment
def report_download(a: LoadedTrace, b: LoadedTrace | None = None, comparison: Comparison | None = None) -> None:
    """A button that makes the report, then its download button."""
    key = f"{a.name}:{a.answer_id}" if b is None else f"{a.name}:{a.answer_id}:{b.name}:{b.answer_id}"
    what = "this trace" if b is None else "this comparison"
    if key not in st.session_state.setdefault(READY_KEY, set()):
        st.button(
            f"Prepare HTML report of {what}",
            key=f"report_prepare_{key}",
            help="One self-contained HTML file (about 5 MB, at most 8): opens offline in any browser, no Python.",
            on_click=lambda: st.session_state[READY_KEY].add(key),
        )
        return
    with st.spinner("Building the report..."):
        data = report_bytes(key, a, b, comparison)
    name = file_base(a.name) if b is None else f"{file_base(a.name)}_vs_{file_base(b.name)}"
    st.download_button(
        f"Download HTML report ({len(data) / 1e6:.1f} MB)",
        data,
        f"{name}_report.html",
        "text/html",
        key=f"report_download_{key}",
        on_click="ignore",
    )
    st.caption(
        "Summary cards, step overview, per-step charts, gaps by cause and findings"
        + ("" if b is None else ", with the comparison")
        + "; plotly.js is inside, nothing loads from the web."
    )
