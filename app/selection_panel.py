"""The Selection panel under the kernel detail (issue 42): choose a range by dragging on the detail (Select mode), by
typing its start and end, or by picking steps (one, a range, every step of a kind), or take every match of a find;
see what it holds (analysis/selection.py: wall, busy and idle time, the kernels by name, the host ops and runtime
calls, the anatomy of whole steps); pin it as A, choose B, and read B - A per kernel and per category.

Everything shown is computed in analysis/ (the same answer as `stepscope.load(path).window(...)`); this module
lays it out. Names from the trace reach the page only through tables (drawn on a canvas, text through
safe_text.plain) or safe_text.for_markdown.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import streamlit as st

from stepscope.analysis.kernel_names import distinct_short_names
from stepscope.analysis.number_format import convert, format_count, format_value, shared_unit, sig
from stepscope.analysis.selection import Selection, SelectionAnswer, diff, select
from stepscope.exporters.safe_text import for_markdown
from . import tables
from .style import VERDICT_COLOR
from .workbench import Bench

ROWS_SHOWN = 200  # rows of each table of the panel (the heaviest first); the API gives them all
STEP_MODES = ("one step", "a range of steps", "every step of a kind")


def on_box(bench: Bench, chart_key: str) -> None:
    """The detail's box selection (Select mode) as the selection: its x range, ms from the trace's start."""
    event = bench.state.get(chart_key) or {}
    boxes = (event.get("selection") or {}).get("box") or []
    xs = [float(x) for x in (boxes[-1].get("x") or [])] if boxes else []
    if len(xs) >= 2 and all(math.isfinite(x) for x in xs):
        lo, hi = min(xs), max(xs)
        label = f"{lo:,.3f} to {hi:,.3f} ms (dragged)"
        bench.select(Selection.of_range(bench.ns(lo), bench.ns(hi), label))


def controls(bench: Bench, detail: tuple[int, int]) -> None:
    """The typed range and the step pickers, side by side."""
    steps = bench.loaded.analysis.steps
    left, right = st.columns(2)
    with left.form(bench.key("typed_range"), border=True):
        st.markdown("**A range** (ms from the trace's start)")
        a, b = st.columns(2)
        start = a.number_input("start (ms)", value=round(bench.ms(detail[0]), 3), format="%.3f", step=0.1)
        end = b.number_input("end (ms)", value=round(bench.ms(detail[1]), 3), format="%.3f", step=0.1)
        if st.form_submit_button("Select range", icon=":material/straighten:"):
            lo, hi = sorted((float(start), float(end)))
            try:
                bench.select(Selection.of_range(bench.ns(lo), bench.ns(hi), f"{lo:,.3f} to {hi:,.3f} ms"))
            except ValueError as exc:
                st.error(for_markdown(exc))
    if len(steps):
        with right.container(border=True):
            _step_picker(bench, steps)


def _step_picker(bench: Bench, steps: pd.DataFrame) -> None:
    st.markdown("**Steps**")
    mode_col, value_col = st.columns([2, 3])
    mode = mode_col.selectbox("Select", STEP_MODES, key=bench.key("step_mode"))
    last = len(steps) - 1
    if mode == "one step":
        step = int(value_col.number_input("step", 0, last, 0, key=bench.key("one_step")))
        chosen, label = [step], f"step {step} ({steps['kind'].iloc[step]})"
    elif mode == "a range of steps":
        first, final = value_col.slider("steps", 0, max(last, 1), (0, min(last, 1)), key=bench.key("step_range"))
        final = min(int(final), last)
        chosen, label = list(range(int(first), final + 1)), f"steps {first} to {final}"
    else:
        kinds = list(dict.fromkeys(steps["kind"].astype(str)))
        kind = value_col.selectbox("kind", kinds, key=bench.key("step_kind"))
        chosen = np.flatnonzero((steps["kind"].astype(str) == kind).to_numpy()).tolist()
        label = f"every {kind} step ({len(chosen):,})"
    st.button(
        "Select steps",
        key=bench.key("select_steps"),
        icon=":material/view_week:",
        on_click=bench.select,
        args=(Selection.of_steps(chosen, label),),
    )


def panel(bench: Bench) -> None:
    """The current selection's answer, then A (pinned) against it."""
    selection = bench.selection
    st.markdown("#### Selection")
    if selection is None:
        st.caption(
            "Nothing selected yet: turn on **Select** and drag across the detail, type a range, pick steps, "
            "or select all matches of a find."
        )
        return
    try:
        answer = _answer(bench, selection)
    except ValueError as exc:
        st.error(for_markdown(exc))
        return
    with st.container(key=bench.key("selection_answer")):
        _cards(bench, answer)
        _pin_row(bench, selection)
        _tables(bench, answer)
    pinned = bench.pinned
    if pinned is not None and pinned != selection:
        try:
            with st.container(key=bench.key("selection_diff")):
                _diff_section(bench, _answer(bench, pinned), answer)
        except ValueError as exc:
            st.error(f"A cannot be read: {for_markdown(exc)}")


def _answer(bench: Bench, selection: Selection) -> SelectionAnswer:
    return select(bench.loaded.timeline, bench.loaded.analysis, bench.index, selection)


def _cards(bench: Bench, answer: SelectionAnswer) -> None:
    """What is selected, in words and place, then wall, busy and idle time and the count."""
    kernels, attrs = answer.kernels, answer.kernels.attrs
    matches = answer.selection.kind == "matches"
    st.markdown(
        f"**{for_markdown(answer.selection.label or answer.selection.kind)}** · "
        f"{attrs['start_ms']:,.3f} to {attrs['end_ms']:,.3f} ms from the trace's start"
    )
    busy_word = "Matches running" if matches else ("GPU busy" if bench.index.on_gpu else "Host busy")
    unit = _unit(bench, answer)
    cards = st.columns(4)
    cards[0].metric("Wall", format_value(attrs["wall_us"], "us"))
    cards[1].metric(busy_word, format_value(attrs["busy_us"], "us"))
    cards[2].metric("None running" if matches else "Idle", format_value(attrs["idle_us"], "us"))
    cards[3].metric(unit, format_count(int(kernels["count"].sum())))
    for note in attrs.get("notes", []):
        st.caption(for_markdown(note))


def _unit(bench: Bench, answer: SelectionAnswer) -> str:
    unit = "matches" if answer.selection.kind == "matches" else bench.index.unit
    return unit[:1].upper() + unit[1:]


def _tables(bench: Bench, answer: SelectionAnswer) -> None:
    """The selection's tables, one tab each: by name, by category, host calls, the steps' anatomy, per step."""
    parts = [(f"{_unit(bench, answer)} by name", _by_name), ("By category", _by_category)]
    if not answer.host.empty:
        parts.append(("CPU ops and runtime calls", _host_calls))
    if answer.anatomy is not None and not answer.anatomy.empty:
        parts.append(("Anatomy of these steps", _anatomy))
    if answer.per_step is not None and not answer.per_step.empty:
        parts.append(("Per step", _per_step))
    for tab, (_, show) in zip(st.tabs([label for label, _ in parts]), parts, strict=True):
        with tab:
            show(bench, answer)


def _by_name(bench: Bench, answer: SelectionAnswer) -> None:
    _kernel_table(answer.kernels, bench.key("sel_kernels"))


def _by_category(bench: Bench, answer: SelectionAnswer) -> None:
    _time_table(answer.categories.rename(columns={"total_us": "time_us"}), bench.key("sel_categories"))
    attrs = answer.kernels.attrs
    if attrs.get("copies"):
        st.caption(f"Also {attrs['copies']:,} copies and sets, {format_value(attrs['copies_us'], 'us')}.")


def _host_calls(bench: Bench, answer: SelectionAnswer) -> None:
    st.caption("Host ops and runtime calls starting inside it (launches are runtime or driver calls).")
    _time_table(answer.host.rename(columns={"total_us": "time_us"}), bench.key("sel_host"))


def _per_step(bench: Bench, answer: SelectionAnswer) -> None:
    per_step = answer.per_step.rename(columns={"total_us": "time_us", "first_ms": "first start_ms"})
    per_step["step"] = per_step["step"].astype("Int64").mask(per_step["step"] < 0)  # empty: outside steps
    _time_table(per_step, bench.key("sel_per_step"))


def _kernel_table(kernels: pd.DataFrame, key: str) -> None:
    """Short names (unique within the table), the full name beside them for hover, times in one unit."""
    part = kernels.head(ROWS_SHOWN)
    names = part["name"].astype(str).tolist()
    labels = distinct_short_names(names)
    frame = pd.DataFrame(
        {
            "kernel": labels,
            "category": part["category"].to_numpy(),
            "count": part["count"].to_numpy(),
            "time_us": part["total_us"].to_numpy(dtype=float),
            "mean_us": part["mean_us"].to_numpy(dtype=float),
            "share_pct": part["share_pct"].to_numpy(dtype=float),
            "full name": [n if n != label else "" for n, label in zip(names, labels, strict=True)],
        }
    )
    if not (frame["full name"] != "").any():
        frame = frame.drop(columns="full name")
    _time_table(frame, key)
    if len(kernels) > ROWS_SHOWN:
        st.caption(f"The heaviest {ROWS_SHOWN} of {len(kernels):,} names (`stepscope.load(path).window` has all).")


def _time_table(frame: pd.DataFrame, key: str) -> None:
    """A table whose *_us columns are shown in one unit (the largest value's), share as a percentage."""
    frame = frame.copy()
    time_columns = [c for c in frame.columns if c.endswith("_us")]
    unit = shared_unit(np.concatenate([frame[c].to_numpy(dtype=float) for c in time_columns]), "us")
    config = {}
    for column in time_columns:
        frame[column] = frame[column].map(lambda v, c=column: convert(v, "us", unit))
        label = column.removesuffix("_us").replace("_", " ")
        config[column] = st.column_config.NumberColumn(f"{label} ({unit})", format="localized")
    if "share_pct" in frame:
        config["share_pct"] = st.column_config.NumberColumn("share", format="%.1f%%")
    if "full name" in frame:
        config["full name"] = st.column_config.TextColumn("full name (hover to read all)", width="large")
    if "kernel" in frame:
        config["kernel"] = st.column_config.TextColumn("name", width="medium")
    if "first start_ms" in frame:
        config["first start_ms"] = st.column_config.NumberColumn("first match (ms from trace start)")
    height = min(35 * (min(len(frame), 12) + 1) + 3, 460)
    tables.show(frame, column_config=config, key=key, height=height)


def _anatomy(bench: Bench, answer: SelectionAnswer) -> None:
    """Whole steps: their categories as "Inside a step" counts them, and the layers of the anatomy's step."""
    anat = bench.loaded.analysis.anatomy
    st.caption("Categories as Inside a step counts them, summed over these steps.")
    _time_table(answer.anatomy, bench.key("sel_anatomy"))
    layers = answer.layers
    if layers is not None and layers.layers:
        per = (layers.layer_us or {}).get("p50")
        st.markdown(
            f"Step {answer.layers_step} (the anatomy's step) has **{layers.layers} layers**, "
            f"{layers.kernels_per_layer} {bench.index.unit} each, {format_value(per, 'us')} per layer (median)."
        )
    elif anat is not None and anat.median_step is not None:
        st.caption(f"Layers are counted in {for_markdown(anat.role)}; select it to see them here.")
    if not bench.index.on_gpu:
        st.caption("CPU trace: host ops by self time, each op's time counted in its nearest categorised caller.")


def _pin_row(bench: Bench, selection: Selection) -> None:
    pinned = bench.pinned
    row = st.container(horizontal=True, vertical_alignment="center", gap="small")
    row.button(
        "Pin as A",
        key=bench.key("pin"),
        icon=":material/push_pin:",
        on_click=bench.pin,
        args=(selection,),
        help="Keep this selection as A; select another (B) to read B - A per kernel and category.",
    )
    if pinned is not None:
        row.button("Clear A", key=bench.key("unpin"), on_click=bench.pin, args=(None,))
        shown = "this selection" if pinned == selection else for_markdown(pinned.label or pinned.kind)
        row.markdown(f"A: **{shown}**", width="content")


def _diff_section(bench: Bench, a: SelectionAnswer, b: SelectionAnswer) -> None:
    """B (the selection) - A (pinned), per kernel and per category, each table in one unit; B faster green."""
    by_name, by_category = diff(a, b)
    st.markdown(
        f"#### B - A: {for_markdown(b.selection.label or b.selection.kind)} against "
        f"{for_markdown(a.selection.label or a.selection.kind)}"
    )
    st.caption(
        "Each table in one unit. Green: B takes less time than A; red: more (rows that changed). Status as Compare's "
        "op diff: appeared, disappeared, changed (count, or time by more than 10% and 1 us), same."
    )
    left, right = st.columns([3, 2])
    with left:
        names = by_name.head(ROWS_SHOWN)
        frame = names.rename(columns={"short_name": "kernel"}).drop(columns="name")
        frame["kernel"] = distinct_short_names(names["name"].astype(str).tolist())
        _diff_table(frame, bench.key("diff_kernels"))
    with right:
        _diff_table(by_category, bench.key("diff_categories"))


def _diff_table(frame: pd.DataFrame, key: str) -> None:
    unit = shared_unit(np.concatenate([frame[c].to_numpy(dtype=float) for c in ("us_a", "us_b", "delta_us")]), "us")
    shown = pd.DataFrame(
        {
            frame.columns[0]: frame.iloc[:, 0].astype(str).to_numpy(),
            "status": frame["status"].to_numpy(),
            "count A": frame["count_a"].to_numpy(),
            "count B": frame["count_b"].to_numpy(),
            f"A ({unit})": [convert(v, "us", unit) for v in frame["us_a"]],
            f"B ({unit})": [convert(v, "us", unit) for v in frame["us_b"]],
            f"B - A ({unit})": [convert(v, "us", unit) for v in frame["delta_us"]],
        }
    )
    shown = tables.shown_frame(shown)
    changed = frame["status"].to_numpy() != "same"  # a row within the op diff's noise is not coloured
    verdict = np.where(
        changed & (frame["delta_us"] < 0), "better", np.where(changed & (frame["delta_us"] > 0), "worse", "")
    )
    times = [f"A ({unit})", f"B ({unit})", f"B - A ({unit})"]
    styled = shown.style.format({"count A": "{:,.0f}", "count B": "{:,.0f}", **dict.fromkeys(times, sig)})
    styled = styled.apply(lambda col: [VERDICT_COLOR.get(v, "") for v in verdict], subset=[times[-1]])
    height = min(35 * (min(len(shown), 12) + 1) + 3, 460)
    st.dataframe(styled, width="stretch", hide_index=True, key=key, height=height)
