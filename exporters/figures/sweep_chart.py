"""The prefill sweep: measured and expected prefill time against prompt length (log-log), one decode
step as a line across, and the marks of sweep.json (compute-bound crossover, prefill == one decode step)."""

from __future__ import annotations

import math

import plotly.graph_objects as go

from stepscope.analysis.roofline import sweep_frame
from ..safe_text import for_plotly
from . import palette

CHART_HEIGHT = 440
MEASURED = palette.PREFILL
EXPECTED = "#7b4fbf"
DECODE = palette.DECODE_EVEN
COMPUTE_MARK = "#c92a2a"
EQUAL_MARK = palette.GAP
MARK_SPAN = 4.0  # a mark further than this factor outside the swept lengths is named, not drawn


def _number(value) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) and out > 0 else None


def sweep_figure(record: dict) -> tuple[go.Figure, list[str]]:
    """The figure and notes for marks that lie outside the swept range (not drawn)."""
    frame = sweep_frame(record)
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=frame["prompt_tokens"],
            y=frame["measured_ms"],
            mode="lines+markers",
            name="measured prefill",
            line={"color": MEASURED, "width": 3},
            marker={"size": 8},
            hovertemplate="%{x} tokens: %{y:.3f} ms measured<extra></extra>",
        )
    )
    if frame["expected_ms"].notna().any():
        fig.add_trace(
            go.Scatter(
                x=frame["prompt_tokens"],
                y=frame["expected_ms"],
                mode="lines+markers",
                name="expected (roofline)",
                line={"color": EXPECTED, "width": 2, "dash": "dash"},
                marker={"size": 6, "symbol": "diamond"},
                text=frame["bound"].fillna("").map(for_plotly),
                hovertemplate="%{x} tokens: %{y:.3f} ms expected, %{text} bound<extra></extra>",
            )
        )
    lo, hi = int(frame["prompt_tokens"].min()), int(frame["prompt_tokens"].max())
    y_values = [*frame["measured_ms"].dropna(), *frame["expected_ms"].dropna()]
    decode = record.get("decode_step") or {}
    for value, name, dash in (
        (decode.get("measured_ms"), "one decode step, measured", "solid"),
        (decode.get("expected_ms"), "one decode step, expected", "dot"),
    ):
        ms = _number(value)
        if ms is not None:
            y_values.append(ms)
            fig.add_trace(
                go.Scatter(
                    x=[lo, hi],
                    y=[ms, ms],
                    mode="lines",
                    name=f"{name} ({ms:.3g} ms)",
                    line={"color": DECODE, "width": 2, "dash": dash},
                    hovertemplate=f"{name}: {ms:.3f} ms<extra></extra>",
                )
            )
    y_lo, y_hi = min(y_values, default=1.0) / 1.3, max(y_values, default=1.0) * 1.3  # log y: no zero
    marks = record.get("marks") or {}
    notes = []
    for key, label, color, dash in (
        ("compute_bound_prompt_tokens", "compute bound from (expected)", COMPUTE_MARK, "dash"),
        ("prefill_equals_decode_tokens", "prefill = one decode step (measured)", EQUAL_MARK, "solid"),
        ("prefill_equals_decode_expected_tokens", "prefill = one decode step (expected)", EQUAL_MARK, "dot"),
    ):
        tokens = _number(marks.get(key))
        if tokens is None:
            if key == "prefill_equals_decode_tokens" and _number(decode.get("measured_ms")) is not None:
                notes.append(
                    "prefill = one decode step (measured): the measured curve does not cross the decode "
                    "step within the swept lengths"
                )
            continue
        if not lo / MARK_SPAN <= tokens <= hi * MARK_SPAN:
            notes.append(f"{label}: {tokens:,.0f} tokens, outside the swept {lo:,}-{hi:,}")
            continue
        fig.add_trace(
            go.Scatter(
                x=[tokens, tokens],
                y=[y_lo, y_hi],
                mode="lines",
                name=f"{label}: {tokens:,.0f} tokens",
                line={"color": color, "width": 2, "dash": dash},
                hovertemplate=f"{label}: {tokens:,.0f} tokens<extra></extra>",
            )
        )
    model = (record.get("model") or {}).get("source") or "model"
    fig.update_layout(
        title={
            "text": for_plotly(f"Prefill time vs prompt length: {model} on {record.get('device') or 'device'}"),
            "font": {"size": 14},
        },
        height=CHART_HEIGHT,
        margin={"l": 10, "r": 10, "t": 40, "b": 30},
        legend={"orientation": "v", "x": 1.01, "y": 1},
        hovermode="closest",
    )
    fig.update_xaxes(type="log", title="prompt tokens (log scale)")
    fig.update_yaxes(type="log", title="ms (log scale)")  # measured and expected can be orders apart
    return fig, notes
