"""Compare: two traces side by side, by default a CUDA-graph off/on pair (or eager vs compile on the CPU)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from stepscope.analysis.compare import batches_differ, compare, unlike_prefix
from stepscope.analysis.number_format import convert, format_ratio, format_value, shared_unit
from stepscope.exporters.compare_formats import metric_table_rows, op_diff_caption, op_diff_rows
from stepscope.exporters.figures import compare_charts, request_charts
from stepscope.exporters.request_tables import requests_table
from stepscope.exporters.safe_text import for_markdown, plain
from stepscope.parsers import TraceError
from .. import components, logdir_panel, report_panel, requests_panel, tables
from ..navigation import COMPARE_KEYS
from ..source_loading import load_source
from ..style import VERDICT_COLOR
from ..tables import shown_frame
from ..trace_sources import TraceSource, all_sources, default_pair
from ..upload_box import upload_box
from ..uploads import upload_names, upload_run_names

ORIGIN_LABEL = {"sample": "sample", "run": "past run", "upload": "upload", "logdir": "log directory"}


def session_sources(state) -> list[TraceSource]:
    """Every trace this session knows: the samples, past runs, uploads (from any page) and the log directory's
    traces (those opened on Analyze first)."""
    known = all_sources(upload_names(state), upload_run_names(state))
    return known + [s for s in logdir_panel.listed_sources(state) if s.key not in {k.key for k in known}]


def _pick_pair() -> tuple[TraceSource, TraceSource] | None:
    """Both pickers over every trace the session knows, and an upload of its own (it becomes B)."""
    state = st.session_state
    with st.expander("Upload a trace to compare", expanded=False):
        new = upload_box(state, "compare_upload", "Upload a trace (it becomes B)")
    sources = session_sources(state)
    by_key = {s.key: s for s in sources}
    if len(sources) < 2:
        st.info(
            "Compare needs two traces: upload one above (or on Analyze), open one from the log directory, or make "
            "a pair on the Run page."
        )
        return None
    keys = list(by_key)
    chosen = state.get(COMPARE_KEYS)
    if not chosen or chosen[0] not in by_key or chosen[1] not in by_key:
        pair = default_pair(sources)
        chosen = (pair[0].key, pair[1].key)
    if new is not None and new in by_key:
        chosen = (chosen[0] if chosen[0] != new else chosen[1], new)
    left, right = st.columns(2)

    def label(k: str) -> str:
        return f"{plain(by_key[k].label)}  ({ORIGIN_LABEL.get(by_key[k].origin, by_key[k].origin)})"

    a = left.selectbox("Baseline (A)", keys, index=keys.index(chosen[0]), format_func=label)
    b = right.selectbox("Changed (B)", keys, index=keys.index(chosen[1]), format_func=label)
    state[COMPARE_KEYS] = (a, b)
    return by_key[a], by_key[b]


def _short_label(source: TraceSource) -> str:
    """What the sentence calls a trace: its mode when run.json says it, else its name."""
    mode = source.mode
    return f"{source.label} [{mode}]" if mode and mode not in source.label else source.label


def _layers_text(layers: dict) -> str:
    if not layers or not layers.get("layers"):
        return "layers not counted"
    lu = layers.get("layer_us") or {}
    return (
        f"{layers['layers']} layers of {layers.get('kernels_per_layer')} kernels, "
        f"{format_value(lu.get('p50'), 'us')} each "
        f"(median); head {format_value(layers.get('head_us'), 'us')}, tail {format_value(layers.get('tail_us'), 'us')}"
    )


def _inside_step(result, name_a: str, name_b: str, on_gpu: bool) -> None:
    """Per-category and per-layer deltas of the median decode step (analysis.compare carries them)."""
    if result.categories.empty:
        return
    st.subheader("Inside the median decode step")
    unit = "kernels" if on_gpu else "host ops"
    times = ["a_us", "b_us", "delta_us"]
    shown = shared_unit(result.categories[times].to_numpy().ravel().tolist(), "us")  # one unit for the three
    scale = convert(1.0, "us", shown)
    table = result.categories.assign(**{c: result.categories[c] * scale for c in times})
    # B / A as every table writes it: "0.59x", and "gone" / "new" where one side has none (not "0" or an empty cell)
    sides = zip(table["ratio"], table["a_us"], table["b_us"], strict=True)
    table["ratio"] = [format_ratio(r, a, b) for r, a, b in sides]
    table = table.rename(
        columns={
            "a_us": f"A ({shown})",
            "b_us": f"B ({shown})",
            "delta_us": f"B - A ({shown})",
            "ratio": "B / A",
            "a_kernels": f"A {unit}",
            "b_kernels": f"B {unit}",
        }
    )
    left, right = st.columns([3, 2])
    tables.show(
        table,
        left,
        column_config={
            "B / A": st.column_config.TextColumn("B / A"),
            f"A ({shown})": st.column_config.NumberColumn(format="localized", help=f"A: {name_a}"),
            f"B ({shown})": st.column_config.NumberColumn(format="localized", help=f"B: {name_b}"),
        },
    )
    right.plotly_chart(
        compare_charts.category_bars(result.categories, f"A: {name_a}", f"B: {name_b}", shown),
        width="stretch",
        key="compare_categories",
    )
    st.markdown(
        f"**Layers.** A: {for_markdown(_layers_text(result.layers.get('a', {})))}. "
        f"B: {for_markdown(_layers_text(result.layers.get('b', {})))}."
    )


def _pair_banner(result) -> None:
    """What makes the pair not like for like (analysis.compare_warnings), above everything else: one line, the
    differences under a "why" expander."""
    if not result.warnings:
        return
    n = len(result.warnings)
    st.warning(
        f"**Not like for like**: the two differ in {n} way{'s' if n > 1 else ''} besides any change measured, so no "
        "verdict is given.",
        icon=":material/warning:",
    )
    with st.expander("Why not like for like"):
        st.markdown("\n".join(f"- {for_markdown(w)}" for w in result.warnings))


def _op_diff(result) -> None:
    """Kernels (host ops) that appeared, disappeared or changed count or time per step (analysis.op_diff)."""
    rows = op_diff_rows(result, top=30)
    if not rows:
        return
    st.subheader("Op by op")
    st.caption(for_markdown(op_diff_caption(result)))
    table = pd.DataFrame(rows, columns=["op", "category", "status", "count / step", "time / step", "B - A"])
    tables.show(table)


def _composition_section(result, name_a: str, name_b: str) -> None:
    """What the two runs' batches held, side by side (analysis.compare.compare_composition)."""
    rows = result.composition
    if rows.empty or not batches_differ(rows):
        return
    st.markdown("**Batches**")
    tables.show(rows.drop(columns="key").rename(columns={"a": f"A: {name_a}", "b": f"B: {name_b}", "delta": "B - A"}))


def _requests_section(a, b) -> None:
    """Two served runs' requests side by side: each request's TTFT and ITL as distributions (issue 41)."""
    runs = [(f"{tag}: {plain(item.name)}", requests_table(item.analysis)) for tag, item in (("A", a), ("B", b))]
    if not any(requests_panel.has_requests(item) for item in (a, b)):
        return
    if not any(request_charts.has_distributions(rows) for _, rows in runs):
        return
    st.markdown("**Requests**: each request's TTFT and median ITL, the share of requests at or below a value")
    st.plotly_chart(request_charts.request_distributions(runs), width="stretch", key="compare_request_dists")


def _metric_table(result, name_a: str, name_b: str, on_gpu: bool = True) -> None:
    """The metrics side by side, each row in one unit; a change that is better green, worse red (the registry's
    direction: exporters.compare_formats.metric_table_rows)."""
    frame = pd.DataFrame(metric_table_rows(result, on_gpu))
    verdicts = frame.pop("verdict")
    frame = shown_frame(frame).rename(columns={"A": f"A: {plain(name_a)}", "B": f"B: {plain(name_b)}"})
    styled = frame.style.apply(lambda col: [VERDICT_COLOR.get(v, "") for v in verdicts], subset=["B - A", "B / A"])
    st.dataframe(styled, width="stretch", hide_index=True)
    if result.warnings:
        st.caption("Not like for like: no change is marked better or worse.")
    else:
        st.caption("Green: B is better on that metric; red: B is worse (lower or higher is better as the metric says).")


def render() -> None:
    st.title("Compare")
    pair = _pick_pair()
    if pair is None:
        return
    loaded = []
    for source in pair:
        try:
            loaded.append(load_source(source, st.session_state))
        except TraceError as exc:
            st.error(f"Could not read {for_markdown(source.label)}: {for_markdown(exc)}")
            return
    a, b = loaded
    result = compare(a.analysis, b.analysis, _short_label(pair[0]), _short_label(pair[1]))
    _pair_banner(result)
    # the banner above lists what makes the pair unlike: the sentence is shown without repeating it, in a neutral
    # box (no green "better" for a pair whose difference is not one change)
    sentence = for_markdown(result.sentence.removeprefix(unlike_prefix(result.warnings)))
    if result.warnings:
        st.info(sentence[:1].upper() + sentence[1:], icon=":material/compare_arrows:")
    else:
        st.success(sentence)

    columns = st.columns(2)
    for column, item, tag in zip(columns, loaded, ("A", "B"), strict=True):
        with column:
            st.markdown(f"**{tag}: {for_markdown(item.name)}**")
            components.header(item)
    _metric_table(result, a.name, b.name, a.analysis.summary.on_gpu or b.analysis.summary.on_gpu)

    _composition_section(result, a.name, b.name)
    _requests_section(a, b)
    _inside_step(result, a.name, b.name, a.analysis.summary.on_gpu or b.analysis.summary.on_gpu)
    _op_diff(result)
    st.plotly_chart(compare_charts.itl_overlay(a, b), width="stretch")
    st.plotly_chart(compare_charts.per_step_overlay(a, b), width="stretch")
    st.subheader("One typical decode step of each, same time scale")
    figure = compare_charts.one_step_each(a, b)
    if figure is None:
        st.write("Neither trace has a decode step to draw.")
    else:
        st.plotly_chart(figure, width="stretch", key="compare_steps")
    with st.expander("Downloads"):
        report_panel.report_download(a, b, result)
        for item, tag in zip(loaded, ("a", "b"), strict=True):
            st.markdown(f"**{for_markdown(item.name)}**")
            components.downloads(item, f"compare_{tag}")
