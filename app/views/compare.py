"""Compare: two traces side by side, by default a CUDA-graph off/on pair (or eager vs compile on the CPU)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from ...analysis.compare import batches_differ, compare
from ...exporters.compare_formats import op_diff_caption, op_diff_rows
from ...exporters.figures import compare_charts
from ...exporters.safe_text import for_markdown, plain
from ...parsers import TraceError
from .. import components, report_panel
from ..navigation import COMPARE_KEYS
from ..source_loading import load_source
from ..tables import shown_frame
from ..trace_sources import TraceSource, all_sources, default_pair
from ..uploads import upload_names


def _pick_pair() -> tuple[TraceSource, TraceSource] | None:
    sources = all_sources(upload_names(st.session_state))
    if len(sources) < 2:
        st.info("Compare needs two traces: upload them on Analyze, or make a pair on the Run page.")
        return None
    by_key = {s.key: s for s in sources}
    keys = list(by_key)
    chosen = st.session_state.get(COMPARE_KEYS)
    if not chosen or chosen[0] not in by_key or chosen[1] not in by_key:
        pair = default_pair(sources)
        chosen = (pair[0].key, pair[1].key)
    left, right = st.columns(2)
    label = lambda k: f"{plain(by_key[k].label)}  ({by_key[k].origin})"  # noqa: E731
    a = left.selectbox("Baseline (A)", keys, index=keys.index(chosen[0]), format_func=label)
    b = right.selectbox("Changed (B)", keys, index=keys.index(chosen[1]), format_func=label)
    st.session_state[COMPARE_KEYS] = (a, b)
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
        f"{layers['layers']} layers of {layers.get('kernels_per_layer')}, {lu.get('p50', 0):,.1f} us each "
        f"(median); head {layers.get('head_us') or 0:,.1f} us, tail {layers.get('tail_us') or 0:,.1f} us"
    )


def _inside_step(result, name_a: str, name_b: str, on_gpu: bool) -> None:
    """Per-category and per-layer deltas of the median decode step (analysis.compare carries them)."""
    if result.categories.empty:
        return
    st.subheader("Inside the median decode step")
    unit = "kernels" if on_gpu else "host ops"
    table = result.categories.rename(
        columns={
            "a_us": "A (us)",
            "b_us": "B (us)",
            "delta_us": "B - A (us)",
            "ratio": "B / A",
            "a_kernels": f"A {unit}",
            "b_kernels": f"B {unit}",
        }
    )
    left, right = st.columns([3, 2])
    left.dataframe(
        table,
        width="stretch",
        hide_index=True,
        column_config={
            "B / A": st.column_config.NumberColumn(format="%.2fx"),
            "A (us)": st.column_config.NumberColumn(format="%.1f", help=f"A: {name_a}"),
            "B (us)": st.column_config.NumberColumn(format="%.1f", help=f"B: {name_b}"),
            "B - A (us)": st.column_config.NumberColumn(format="%+.1f"),
        },
    )
    right.plotly_chart(
        compare_charts.category_bars(result.categories, f"A: {name_a}", f"B: {name_b}"),
        width="stretch",
        key="compare_categories",
    )
    st.markdown(
        f"**Layers.** A: {for_markdown(_layers_text(result.layers.get('a', {})))}. "
        f"B: {for_markdown(_layers_text(result.layers.get('b', {})))}."
    )


def _pair_banner(result) -> None:
    """What makes the pair not like for like (analysis.compare_warnings), above everything else."""
    if not result.warnings:
        return
    lines = "\n".join(f"- {for_markdown(w)}" for w in result.warnings)
    st.warning(f"**Not like for like**: read the figures below with this in mind.\n{lines}", icon=":material/warning:")


def _op_diff(result) -> None:
    """Kernels (host ops) that appeared, disappeared or changed count or time per step (analysis.op_diff)."""
    rows = op_diff_rows(result, top=30)
    if not rows:
        return
    st.subheader("Op by op")
    st.caption(for_markdown(op_diff_caption(result)))
    table = pd.DataFrame(rows, columns=["op", "category", "status", "count / step", "time / step", "B - A"])
    st.dataframe(table, width="stretch", hide_index=True)


def _composition_section(result, name_a: str, name_b: str) -> None:
    """What the two runs' batches held, side by side (analysis.compare.compare_composition)."""
    rows = result.composition
    if rows.empty or not batches_differ(rows):
        return
    st.markdown("**Batches**")
    st.dataframe(
        rows.drop(columns="key").rename(columns={"a": f"A: {name_a}", "b": f"B: {name_b}", "delta": "B - A"}),
        width="stretch",
        hide_index=True,
    )


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
    st.success(for_markdown(result.sentence))

    columns = st.columns(2)
    for column, item, tag in zip(columns, loaded, ("A", "B"), strict=True):
        with column:
            st.markdown(f"**{tag}: {for_markdown(item.name)}**")
            components.header(item)
    metrics = result.metrics.drop(columns="metric").rename(
        columns={"a": f"A: {a.name}", "b": f"B: {b.name}", "delta": "B - A", "ratio": "B / A"}
    )
    st.dataframe(
        shown_frame(metrics),
        width="stretch",
        hide_index=True,
        column_config={"B / A": st.column_config.NumberColumn(format="%.2fx")},
    )

    _composition_section(result, a.name, b.name)
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
