"""The app's look beyond Streamlit's theme: compact summary cards that never cut a value, a first screen that has
room for the timeline at 1280x720, and a focus ring on the sidebar's links that can be seen.

One stylesheet, injected once per page run (st.html with only a <style> takes no room on the page). It names
Streamlit's own test ids, so it is checked by the browser test (tests/test_browser_pages.py) on every page.
"""

from __future__ import annotations

import streamlit as st

CSS = """
<style>
/* the first screen: less blank space above the page's content */
[data-testid="stMainBlockContainer"], .block-container { padding-top: 2.2rem; padding-bottom: 3rem; }
[data-testid="stMainBlockContainer"] h1 { padding-top: 0; padding-bottom: .2rem; font-size: 1.9rem; }
/* summary cards: compact, and the label wraps instead of being cut */
[data-testid="stMetric"] { padding: .35rem .6rem .45rem .6rem; }
[data-testid="stMetricLabel"], [data-testid="stMetricLabel"] * {
  white-space: normal !important; overflow: visible !important; text-overflow: clip !important;
  line-height: 1.15; font-size: .8rem;
}
[data-testid="stMetricValue"] { font-size: 1.45rem; line-height: 1.25; }
[data-testid="stMetricValue"] * { overflow: visible !important; text-overflow: clip !important; }
/* a visible focus ring on the sidebar's page links and on buttons reached by the keyboard */
[data-testid="stSidebarNav"] a:focus-visible, [data-testid="stSidebarNavLink"]:focus-visible,
button:focus-visible {
  outline: 3px solid #1c7ed6 !important; outline-offset: 2px; border-radius: 6px;
}
</style>
"""


def apply() -> None:
    """Inject the stylesheet (once per run: Streamlit keeps it in the page's event container)."""
    st.html(CSS)
