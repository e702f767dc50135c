"""Page files and session-state keys shared between pages, so a page can hand a choice to another."""

from __future__ import annotations

import streamlit as st

PAGE_FILES = {
    "analyze": "views/analyze.py",
    "run": "views/run.py",
    "compare": "views/compare.py",
    "ranks": "views/ranks.py",
    "fleet": "views/fleet.py",
}
_REGISTERED: dict[str, object] = {}  # the st.Page objects of the running app, set by streamlit_app.py
ANALYZE_KEY = "analyze_source"  # session state: the source key Analyze shows
COMPARE_KEYS = "compare_sources"  # session state: (key a, key b) Compare shows


def register_pages(pages: dict[str, object]) -> None:
    """Remember the app's st.Page objects: switching by page object keeps st.navigation's menu and layout."""
    _REGISTERED.clear()
    _REGISTERED.update(pages)


def go_to(page: str) -> None:
    """Switch page; outside st.navigation (a page run on its own, as in tests) just rerun in place."""
    try:
        st.switch_page(_REGISTERED.get(page) or PAGE_FILES[page])
    except st.errors.StreamlitAPIException:
        st.rerun()
