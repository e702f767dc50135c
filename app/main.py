"""The app's frame: page config, the exposure warning, and the pages (Run only where runs are allowed)."""

from __future__ import annotations

import streamlit as st

from .exposure import remote_runs_allowed, warn_if_exposed
from .pages import app_pages
from .style import apply as apply_style


def main() -> None:
    st.set_page_config(page_title="Stepscope", page_icon=":material/timeline:", layout="wide")
    apply_style()
    exposed = warn_if_exposed()  # listening beyond 127.0.0.1 is an explicit --server.address: say so
    if exposed:
        st.sidebar.warning(exposed)
    # beyond localhost, runs (GPU, disk, model paths) are the operator's choice
    pages = app_pages(include_run=remote_runs_allowed())
    st.navigation(list(pages.values())).run()
