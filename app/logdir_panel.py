"""The log-directory picker on Analyze: pick a folder under `--logdir`, see its traces, open one from disk.

The listing reruns on its own every few seconds (a fragment), so traces that appear are listed
without a page reload; opening one hands its path (never its bytes) to the loader, which reads it
through the on-disk cache. All listing and path checks live in app.logdir.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from datetime import datetime
from pathlib import Path

import streamlit as st

from stepscope.exporters.safe_text import for_markdown
from .logdir import (
    OutsideLogdirError,
    RunFolder,
    TraceFile,
    configured_logdir,
    entry_key,
    human_size,
    scan_folders,
    scan_traces,
    shown_name,
)
from .logdir import resolve_within as _resolve_within
from .navigation import ANALYZE_KEY
from .trace_sources import TraceSource

PREFIX = "logdir:"
OPENED_KEY = "logdir_opened"  # session state: relative paths opened this session, oldest first
FOLDER_KEY = "logdir_folder"
PICK_KEY = "logdir_pick"
REFRESH_S = 5


def opened_sources(state: MutableMapping, root: Path | None = None) -> list[TraceSource]:
    """The traces opened from the log directory this session, as sources (paths re-checked). A source's key and
    label are valid UTF-8 whatever the file's name (logdir.entry_key, logdir.shown_name): they reach the browser."""
    root = root or configured_logdir()
    if root is None:
        return []
    out = []
    for rel in state.get(OPENED_KEY, []):
        try:  # a run folder's rel ends with "/": its path is the folder (app.source_loading opens it as a run)
            path = _resolve_within(root, rel.rstrip("/") or ".")
            out.append(TraceSource(PREFIX + entry_key(rel), shown_name(rel), "logdir", path))
        except OutsideLogdirError:
            continue
    return out


def open_trace(state: MutableMapping, rel: str, root: Path) -> str:
    """Remember `rel` (a trace, or a run folder: its path and "/") as opened and make it Analyze's trace; returns
    its source key."""
    _resolve_within(root, rel.rstrip("/") or ".")  # refuses anything outside the root
    opened = [r for r in state.get(OPENED_KEY, []) if r != rel] + [rel]
    state[OPENED_KEY] = opened[-20:]
    state[ANALYZE_KEY] = PREFIX + entry_key(rel)
    return PREFIX + entry_key(rel)


def _label(t: TraceFile | RunFolder) -> str:
    when = datetime.fromtimestamp(t.mtime_ns / 1e9).strftime("%Y-%m-%d %H:%M")
    if isinstance(t, RunFolder):
        ranks = f"{t.workers} worker rank{'s' if t.workers != 1 else ''}"
        return f"{t.shown} · serving run: {ranks} + API server · {human_size(t.size_bytes)} · {when}"
    rank = f" · rank {t.rank}" if t.rank is not None else ""
    return f"{t.shown} · {human_size(t.size_bytes)} · {t.format}{rank} · {when}"


def picker() -> None:
    """The expander with the folder picker and the trace list; nothing when no log directory is set."""
    root = configured_logdir()
    if root is None:
        return
    with st.expander(f"Log directory: {for_markdown(root.name or str(root))}", expanded=True):
        st.caption(for_markdown(str(root)))
        _listing(str(root))


@st.fragment(run_every=REFRESH_S)
def _listing(root_text: str) -> None:
    """Widgets hold entry keys (valid UTF-8), never raw names: a name that is not UTF-8 is shown escaped and
    still opens."""
    root = Path(root_text)
    folder_list, folder_notes = scan_folders(root)
    folders = {entry_key(rel): rel for rel in folder_list}
    if st.session_state.get(FOLDER_KEY) not in folders:
        st.session_state[FOLDER_KEY] = ""
    left = right = st.container()  # stacked: the picker lives in the sidebar
    folder = left.selectbox(
        "Folder",
        list(folders),
        key=FOLDER_KEY,
        format_func=lambda k: shown_name(folders[k]) or "(top)",
        help="Traces in this folder and the folders below it are listed, newest first.",
    )
    for note in folder_notes:  # the cap on folders, or the walk's bound on entries looked at
        left.caption(for_markdown(note[:1].upper() + note[1:] + "."))
    listing = scan_traces(root, folders[folder])
    traces = listing.entries  # a serving engine's profile folder is one entry: its run
    if not traces:
        right.info("No traces here yet (Kineto/Chrome JSON, Perfetto or Nsight SQLite); the list refreshes itself.")
        for note in listing.notes:
            right.caption(for_markdown(note))
        return
    by_key = {t.key: t for t in traces}
    if st.session_state.get(PICK_KEY) not in by_key:
        st.session_state[PICK_KEY] = traces[0].key
    key = right.selectbox("Trace (newest first)", list(by_key), key=PICK_KEY, format_func=lambda k: _label(by_key[k]))
    notes = "".join(f" · {note}" for note in listing.notes)
    st.caption(for_markdown(f"{len(traces)} trace(s) · read from disk on this machine, no upload{notes}"))
    if st.button("Open from disk", key="logdir_open", type="primary"):
        entry = by_key[key]
        open_trace(st.session_state, entry.rel_path + ("/" if isinstance(entry, RunFolder) else ""), root)
        st.rerun()


COMPARE_LISTED = 200  # log-directory traces offered in Compare's pickers beside the opened ones (newest first)


def listed_sources(state: MutableMapping, root: Path | None = None) -> list[TraceSource]:
    """Every trace the log directory holds, as sources: those opened this session first, then the newest
    COMPARE_LISTED others of the listing (app.logdir.scan_traces: cheap, its sniffs cached per process)."""
    root = root or configured_logdir()
    if root is None:
        return []
    opened = opened_sources(state, root)
    seen = {s.key for s in opened}
    out = list(opened)
    for t in scan_traces(root).entries[:COMPARE_LISTED]:
        key = PREFIX + t.key
        if key in seen:
            continue
        try:
            out.append(TraceSource(key, t.shown, "logdir", _resolve_within(root, t.rel_path)))
        except OutsideLogdirError:
            continue
    return out
