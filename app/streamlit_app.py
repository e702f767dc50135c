"""Stepscope's web app: `streamlit run app/streamlit_app.py`. Analyze is the default page."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `streamlit run` puts app/ first, not the repo

import streamlit as st

st.set_page_config(page_title="Stepscope", page_icon=":material/timeline:", layout="wide")

pages = [
    st.Page("pages/analyze.py", title="Analyze", icon=":material/monitoring:", default=True),
    st.Page("pages/run.py", title="Run", icon=":material/play_arrow:"),
    st.Page("pages/compare.py", title="Compare", icon=":material/compare_arrows:"),
]
st.navigation(pages).run()
