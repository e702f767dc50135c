"""The analysis options a user can change (gap threshold, own step regex), kept in session state.

Every page loads traces with the same options, so Analyze and Compare always agree.
"""

from __future__ import annotations

from collections.abc import MutableMapping

import streamlit as st

from ..analysis import AnalysisOptions

GAP_US_KEY = "gap_threshold_us"
REGEX_KEY = "step_regex"
DEFAULT_GAP_US = AnalysisOptions().gap_threshold_ns / 1000


def current_options(state: MutableMapping) -> AnalysisOptions:
    gap_us = float(state.get(GAP_US_KEY, DEFAULT_GAP_US))
    regex = (state.get(REGEX_KEY) or "").strip() or None
    return AnalysisOptions(gap_threshold_ns=round(gap_us * 1000), step_regex=regex)


def settings_expander() -> None:
    """Widgets bound to the session-state keys above; a change re-analyses (the parse stays cached)."""
    with st.expander("Analysis settings", expanded=bool(st.session_state.get(REGEX_KEY))):
        left, right = st.columns([1, 2])
        left.number_input(
            "Shortest GPU idle gap reported (us)",
            min_value=0.0,
            max_value=1e6,
            value=DEFAULT_GAP_US,
            step=1.0,
            key=GAP_US_KEY,
            help="Idle intervals shorter than this are not listed as gaps (busy time is unchanged).",
        )
        right.text_input(
            "Your own step annotation regex (optional)",
            key=REGEX_KEY,
            placeholder=r"^my_step_(?P<kind>prefill|decode)",
            help="Matched against user annotations before any other method. Named groups kind (prefill/decode) "
            "and tokens are read when present.",
        )
