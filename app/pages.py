"""The app's pages: each a render() function of app/views/, shown by st.navigation."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st

from .navigation import PAGES_KEY
from .views import analyze, compare, fleet, ranks, run


@dataclass(frozen=True)
class PageSpec:
    render: Callable[[], None]
    title: str
    icon: str


PAGES = {
    "analyze": PageSpec(analyze.render, "Analyze", ":material/monitoring:"),
    "run": PageSpec(run.render, "Run", ":material/play_arrow:"),
    "compare": PageSpec(compare.render, "Compare", ":material/compare_arrows:"),
    "ranks": PageSpec(ranks.render, "Ranks", ":material/view_week:"),
    "fleet": PageSpec(fleet.render, "Fleet", ":material/dataset:"),
}


def app_pages(include_run: bool) -> dict[str, object]:
    """This session's st.Page objects, Analyze first and the default, kept in its session state for go_to."""
    pages = {
        key: st.Page(spec.render, title=spec.title, icon=spec.icon, url_path=key, default=key == "analyze")
        for key, spec in PAGES.items()
        if include_run or key != "run"
    }
    st.session_state[PAGES_KEY] = pages
    return pages
