"""Analyze's memory: the memory lane under the timeline, then the memory figures, per-step chart and tables.

Only arranges what analysis computed (summary.memory, the steps' memory columns, exporters.figures.memory_chart)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from stepscope.analysis.metrics import format_bytes
from stepscope.analysis.number_format import MISSING, format_count
from stepscope.exporters.figures import memory_chart
from stepscope.exporters.safe_text import for_markdown
from .cache import LoadedTrace
from .tables import show

NO_MEMORY = (
    "No memory events in this trace. Profile with `profile_memory=True` (the Run page's *Profile memory*, "
    "`stepscope run --profile-memory`) to see memory per step and the KV cache's growth against the model."
)


def profile_memory_option(column) -> bool:
    """The Run page's "Profile memory" box (collectors' profile_memory; recorded in run.json's spec)."""
    return bool(
        column.checkbox(
            "Profile memory",
            value=False,
            help="torch.profiler's profile_memory=True: every allocation and free is recorded, so Analyze shows "
            "memory per step and the KV cache's growth against the model. Makes the trace larger.",
        )
    )


def lane(loaded: LoadedTrace) -> None:
    """The memory lane, drawn right under the timeline when the trace has memory events."""
    fig = memory_chart.memory_lane_figure(loaded.timeline, loaded.analysis)
    if fig is not None:
        st.plotly_chart(fig, width="stretch", key="memory_lane")


def section(loaded: LoadedTrace) -> None:
    """The memory figures of the model's device, the per-step chart, per-phase peaks, requests and other devices."""
    st.subheader("Memory")
    memory = loaded.analysis.summary.memory
    if memory is None:
        st.caption(NO_MEMORY)
        return
    # every missing figure reads "—", the card's hover says why (one word for "not known", whatever the reason)
    no_reserve = "The device keeps no reserve (a CPU), or the trace does not say it."
    cards = (
        ("Peak allocated", memory.peak_allocated_bytes, "The largest total allocated the trace shows."),
        ("Peak reserved", memory.peak_reserved_bytes, no_reserve),
        ("KV growth / decode step", memory.kv_growth_bytes_per_token, f"KV growth: {memory.basis}"),
        (
            "Expected KV / decode step",
            memory.expected_kv_bytes_per_token,
            "Needs the model: run.json beside the trace, --model, or the roofline section's model picker.",
        ),
        ("KV tokens that fit", memory.kv_tokens_capacity, "Needs the device's memory size and the KV growth."),
    )
    for column, (label, value, why) in zip(st.columns(len(cards)), cards, strict=True):
        text = format_count(value) if label == "KV tokens that fit" else _bytes(value)
        column.metric(f"{label} ({memory.device})", text, border=True, help=for_markdown(why))
    chart = memory_chart.step_memory_chart(loaded.analysis)
    if chart is not None:
        st.plotly_chart(chart, width="stretch", key="step_memory_chart")
    facts = [f"KV growth: {memory.basis}."]
    if memory.device_memory_bytes:
        facts.append(f"Device memory {format_bytes(memory.device_memory_bytes)}.")
    if memory.expected_weights_bytes is not None:
        facts.append(f"Expected weights {format_bytes(memory.expected_weights_bytes)}.")
    if memory.resident_bytes is not None:
        facts.append(f"Allocated when the first step starts: {format_bytes(memory.resident_bytes)}.")
    st.caption(for_markdown(" ".join(facts)))
    for note in memory.notes:
        st.caption(for_markdown(note))
    st.caption("In the tables, — is a figure the trace does not give (a CPU's reserve; after a request it ended in).")
    left, middle, right = st.columns(3)
    _table(left, "Peak per phase", _phase_rows(memory.phases))
    _table(middle, "Requests: allocated before, at the last step, after", _request_rows(memory.requests))
    _table(right, "Other devices", _device_rows(memory.devices))


def _bytes(value: float | None) -> str:
    return format_bytes(value) if value is not None else MISSING


def _table(column, title: str, rows: list[dict]) -> None:
    column.markdown(f"**{title}**")
    if rows:
        show(pd.DataFrame(rows), column)
    else:
        column.caption("Nothing to list in this trace.")


def _phase_rows(phases: dict) -> list[dict]:
    return [
        {
            "phase": kind,
            "peak allocated": _bytes(p["peak_allocated_bytes"]),
            "peak reserved": _bytes(p["peak_reserved_bytes"]),
        }
        for kind, p in phases.items()
    ]


def _request_rows(requests: list[dict]) -> list[dict]:
    return [
        {
            "request": r["request"],
            "before": _bytes(r["before_bytes"]),
            "last step end": _bytes(r["last_step_end_bytes"]),
            "after": _bytes(r["after_bytes"]),  # "—": the trace ended first
        }
        for r in requests
    ]


def _device_rows(devices: list[dict]) -> list[dict]:
    return [
        {
            "device": d["device"],
            "events": d["events"],
            "peak allocated": _bytes(d["peak_allocated_bytes"]),
            "peak reserved": _bytes(d["peak_reserved_bytes"]),
        }
        for d in devices
    ]
