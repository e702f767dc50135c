"""Issue 27: the app shows how much of a big trace is read (app/cache.py's progress bar, fed by the front door's
read_fraction), in whole percents at most every READ_BAR_SECONDS, says when the analysis follows, holds the page
still while it is shown (its style hides what moves) and removes it, style and all, once the trace is open."""

from __future__ import annotations

import contextlib

from stepscope.app import cache


class _Slot:
    def __init__(self, log: list) -> None:
        self.log = log

    def progress(self, value: int, text: str = "") -> None:
        self.log.append(("progress", value, text))

    def empty(self) -> None:
        self.log.append(("empty",))

    @contextlib.contextmanager
    def container(self):
        self.log.append(("container",))
        yield self


def _recording(monkeypatch) -> list:
    log: list = []
    monkeypatch.setattr(cache.st, "empty", lambda: _Slot(log))
    monkeypatch.setattr(cache.st, "markdown", lambda body, **kw: log.append(("style", body, kw)))
    return log


def test_the_read_bar_shows_whole_percents_and_goes_once_read(monkeypatch):
    log = _recording(monkeypatch)
    now = [0.0]
    bar = cache._ReadBar(clock=lambda: now[0])
    bar.stage("read")
    bar.stage("segment 12")
    bar.done()
    assert log == []  # nothing read in pieces (a cache hit, a small file): no bar, no style, the spinner as before
    now[0] = 0.0
    bar = cache._ReadBar(clock=lambda: now[0])
    bar.stage("read")
    for seconds, fraction in ((0, 0.1), (1, 0.104), (2, 0.5), (2.2, 0.6), (3, 0.7), (4, 1.0)):
        now[0] = seconds
        bar(fraction)
    bar.stage("segment 1234567")
    now[0] = 4.5
    bar.stage("measure")
    bar.done()
    style = ("style", cache.STILL_WHILE_READING, {"unsafe_allow_html": True})
    assert log == [
        ("container",),
        style,
        ("progress", 10, "Reading the trace: 10%"),
        ("progress", 50, "Reading the trace: 50%"),  # 60% came too soon after it
        ("progress", 70, "Reading the trace: 70%"),
        ("progress", 100, "Cutting 1,234,567 events into steps… (read 4.0 s)"),  # the stage, with what ran before
        ("progress", 100, "Measuring steps, gaps and findings… (read 4.0 s, segment 0.5 s)"),
        ("empty",),  # the slot holds the style and the bar: both go
    ]


def test_the_style_only_stills_what_moves():
    """It hides the spinner and the header's running figure and stops the bar's transitions; nothing else (a
    rule that hid more would hide the page)."""
    css = cache.STILL_WHILE_READING
    assert css.startswith("<style>") and css.endswith("</style>") and css.count("<") == 2
    assert "[data-testid='stSpinner']" in css and "[data-testid='stStatusWidgetRunningIcon']" in css
    hidden = css.split("{display:none !important}")[0]
    assert hidden.count("[data-testid=") == 2
