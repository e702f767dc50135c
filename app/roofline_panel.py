"""Expected vs measured (roofline) on the Analyze page: pick the inputs, call analysis.roofline, lay out its answer.

A trace with a run.json beside it (the app's own runs, the shipped samples) knows its model, dtype and
prompt length; the device comes from the trace (GPU table row) or is this machine's CPU, measured once
per process. Any other trace (uploads, traces from elsewhere) gets a model preset and a GPU picked here.
Nothing is computed here: every number comes from the RooflineReport.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import pandas as pd
import streamlit as st

from ..analysis.anatomy import with_category_roofline
from ..analysis.roofline import (
    GPUS,
    TYPICAL_FRACTIONS,
    Hardware,
    RooflineReport,
    calibrate_cpu,
    find_run_record,
    match_gpu,
    roofline_for_trace,
    roofline_report,
    run_record_note,
    timeline_device,
)
from ..analysis.roofline.compare import format_bytes
from ..analysis.roofline.model_config import ModelShape, shape_from_config, shape_from_form
from ..analysis.roofline.model_source import model_shape, preset_names
from ..collectors.presets import DEFAULT_PRESET, PRESETS
from ..contracts.run_record import RunRecord
from ..exporters.safe_text import for_markdown
from . import components, tables
from .cache import LoadedTrace
from .trace_sources import TraceSource

CPU_ROW = "CPU (this machine, measured)"
CUSTOM_MODEL = "(your own: config.json or sizes)"
CONFIG_MAX_BYTES = 1 << 20
NO_DEVICE = "(none: skip)"
NO_MODEL = "(none: skip)"
DTYPES = ("bfloat16", "float16", "float32")
MEMORY_FRACTION_KEY = "roofline_memory_fraction"
FLOPS_FRACTION_KEY = "roofline_flops_fraction"


@dataclass(frozen=True)
class RooflineChoice:
    """What the report is built from: the device row, and for traces without run.json the model."""

    device: str  # a GPUS key, CPU_ROW or NO_DEVICE
    preset: str | None  # None: from run.json (or skipped)
    dtype: str
    prompt_tokens: int | None
    memory_fraction: float
    flops_fraction: float
    shape: ModelShape | None = None  # a model given as a config.json or the small form (preset CUSTOM_MODEL)


@st.cache_resource(show_spinner="Measuring this machine's memory bandwidth and matmul throughput (once)...")
def cpu_hardware(name: str) -> Hardware:
    """The calibrated CPU, measured once per server process (calibrate_cpu is cached too)."""
    return calibrate_cpu(name)


def _hardware(device: str, cpu_name: str | None, memory_fraction: float, flops_fraction: float) -> Hardware | None:
    if device == CPU_ROW:
        base = cpu_hardware(cpu_name or "CPU")
    elif device in GPUS:
        base = GPUS[device]
    else:
        return None
    return base.scaled(memory_fraction, flops_fraction)


@st.cache_data(max_entries=64, show_spinner=False)
def cached_report(
    sha256: str, trace_path: str | None, cpu_name: str | None, choice: RooflineChoice, _loaded: LoadedTrace
) -> RooflineReport | None:
    """The report for one trace and one set of choices; reruns (any widget) reuse it."""
    hardware = _hardware(choice.device, cpu_name, choice.memory_fraction, choice.flops_fraction)
    if hardware is None:
        return None
    if choice.preset is None:
        if trace_path is None:
            return None
        return roofline_for_trace(trace_path, _loaded.analysis, *timeline_device(_loaded.timeline), hardware=hardware)
    shape = choice.shape if choice.preset == CUSTOM_MODEL else model_shape(choice.preset, choice.dtype)
    if shape is None:
        return None
    return roofline_report(_loaded.analysis, shape, hardware, prompt_tokens=choice.prompt_tokens)


def _default_device(loaded: LoadedTrace, record: RunRecord | None) -> str:
    if record is not None and record.device_type == "cpu":
        return CPU_ROW
    name, memory = timeline_device(loaded.timeline)
    row = match_gpu(name, memory) or (match_gpu(record.device) if record else None)
    if row is not None:
        return row.name
    return CPU_ROW if not loaded.analysis.summary.on_gpu else NO_DEVICE


def _set_fractions(memory: float, flops: float) -> None:
    st.session_state[MEMORY_FRACTION_KEY] = memory
    st.session_state[FLOPS_FRACTION_KEY] = flops


def _controls(loaded: LoadedTrace, record: RunRecord | None) -> RooflineChoice:
    key = loaded.sha256[:12]
    devices = [NO_DEVICE, *GPUS, CPU_ROW]
    default_device = _default_device(loaded, record)
    cols = st.columns([3, 3, 2, 2, 2] if record is None else [4, 2, 2])
    device = cols[0].selectbox(
        "Device",
        devices,
        index=devices.index(default_device),
        key=f"roofline_device_{key}",
        help="Peak bandwidth and dense throughput from the datasheet table, or this machine's CPU measured "
        "on the spot (right when the trace was made here, as the app's own runs are).",
    )
    preset, dtype, prompt_tokens = None, "bfloat16", None
    shape = None
    if record is None:
        presets = [NO_MODEL, *preset_names(), CUSTOM_MODEL]
        picked = cols[1].selectbox(
            "Model (no run.json beside this trace)",
            presets,
            index=0,
            key=f"roofline_model_{key}",
            format_func=_preset_label,
            help=f"The model whose bytes and FLOPs set the floor: a family preset (Llama 3, Qwen3, Qwen3-MoE, "
            f"gpt-oss, DeepSeek-V3, Mistral), a collectors preset (e.g. {DEFAULT_PRESET}), or your own "
            "config.json or sizes.",
        )
        preset = None if picked == NO_MODEL else picked
        default_dtype = "float32" if device == CPU_ROW else "bfloat16"
        dtype = cols[2].selectbox("Dtype", DTYPES, index=DTYPES.index(default_dtype), key=f"roofline_dtype_{key}")
        prompt_tokens = cols[2].number_input(
            "Prompt tokens",
            min_value=1,
            value=None,
            key=f"roofline_prompt_{key}",
            help="Used where the trace's step markers do not give the prefill length.",
        )
    fraction_cols = cols[-2:]
    st.session_state.setdefault(MEMORY_FRACTION_KEY, 1.0)  # set here, not as value=: the buttons set them too
    st.session_state.setdefault(FLOPS_FRACTION_KEY, 1.0)
    memory_fraction = fraction_cols[0].number_input(
        "Memory bandwidth fraction",
        0.05,
        1.0,
        step=0.05,
        key=MEMORY_FRACTION_KEY,
        help="Fraction of the peak bandwidth you expect kernels to achieve (1.0 = peak).",
    )
    flops_fraction = fraction_cols[1].number_input(
        "Compute fraction",
        0.05,
        1.0,
        step=0.05,
        key=FLOPS_FRACTION_KEY,
        help="Fraction of the peak dense throughput you expect kernels to achieve (1.0 = peak).",
    )
    typical_m, typical_f = TYPICAL_FRACTIONS["memory"], TYPICAL_FRACTIONS["flops"]
    b1, b2, note = st.columns([1, 1, 4])
    b1.button("Peak (1.0 / 1.0)", on_click=_set_fractions, args=(1.0, 1.0), key=f"roofline_peak_{key}")
    b2.button(
        f"Typical ({typical_m:g} / {typical_f:g})",
        on_click=_set_fractions,
        args=(typical_m, typical_f),
        key=f"roofline_typical_{key}",
    )
    note.caption(
        "Fractions of peak you expect to achieve. At 1.0 (the default) efficiency is against the datasheet "
        f"peak; real kernels reach about {typical_m:.0%} of the bandwidth and {typical_f:.0%} of the FLOPs "
        "(Typical). A measured CPU is already at its best measured figures."
    )
    if preset == CUSTOM_MODEL:
        shape = custom_model(key, dtype)
    return RooflineChoice(
        device,
        preset,
        dtype,
        int(prompt_tokens) if prompt_tokens else None,
        float(memory_fraction),
        float(flops_fraction),
        shape,
    )


def _preset_label(name: str) -> str:
    if name in (NO_MODEL, CUSTOM_MODEL):
        return name
    preset = PRESETS.get(name)
    return f"{name}: {preset.description}" if preset is not None else name


def custom_model(key: str, dtype: str) -> ModelShape | None:
    """A model from a config.json (uploaded: read as JSON only, never unpickled) or from a small form of sizes;
    None (with the reason shown) until it describes one."""
    with st.expander("Your model: a config.json or its sizes", expanded=True):
        upload = st.file_uploader("config.json", type=["json"], key=f"roofline_config_{key}")
        if upload is not None:
            try:
                if upload.size > CONFIG_MAX_BYTES:
                    raise ValueError(f"a config.json is a few kB, not {upload.size:,} bytes")
                config = json.loads(upload.getvalue().decode("utf-8"))
                if not isinstance(config, dict):
                    raise ValueError("it does not hold a JSON object")
                return shape_from_config(config, dtype=dtype, name=str(config.get("_name_or_path") or upload.name))
            except (ValueError, UnicodeDecodeError, RecursionError) as exc:
                st.error(f"Cannot use this config.json: {for_markdown(' '.join(str(exc).split())[:200])}")
                return None
        return _form_model(key, dtype)


def _form_model(key: str, dtype: str) -> ModelShape | None:
    cols = st.columns(5)
    sizes = {
        "layers": cols[0].number_input("Layers", 1, 1000, 32, key=f"rf_layers_{key}"),
        "hidden": cols[1].number_input("Hidden", 1, 1 << 17, 4096, key=f"rf_hidden_{key}"),
        "heads": cols[2].number_input("Heads", 1, 1024, 32, key=f"rf_heads_{key}"),
        "kv_heads": cols[3].number_input("KV heads", 1, 1024, 8, key=f"rf_kv_{key}"),
        "vocab": cols[4].number_input("Vocab", 1, 1 << 22, 128256, key=f"rf_vocab_{key}"),
    }
    cols = st.columns(4)
    experts = int(cols[0].number_input("Experts (0: dense)", 0, 4096, 0, key=f"rf_experts_{key}"))
    per_token = int(cols[1].number_input("Experts per token", 0, 4096, 0, key=f"rf_topk_{key}"))
    active_b = cols[2].number_input("Active parameters (B)", 0.0, 10_000.0, 0.0, key=f"rf_active_{key}")
    total_b = cols[3].number_input("Parameters (B, dense)", 0.0, 10_000.0, 8.0, key=f"rf_total_{key}")
    try:
        return shape_from_form(
            "your model",
            dtype=dtype,
            experts=experts,
            experts_per_token=per_token,
            active_parameters=active_b * 1e9 or None,
            parameters=total_b * 1e9 or None,
            **{k: int(v) for k, v in sizes.items()},
        )
    except ValueError as exc:
        st.info(f"Not a model yet: {for_markdown(exc)}.")
        return None


def _flops_text(flops: float) -> str:
    for unit, scale in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if flops >= scale:
            return f"{flops / scale:.3g} {unit}"
    return f"{flops:.3g} FLOP"


def phase_table(report: RooflineReport) -> pd.DataFrame:
    """The report's phases as shown: units in the headers, bytes and FLOPs as readable text."""
    p = report.phases
    resource = {"memory": f"memory ({report.hardware.memory_name} bandwidth)", "compute": "compute"}
    return pd.DataFrame(
        {
            "phase": p["phase"],
            "steps": p["steps"],
            "tokens": p["tokens"],
            "context": p["context"],
            "expected ms": p["expected_ms"],
            "measured ms": p["measured_ms"],
            "% of roofline": p["efficiency_pct"],
            "GPU window ms": p["window_ms"],
            "% over the window": p["window_efficiency_pct"],
            "binding resource": p["bound"].map(resource),
            "batch from": p["source"],
            "bytes": p["bytes"].map(format_bytes),
            "FLOPs": p["flops"].map(_flops_text),
        }
    )


def _hardware_caption(report: RooflineReport) -> str:
    hw, shape = report.hardware, report.shape
    return (
        f"{for_markdown(shape.name)}: {shape.parameters / 1e9:.3g}B parameters, {shape.dtype_bytes} bytes per "
        f"element · {for_markdown(hw.name)}: {hw.memory_bytes_per_s / 1e9:,.0f} GB/s, "
        f"{hw.flops_per_s / 1e12:.3g} TFLOP/s ({for_markdown(hw.source)})"
    )


def section(loaded: LoadedTrace, source: TraceSource) -> RooflineReport | None:
    """The "Expected vs measured" section; returns the report for the summary line (None: nothing to show)."""
    st.subheader("Expected vs measured (roofline)")
    record = find_run_record(source.path) if source.path is not None else None
    if record is not None:
        st.caption(
            f"Model, dtype and prompt length from the run.json beside the trace "
            f"({for_markdown(record.spec.get('preset') or record.model_source or 'model')}, "
            f"{for_markdown(record.dtype)}, prompt {for_markdown(record.prompt_len)} tokens)."
        )
    choice = _controls(loaded, record)
    if choice.device == NO_DEVICE:
        st.info("Pick the device the trace ran on to see how far each phase is from what it allows.")
        return None
    if record is None and (choice.preset is None or (choice.preset == CUSTOM_MODEL and choice.shape is None)):
        note = run_record_note(source.path) if source.path is not None else None
        st.info(
            f"{for_markdown(note)}. Pick the model it ran (a preset's shapes) to see the roofline."
            if note
            else "No run.json beside this trace: pick the model it ran (a preset's shapes) to see the roofline."
        )
        return None
    cpu_name = record.device if record else timeline_device(loaded.timeline)[0]
    try:
        report = cached_report(loaded.sha256, str(source.path) if record else None, cpu_name, choice, loaded)
    except ValueError as exc:
        st.error(f"No roofline: {for_markdown(exc)}")
        return None
    if report is None or report.phases.empty:
        st.info("No prefill or decode step to compare against the roofline.")
        return report
    st.caption(_hardware_caption(report))
    st.dataframe(
        phase_table(report),
        hide_index=True,
        width="stretch",
        column_config={
            "expected ms": st.column_config.NumberColumn(format="%.3f"),
            "measured ms": st.column_config.NumberColumn(format="%.3f"),
            "% of roofline": st.column_config.NumberColumn(format="%.0f%%", help="expected / measured"),
            "GPU window ms": st.column_config.NumberColumn(
                format="%.3f", help="the median step's first device work to its last"
            ),
            "% over the window": st.column_config.NumberColumn(format="%.0f%%", help="expected / GPU window"),
            "context": st.column_config.NumberColumn(help="cached tokens before the step (mean)"),
        },
    )
    crossover = report.summary.compute_bound_prompt_tokens
    if crossover:
        st.caption(f"Prefill turns compute bound at {crossover:,} prompt tokens on this device.")
    components.finding_alerts(report.findings)
    for note in report.notes:
        st.caption(for_markdown(note))
    return report


def summary_line(report: RooflineReport | None) -> None:
    """ "Decode at X% of roofline" beside the summary cards."""
    if report is None or report.phases.empty:
        return
    parts = []
    for phase in ("decode", "prefill"):
        pct = getattr(report.summary, f"{phase}_roofline_pct")
        if pct is None or (isinstance(pct, float) and math.isnan(pct)):
            continue
        bound = getattr(report.summary, f"{phase}_bound")
        parts.append(f"**{phase.capitalize()} at {pct:.0f}% of roofline** ({bound} bound)")
    if parts:
        device = for_markdown(report.hardware.name)
        st.markdown(" · ".join(parts) + f" on {device}; details under Expected vs measured.")


def category_section(loaded: LoadedTrace, report: RooflineReport | None) -> None:
    """The median decode step's categories against their own floors (gemm: weights, attention: KV
    cache), with the model and device picked above; the rest is overhead."""
    anat = loaded.analysis.anatomy
    if anat is None or anat.median_step is None:
        return
    st.subheader(f"Roofline per category ({anat.role or 'the median decode step'})")
    if report is None:
        st.info(
            "The per-category roofline needs a model and a device: pick them under Expected vs measured "
            "(a run.json beside the trace gives the model)."
        )
        return
    roofline = with_category_roofline(loaded.analysis, report.shape, report.hardware).anatomy.roofline
    if roofline.get("status") != "ok":
        st.info(f"No per-category roofline: {for_markdown(roofline.get('status', 'unknown'))}.")
        return
    st.caption(
        f"{for_markdown(roofline['model'])} on {for_markdown(roofline['hardware'])} at "
        f"{roofline['memory_gb_s']:,.0f} GB/s; step {anat.median_step}, context {roofline['context']} tokens, "
        f"batch {roofline['batch']} (from {for_markdown(roofline.get('source', 'the steps'))}). gemm reads every "
        "layer's weights and lm_head once; moe the experts the step's tokens reach; attention reads the KV "
        "cache; the rest has no byte floor here and counts as overhead."
    )
    st.dataframe(
        tables.category_roofline_table(roofline),
        hide_index=True,
        width="stretch",
        column_config={
            "time_us": st.column_config.NumberColumn("measured (us)", format="%.1f"),
            "bytes_MB": st.column_config.NumberColumn("bytes (MB)", format="%.2f"),
            "floor_us": st.column_config.NumberColumn("floor (us)", format="%.1f"),
            "achieved_GB_s": st.column_config.NumberColumn("achieved (GB/s)", format="%.1f"),
            "pct_of_roofline": st.column_config.NumberColumn("% of roofline", format="%.0f%%"),
        },
    )
    for row in roofline["categories"]:
        if row.get("note"):
            st.caption(f"{row['category']}: {for_markdown(row['note'])}")
    if roofline.get("finding"):
        st.warning(for_markdown(roofline["finding"]))
