"""Session-state keys shared between pages, so a page can hand a choice to another, and switching pages."""

from __future__ import annotations

import streamlit as st

ANALYZE_KEY = "analyze_source"  # session state: the source key Analyze shows
COMPARE_KEYS = "compare_sources"  # session state: (key a, key b) Compare shows
PAGES_KEY = "_stepscope_pages"  # session state: this session's st.Page objects (app/pages.py)


def go_to(page: str) -> None:
    """Switch page by its st.Page object, which keeps st.navigation's menu and layout; outside st.navigation (a
    page run on its own, as in tests) just rerun in place. The pages are this session's: a server runs many."""
    target = st.session_state.get(PAGES_KEY, {}).get(page)
    if target is None:
        st.rerun()
    try:
        st.switch_page(target)
    except st.errors.StreamlitAPIException:
        st.rerun()
