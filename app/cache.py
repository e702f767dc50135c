"""The app's memo of opened traces: the front door's answers (analysis/front_door.py), kept for reruns.

Every widget change reruns a page; opening a trace again each time would cost its analysis. So this server keeps
the front door's answer (an Opened: Timeline, Analysis, contract) per file state and per key of everything else
that shapes it (analysis/result_key.py: options, model, limits, run.json, code), without a copy: the answer is
treated as immutable, as a Timeline is, so the sessions of one server can share it. What is read, and how, is the
front door's business alone (its on-disk cache, its run.json reading, its model); this module only remembers.

A file is keyed by its path, stat identity (size, mtime, ctime, inode, device) and a sample hash of its bytes
(trace_cache.keys.file_sample, a fraction of a millisecond): any write changes the stat, and a rewrite the stat
does not show (same size, within one clock tick) still changes the sample, so an edited file is opened afresh.
An upload is keyed by its bytes' hash.
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from collections.abc import Callable
from pathlib import Path

import streamlit as st

from stepscope.analysis import AnalysisOptions
from stepscope.analysis.front_door import (
    NOTHING_GIVEN,
    USE_CACHE,
    CachePolicy,
    Given,
    Opened,
    TraceBytes,
    answer_key,
    answer_key_for,
    open_folder_trace,
    open_trace,
    renamed,
)
from stepscope.parsers import TraceError
from stepscope.parsers.limits import ReadLimits
from .stage_timing import StageLog, StageTimer

READ_BAR_SECONDS = 0.5  # between two moves of the read progress bar
STAGES_SHOWN_AFTER_S = 1.0  # an open that has taken this long says which stage runs (app.stage_timing.StageLog)
OPEN_LOG_KEY = "stepscope_open_log"  # session state: (analysis, StageLog) of the open this run made
MAX_OPENED = 8  # answers kept per server (each holds a Timeline: a big trace is hundreds of MB of columns)

LoadedTrace = Opened  # the name the pages use for what they show


def sha256_of_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@st.cache_resource(max_entries=MAX_OPENED, show_spinner=False)
def _opened_file(path: bytes, state: tuple, key: str, _options: AnalysisOptions, _given: Given) -> Opened:
    """Keyed by the file's path (as bytes: a name need not be valid UTF-8), its state (stat and sample) and the
    answer's key; the arguments with a leading underscore are in the key."""
    return _open(Path(os.fsdecode(path)), _options, _given)


@st.cache_resource(max_entries=MAX_OPENED, show_spinner=False)
def _opened_bytes(sha256: str, key: str, _name: str, _data: bytes, _options: AnalysisOptions, _given: Given) -> Opened:
    return _open(TraceBytes(_name, _data), _options, _given)


def _open(source: Path | TraceBytes, options: AnalysisOptions, given: Given, cache: CachePolicy = USE_CACHE) -> Opened:
    """The front door, with progress shown and timed; a bad option is one line, like an unreadable trace."""
    timer = StageTimer({"read": "parse", "segment": "analysis", "measure": "analysis", "anatomy": "analysis"})
    bar = _ReadBar()

    def stage(name: str) -> None:
        timer.stage(name)
        bar.stage(name)

    try:
        with st.spinner("Reading and analysing the trace..."):
            opened = open_trace(
                source,
                options,
                model=given.model,
                device=given.device,
                cache=cache,
                progress=stage,
                read_fraction=bar,
            )
    except ValueError as exc:  # a bad regex, threshold or model
        raise TraceError(str(exc)) from None
    finally:
        timer.done()
        bar.done()
    st.session_state[OPEN_LOG_KEY] = (opened.analysis, bar.log)  # the page's "Drawing" line goes on from it
    return opened


def open_log_of(session_state, loaded: Opened) -> StageLog | None:
    """The stages of `loaded`'s open in this run, once (a later rerun draws from the cache: nothing to say), and
    only where the open took long enough to have shown them. Known by its analysis object: the page's copy may be
    renamed (cache.renamed), never re-analysed."""
    entry = session_state.pop(OPEN_LOG_KEY, None)
    if entry is None or entry[0] is not loaded.analysis or entry[1].elapsed() < STAGES_SHOWN_AFTER_S:
        return None
    return entry[1]


# Shown with the read bar, and gone with it: the page holds still while a big trace is read. The spinner's turning
# icon, the bar's width transition and the header's running figure (redrawn five times a second) each keep the
# browser repainting; with software rendering (no GPU) that took a fifth of a core from the two decoding processes.
# bench/browser_open_bench.py prints it (browser_cpu: the CPU of every Chromium process, click -> chart drawn).
STILL_WHILE_READING = (
    "<style>[data-testid='stSpinner'],[data-testid='stStatusWidgetRunningIcon']{display:none !important}"
    "[data-testid='stProgress'],[data-testid='stProgress'] *{transition:none !important;animation:none !important}"
    "</style>"
)


class _ReadBar:
    """How much of a big trace is read, as a progress bar (the front door's read_fraction), gone once read.

    Moved at most every READ_BAR_SECONDS: each move is a message the server sends and the browser draws, on the
    cores the decoding processes use; a move per percent was a hundred of them while a 1.3 GB trace decodes (what
    they cost is inside this VM's run-to-run spread in the browser bench). Two moves a second still show it going.
    While it is shown it stands in for the spinner, which it hides with everything else that moves
    (STILL_WHILE_READING); once read, it says the analysis runs."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.slot, self.line, self.shown, self.clock, self.moved = None, None, -1, clock, -math.inf
        self.log = StageLog(clock)

    def __call__(self, fraction: float) -> None:
        percent = max(0, min(100, int(fraction * 100)))
        if percent == self.shown or percent >= 100:  # whole percents only; at 100 the analysis follows at once
            return
        now = self.clock()
        if now - self.moved < READ_BAR_SECONDS:
            return
        self.shown, self.moved = percent, now
        self._show(percent, f"Reading the trace: {percent}%")

    def stage(self, name: str) -> None:
        """The front door's next stage: after the read, the line says which stage runs and what each before it
        took, once the bar is shown or the open has lasted STAGES_SHOWN_AFTER_S (a parse from the cache is quick,
        its analysis need not be)."""
        self.log(name)
        if name != "read" and (self.line is not None or self.log.elapsed() >= STAGES_SHOWN_AFTER_S):
            self._show(100, self.log.message())

    def _show(self, percent: int, text: str) -> None:
        if self.slot is None:
            self.slot = st.empty()
            with self.slot.container():
                st.markdown(STILL_WHILE_READING, unsafe_allow_html=True)  # a constant of ours: no trace text
                self.line = st.empty()
        self.line.progress(percent, text=text)

    def done(self) -> None:
        if self.slot is not None:
            self.slot.empty()


def load_path(
    path: str | Path, options: AnalysisOptions | None = None, given: Given = NOTHING_GIVEN, name: str | None = None
) -> Opened:
    """The front door's answer for a trace file (remembered). Raises TraceError with a one-line reason."""
    path = Path(path)
    options = options or AnalysisOptions()
    try:
        st_ = os.stat(path)
    except OSError as exc:
        raise TraceError(f"cannot open {path.name}: {exc.strerror or exc}") from None
    from stepscope.trace_cache.keys import file_sample, stat_identity

    key = answer_key(path, options, given, ReadLimits.from_env())
    if key is None:  # an input that cannot be keyed: opened each time, never remembered under a wrong key
        opened = _open(path, options, given)
    else:  # the state is the stat and a sample of the bytes (trace_cache.keys): never trusted on the stat alone
        state = (*stat_identity(st_), file_sample(path))
        opened = _opened_file(os.fsencode(path.resolve()), state, key, options, given)
    return renamed(opened, name or opened.name)


def load_bytes(name: str, data: bytes, options: AnalysisOptions | None = None, given: Given = NOTHING_GIVEN) -> Opened:
    """The front door's answer for uploaded bytes (remembered by content, options and model). Raises TraceError."""
    from stepscope.analysis.front_door import answer_key_for
    from stepscope.parsers.run_sidecar import Sidecar

    options = options or AnalysisOptions()
    key = answer_key_for(Sidecar(), options, given, ReadLimits.from_env())
    if key is None:
        return renamed(_open(TraceBytes(name, data), options, given), name)
    return renamed(_opened_bytes(sha256_of_bytes(data), key, name, data, options, given), name)


def load_folder(
    members: list[Path] | list[TraceBytes],
    options: AnalysisOptions | None = None,
    given: Given = NOTHING_GIVEN,
    name: str = "run",
) -> Opened:
    """The front door's answer for the files of one run (a serving engine's profile folder: its worker and its API
    server's trace; several files uploaded together), as `analyze DIR` reads them (front_door.open_folder_trace),
    remembered by every file's state (or bytes) and the answer's key. Raises TraceError with a one-line reason."""
    from stepscope.parsers.run_sidecar import Sidecar
    from stepscope.trace_cache.keys import file_sample, stat_identity

    options = options or AnalysisOptions()
    key = answer_key_for(Sidecar(), options, given, ReadLimits.from_env())
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape"))
    for member in members:
        if isinstance(member, TraceBytes):
            digest.update(f"{member.name}\0{sha256_of_bytes(member.data)}\n".encode("utf-8", "surrogateescape"))
            continue
        try:
            st_ = os.stat(member)
        except OSError as exc:
            raise TraceError(f"cannot open {member.name}: {exc.strerror or exc}") from None
        state = (*stat_identity(st_), file_sample(member))
        digest.update(os.fsencode(member.resolve()) + repr(state).encode())
    if key is None:
        return _open_folder(tuple(members), options, given, name)
    return _opened_folder(digest.hexdigest(), key, tuple(members), options, given, name)


@st.cache_resource(max_entries=MAX_OPENED, show_spinner=False)
def _opened_folder(state: str, key: str, _members: tuple, _options: AnalysisOptions, _given: Given, _name: str):
    return _open_folder(_members, _options, _given, _name)


def _open_folder(members: tuple, options: AnalysisOptions, given: Given, name: str) -> Opened:
    """open_folder_trace with progress shown; a bad option is one line, like an unreadable trace."""
    try:
        with st.spinner("Reading and analysing the run's traces..."):
            return open_folder_trace(list(members), options, model=given.model, device=given.device, name=name)
    except ValueError as exc:
        raise TraceError(str(exc)) from None
