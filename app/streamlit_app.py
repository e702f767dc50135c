"""Stepscope's web app: `streamlit run app/streamlit_app.py`. Analyze is the default page."""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
if (_ROOT / "stepscope" / "__init__.py").exists():  # a checkout: `streamlit run` puts app/ on the path, not the repo
    sys.path.insert(0, str(_ROOT))  # (installed, the package is already importable and nothing is added)

import streamlit as st  # noqa: E402

st.set_page_config(page_title="Stepscope", page_icon=":material/timeline:", layout="wide")

from stepscope.app.exposure import remote_runs_allowed, warn_if_exposed  # noqa: E402
from stepscope.app.navigation import PAGE_FILES, register_pages  # noqa: E402

exposed = warn_if_exposed()  # listening beyond 127.0.0.1 is an explicit --server.address: say so
if exposed:
    st.sidebar.warning(exposed)
pages = {
    "analyze": st.Page(PAGE_FILES["analyze"], title="Analyze", icon=":material/monitoring:", default=True),
    "run": st.Page(PAGE_FILES["run"], title="Run", icon=":material/play_arrow:"),
    "compare": st.Page(PAGE_FILES["compare"], title="Compare", icon=":material/compare_arrows:"),
    "ranks": st.Page(PAGE_FILES["ranks"], title="Ranks", icon=":material/view_week:"),
    "fleet": st.Page(PAGE_FILES["fleet"], title="Fleet", icon=":material/dataset:"),
}
if not remote_runs_allowed():  # beyond localhost, runs (GPU, disk, model paths) are the operator's choice
    del pages["run"]
register_pages(pages)
st.navigation(list(pages.values())).run()
