"""Issue 27: the app shows how much of a big trace is read (app/cache.py's progress bar, fed by the front door's
read_fraction), in whole percents at most every READ_BAR_SECONDS, and removes it once the trace is read."""

from __future__ import annotations

from app import cache


class _Slot:
    def __init__(self, log: list) -> None:
        self.log = log

    def progress(self, value: int, text: str = "") -> None:
        self.log.append(("progress", value, text))

    def empty(self) -> None:
        self.log.append(("empty",))


def test_the_read_bar_shows_whole_percents_and_goes_once_read(monkeypatch):
    log: list = []
    monkeypatch.setattr(cache.st, "empty", lambda: _Slot(log))
    now = [0.0]
    bar = cache._ReadBar(clock=lambda: now[0])
    bar.done()
    assert log == []  # nothing read in pieces (a cache hit, a small file): no bar at all
    for seconds, fraction in ((0, 0.1), (1, 0.104), (2, 0.5), (2.2, 0.6), (3, 0.7), (4, 1.0)):
        now[0] = seconds
        bar(fraction)
    bar.done()
    assert log == [
        ("progress", 10, "Reading the trace: 10%"),
        ("progress", 50, "Reading the trace: 50%"),  # 60% came too soon after it
        ("progress", 70, "Reading the trace: 70%"),
        ("empty",),
    ]
