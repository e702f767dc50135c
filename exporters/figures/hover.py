"""What a timeline segment says when hovered, and how the box looks: dark text on a light box whatever the
segment's colour or the page's theme, the kernel's short name first, then its category, start, duration and end,
the call that launched it and the step it belongs to (the full name, cut at HOVER_NAME_CHARS, last).

Built per drawn segment only (the detail view's budget of events), with the names' work done once per distinct
name (analysis.categories.categorize), never per event.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from stepscope.analysis.categories import categorize
from stepscope.analysis.number_format import format_value
from stepscope.parsers.timeline import HOST_LAUNCH_KINDS
from ..safe_text import for_plotly

HOVERLABEL = {"bgcolor": "#ffffff", "bordercolor": "#adb5bd", "font": {"color": "#212529", "size": 12}, "align": "left"}
HOVER_NAME_CHARS = 160  # templated kernel names run to kilobytes; the hover shows their start


def _ms(ns: np.ndarray, origin: int) -> np.ndarray:
    return (np.asarray(ns, dtype=np.int64) - origin) / 1e6


def _launch_names(events: pd.DataFrame, window: pd.DataFrame | None) -> np.ndarray:
    """The launching runtime call of each GPU event (by correlation id) among the window's host calls; "" when
    the call is not in the window (issued before it) or the event has no correlation."""
    out = np.full(len(events), "", dtype=object)
    if window is None or "correlation" not in events or not len(events):
        return out
    host = window[window["kind"].isin(HOST_LAUNCH_KINDS) & (window["correlation"] >= 0)]
    if not len(host):
        return out
    by_corr = pd.Series(host["name"].astype(str).to_numpy(), index=host["correlation"].to_numpy())
    by_corr = by_corr[~by_corr.index.duplicated()]
    found = by_corr.reindex(events["correlation"].to_numpy()).to_numpy()
    return np.where(pd.isna(found), "", found).astype(object)


def event_hover(
    events: pd.DataFrame, step_text: np.ndarray, origin: int, window: pd.DataFrame | None = None
) -> list[str]:
    """One label per event: short name, category, start · duration · end (ms from the figure's origin), the
    launching call (GPU events), the step, and the full name when it differs from the short one."""
    names = events["name"].astype(str)
    short, category = categorize(names)
    short_text = pd.Series(np.asarray(short, dtype=object)).astype(str).map(for_plotly).to_numpy()
    full = names.str.slice(0, HOVER_NAME_CHARS).map(for_plotly).to_numpy()
    cats = np.asarray(category, dtype=object)
    ts, dur = events["ts"].to_numpy(), events["dur"].to_numpy()
    start, end = _ms(ts, origin), _ms(ts + dur, origin)
    launch = _launch_names(events, window)
    gpu = events["device"].to_numpy() >= 0 if "device" in events else np.zeros(len(events), dtype=bool)
    out = []
    for i in range(len(events)):
        lines = [
            f"<b>{short_text[i]}</b> · {cats[i]}",
            f"start {format_value(start[i], 'ms')} · {format_value(dur[i], 'ns')} · end {format_value(end[i], 'ms')}",
        ]
        if gpu[i]:
            lines.append(f"launched by {for_plotly(launch[i])}" if launch[i] else "launch call not in this range")
        lines.append(str(step_text[i]))
        if full[i] != short_text[i]:
            lines.append(f"<span style='font-size:10px'>{full[i]}</span>")
        out.append("<br>".join(lines))
    return out


def step_hover(steps: pd.DataFrame, labels: np.ndarray, on_gpu: bool) -> list[str]:
    """A step on the overview's phase lane: its name, span, busy and idle, kernels (host ops) and launches."""
    unit = "kernels" if on_gpu else "host ops"
    span = (steps["end_ns"] - steps["start_ns"]).to_numpy()
    busy = steps["gpu_busy_ns"].to_numpy() if "gpu_busy_ns" in steps else np.full(len(steps), np.nan)
    idle = steps["gpu_idle_ns"].to_numpy() if "gpu_idle_ns" in steps else np.full(len(steps), np.nan)
    busy_word, idle_word = ("GPU busy", "idle") if on_gpu else ("some op running", "none")
    out = []
    for i in range(len(steps)):
        text = f"<b>{labels[i]}</b><br>{format_value(span[i], 'ns')} · {busy_word} {format_value(busy[i], 'ns')}"
        text += f", {idle_word} {format_value(idle[i], 'ns')}<br>{int(steps['kernels'].iloc[i]):,} {unit}"
        if on_gpu:
            text += f", {int(steps['launches'].iloc[i]):,} launches"
        out.append(text)
    return out


def gap_hover(gaps: pd.DataFrame, idle: str) -> list[str]:
    """An idle gap: its length, likely cause, where it lies and its step."""
    dur = gaps["dur_ns"].to_numpy()
    step = gaps["step"].to_numpy()
    return [
        f"<b>{idle} {format_value(d, 'ns')}</b><br>cause: {c}, {p}<br>"
        + (f"in step {int(s)}" if s >= 0 else "outside the steps")
        for d, c, p, s in zip(dur, gaps["cause"], gaps["placement"], step, strict=True)
    ]
