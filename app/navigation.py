"""Page files and session-state keys shared between pages, so a page can hand a choice to another."""

from __future__ import annotations

import streamlit as st

PAGE_FILES = {"analyze": "pages/analyze.py", "run": "pages/run.py", "compare": "pages/compare.py"}
ANALYZE_KEY = "analyze_source"  # session state: the source key Analyze shows
COMPARE_KEYS = "compare_sources"  # session state: (key a, key b) Compare shows


def go_to(page: str) -> None:
    """Switch page; outside st.navigation (a page run on its own, as in tests) just rerun in place."""
    try:
        st.switch_page(PAGE_FILES[page])
    except st.errors.StreamlitAPIException:
        st.rerun()
