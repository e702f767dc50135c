"""The app's look beyond Streamlit's theme: compact summary cards that never cut a value, a first screen that has
room for the timeline at 1280x720, and a focus ring on the sidebar's links that can be seen.

One stylesheet, injected once per page run (st.html with only a <style> takes no room on the page). It names
Streamlit's own test ids, so it is checked by the browser test (tests/test_browser_pages.py) on every page.
"""

from __future__ import annotations

import streamlit as st

# a change that is better green, worse red: Compare's metric table and the Selection panel's B - A diff
VERDICT_COLOR = {"better": "color: #2b8a3e; font-weight: 600", "worse": "color: #c92a2a; font-weight: 600"}

CSS = """
<style>
/* the first screen: the content starts just under Streamlit's header bar (3.75rem), the title is small */
[data-testid="stMainBlockContainer"], .block-container {
  padding-top: 3.6rem; padding-bottom: 3rem; padding-left: 1.5rem; padding-right: 1.5rem;
}
[data-testid="stMainBlockContainer"] h1 { padding-top: 0; padding-bottom: .1rem; font-size: 1.6rem; }
/* summary cards: compact; the label wraps between words (never inside one) instead of being cut */
[data-testid="stMetric"] { padding: .3rem .5rem .35rem .55rem; }
[data-testid="stMetricLabel"], [data-testid="stMetricLabel"] * {
  white-space: normal !important; overflow: visible !important; text-overflow: clip !important;
  word-break: normal !important; overflow-wrap: normal !important; hyphens: none;
  line-height: 1.15; font-size: .8rem;
}
[data-testid="stMetricValue"] { font-size: 1.3rem; line-height: 1.25; white-space: nowrap; }
[data-testid="stMetricValue"] * { overflow: visible !important; text-overflow: clip !important; }
/* the top findings: one line each, cut with an ellipsis (the whole text is in "All findings"), small buttons */
.st-key-top_findings p { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; margin: 0; }
.st-key-top_findings button { min-height: 1.7rem; padding: 0 .6rem; }
.st-key-summary_cards [data-testid="stPopover"] button { min-height: 2.2rem; }
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
