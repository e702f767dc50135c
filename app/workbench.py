"""What the timeline's tools share for one trace on the Analyze page (issue 42): the trace, its work index, and the
session's state of them (the selection, the pinned A, the find and the match stepped to), under keys of this
trace's answer, so two traces open in turn keep their own.

State lives in st.session_state (one per browser session), passed in as a mapping: nothing here is a module
global. The work index is kept per answer for the server (st.cache_resource), as the opened trace itself is.
"""

from __future__ import annotations

import hashlib
from collections.abc import MutableMapping
from dataclasses import dataclass

import streamlit as st

from stepscope.analysis.event_find import FindQuery, Found, find
from stepscope.analysis.event_window import WorkIndex, ms_to_ns, work_index
from stepscope.analysis.selection import Selection
from .cache import MAX_OPENED, LoadedTrace


@st.cache_resource(max_entries=MAX_OPENED, show_spinner=False)
def _work_index(answer_id: str, _loaded: LoadedTrace) -> WorkIndex:
    """Keyed by the answer (the trace's content and everything that shaped its analysis)."""
    return work_index(_loaded.timeline, _loaded.analysis)


@dataclass(frozen=True)
class Bench:
    """One trace's timeline tools: the opened trace, its work index and the session's state."""

    loaded: LoadedTrace
    index: WorkIndex
    state: MutableMapping

    @classmethod
    def of(cls, loaded: LoadedTrace, state: MutableMapping) -> Bench:
        return cls(loaded, _work_index(loaded.answer_id, loaded), state)

    @property
    def tag(self) -> str:
        """A short key of this answer for widget and state keys."""
        return hashlib.sha1(self.loaded.answer_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]

    def key(self, name: str) -> str:
        return f"{name}_{self.tag}"

    # the selection shown in the panel, and the one pinned as A
    @property
    def selection(self) -> Selection | None:
        return self.state.get(self.key("selection"))

    def select(self, selection: Selection | None) -> None:
        self.state[self.key("selection")] = selection

    @property
    def pinned(self) -> Selection | None:
        return self.state.get(self.key("pinned"))

    def pin(self, selection: Selection | None) -> None:
        self.state[self.key("pinned")] = selection

    # the find: its query, its matches (the last query's, kept for reruns) and the match stepped to
    def found(self, query: FindQuery) -> Found:
        """The matches of `query` (analysis.event_find.find), from the session's memo of the last query."""
        memo = self.state.get(self.key("found"))
        if memo is not None and memo.query == query:
            return memo
        found = find(self.loaded.timeline, self.index, query)
        self.state[self.key("found")] = found
        return found

    def ms(self, ns: int) -> float:
        return (int(ns) - self.index.origin_ns) / 1e6

    def ns(self, ms: float) -> int:
        """ms from the trace's start as ns on its clock; ValueError (one line) for a time outside any trace."""
        return ms_to_ns(self.index, ms)
