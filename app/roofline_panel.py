"""Expected vs measured (roofline) on the Analyze page: the front door's roofline, and what-ifs beside it.

A trace with a run.json beside it (the app's own runs, the shipped samples) knows its model, dtype and prompt
length; the device comes from the trace (GPU table row) or, on a CPU, from figures measured once and stored. Any
other trace (uploads, traces from elsewhere) gets its model picked here: the choice goes into the session's
analysis settings, and every page opens traces with it through the front door, so the findings, the Summary
(JSON) download and the HTML report carry the same roofline the table shows. Another device or fractions of peak
make a what-if, computed by analysis.roofline and labelled as such: it is not part of the answer.
Nothing is computed here: every number comes from a RooflineReport.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import streamlit as st

from stepscope.analysis.model import ranked
from stepscope.analysis.model_proposal import NOTE_PREFIX
from stepscope.analysis.number_format import compact, format_value, sig
from stepscope.analysis.roofline import (
    GPUS,
    TYPICAL_FRACTIONS,
    Hardware,
    RooflineReport,
    calibrate_cpu,
    match_gpu,
    roofline_report,
    timeline_device,
    usable_run_record,
)
from stepscope.analysis.roofline.compare import format_bytes
from stepscope.analysis.roofline.model_source import preset_names
from stepscope.contracts.presets import DEFAULT_PRESET, PRESETS
from stepscope.contracts.run_record import RunRecord
from stepscope.exporters.safe_text import for_markdown
from . import components, model_picker, proposal_panel, tables
from .analysis_settings import CUSTOM_KINDS, DEVICE_KEY, MODEL_KEY, set_device, set_model
from .cache import LoadedTrace
from .trace_sources import TraceSource

CPU_ROW = "CPU (this machine, measured)"
NO_DEVICE = "(none: skip)"
NO_MODEL = "(none: skip)"
CUSTOM_MODEL = "(your model)"
DTYPES = ("bfloat16", "float16", "float32")
MEMORY_FRACTION_KEY = "roofline_memory_fraction"
FLOPS_FRACTION_KEY = "roofline_flops_fraction"


@dataclass(frozen=True)
class RooflineChoice:
    """A what-if: the device row, the fractions of peak and a prompt length (the model is the answer's)."""

    device: str  # a GPUS key, CPU_ROW or NO_DEVICE
    preset: str | None  # None: from run.json (or skipped)
    dtype: str
    prompt_tokens: int | None
    memory_fraction: float
    flops_fraction: float


def _hardware(device: str, cpu_name: str | None, memory_fraction: float, flops_fraction: float) -> Hardware | None:
    if device == CPU_ROW:
        base = calibrate_cpu(cpu_name or "CPU")  # measured once per machine and stored
    elif device in GPUS:
        base = GPUS[device]
    else:
        return None
    return base.scaled(memory_fraction, flops_fraction)


@st.cache_data(max_entries=64, show_spinner=False)
def what_if_report(answer_id: str, cpu_name: str | None, choice: RooflineChoice, _loaded: LoadedTrace, _shape):
    """The roofline on another device or at fractions of peak (a what-if), for the answer's model (or the one
    picked, when the trace's device is unknown); reruns (any widget) reuse it."""
    hardware = _hardware(choice.device, cpu_name, choice.memory_fraction, choice.flops_fraction)
    if hardware is None or _shape is None:
        return None
    return roofline_report(_loaded.analysis, _shape, hardware, prompt_tokens=choice.prompt_tokens, batch=None)


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


def _model_picker(loaded: LoadedTrace, default_device: str, prefill: dict | None = None) -> None:
    """For a trace without run.json: the model it ran, kept in the session's analysis settings, so the answer
    itself (findings, downloads, every page) is read against it."""
    chosen = st.session_state.get(MODEL_KEY) or (None, None)
    custom = chosen[0] in CUSTOM_KINDS
    presets = [NO_MODEL, *([CUSTOM_MODEL] if custom else []), *preset_names()]
    left, right = st.columns([3, 1])
    picked = left.selectbox(
        "Model (no run.json beside this trace)",
        presets,
        index=presets.index(CUSTOM_MODEL if custom else chosen[0]) if custom or chosen[0] in presets else 0,
        format_func=lambda p: model_picker.describe(chosen) if p == CUSTOM_MODEL else _preset_label(p),
        help="The model whose bytes and FLOPs set the floor: a family preset (Llama 3, Qwen3, Qwen3-MoE, gpt-oss, "
        f"DeepSeek-V3, Mistral), a collectors preset (e.g. {DEFAULT_PRESET}), or your own below (config.json or "
        "a few numbers). Every page then reads traces without a run.json against it.",
    )
    if picked != CUSTOM_MODEL:
        stored = chosen[1] if isinstance(chosen[1], str) and chosen[1] in DTYPES else None
        default_dtype = stored or ("float32" if default_device == CPU_ROW else "bfloat16")
        dtype = right.selectbox("Dtype", DTYPES, index=DTYPES.index(default_dtype))
        wanted = (None, None) if picked == NO_MODEL else (picked, dtype)
        if wanted != tuple(chosen):
            set_model(st.session_state, *wanted)
            st.rerun()
    model_picker.custom_model_inputs(st.session_state, prefill)
    if default_device != NO_DEVICE and not st.session_state.get(DEVICE_KEY):
        return  # the trace names its device
    devices = [NO_DEVICE, *GPUS]
    current = st.session_state.get(DEVICE_KEY)
    device = st.selectbox(
        "Device (the trace names none the GPU table knows)",
        devices,
        index=devices.index(current) if current in devices else 0,
        help="The GPU the trace ran on; every page then reads traces that name no device against it.",
    )
    if (None if device == NO_DEVICE else device) != current:
        set_device(st.session_state, None if device == NO_DEVICE else device)
        st.rerun()


def _what_if_controls(loaded: LoadedTrace, default_device: str) -> RooflineChoice | None:
    """Another device, fractions of peak or a prompt length: a what-if beside the answer (None: none asked)."""
    key = loaded.answer_id[-12:]
    devices = [NO_DEVICE, *GPUS, CPU_ROW]
    with st.expander("What if: another device, or a fraction of peak", expanded=False):
        cols = st.columns([3, 2, 2, 2])
        device = cols[0].selectbox(
            "Device",
            devices,
            index=devices.index(default_device),
            key=f"roofline_device_{key}",
            help="Peak bandwidth and dense throughput from the datasheet table, or this machine's CPU (measured "
            "once and stored).",
        )
        prompt_tokens = cols[1].number_input(
            "Prompt tokens",
            min_value=1,
            value=None,
            key=f"roofline_prompt_{key}",
            help="Used where the trace's step markers do not give the prefill length.",
        )
        st.session_state.setdefault(MEMORY_FRACTION_KEY, 1.0)  # set here, not as value=: the buttons set them too
        st.session_state.setdefault(FLOPS_FRACTION_KEY, 1.0)
        memory_fraction = cols[2].number_input(
            "Memory bandwidth fraction",
            0.05,
            1.0,
            step=0.05,
            key=MEMORY_FRACTION_KEY,
            help="Fraction of the peak bandwidth you expect kernels to achieve (1.0 = peak).",
        )
        flops_fraction = cols[3].number_input(
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
            f"Real kernels reach about {typical_m:.0%} of the bandwidth and {typical_f:.0%} of the FLOPs (Typical). "
            "A what-if is shown here only; the findings and downloads keep the answer above."
        )
    choice = RooflineChoice(
        device, None, "", int(prompt_tokens) if prompt_tokens else None, float(memory_fraction), float(flops_fraction)
    )
    if device == default_device and choice.prompt_tokens is None and (memory_fraction, flops_fraction) == (1.0, 1.0):
        return None
    return choice


def _flops_text(flops: float) -> str:
    for unit, scale in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if flops >= scale:
            return f"{flops / scale:.3g} {unit}"
    return f"{flops:.3g} FLOP"


def _preset_label(name: str) -> str:
    """A collectors preset with its description; a family preset (analysis.roofline.model_presets) by its name."""
    preset = PRESETS.get(name)
    return f"{name}: {preset.description}" if preset is not None else name


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
            "GPU window ms": p["window_ms"],  # the median step's first device work to its last
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
        f"{for_markdown(shape.name)}: {compact(shape.parameters)} parameters, {shape.dtype_bytes} bytes per "
        f"element · {for_markdown(hw.name)}: {format_value(hw.memory_bytes_per_s / 1e9, 'GB/s')}, "
        f"{sig(hw.flops_per_s / 1e12)} TFLOP/s ({for_markdown(hw.source)})"
    )


def section(loaded: LoadedTrace, source: TraceSource) -> RooflineReport | None:
    """The "Expected vs measured" section; returns the answer's roofline for the summary line (None: none)."""
    st.subheader("Expected vs measured (roofline)")
    record = usable_run_record(loaded.timeline)
    default_device = _default_device(loaded, record)
    if record is not None:
        st.caption(
            f"Model, dtype and prompt length from the run.json beside the trace "
            f"({for_markdown(record.spec.get('preset') or record.model_source or 'model')}, "
            f"{for_markdown(record.dtype)}, prompt {for_markdown(record.prompt_len)} tokens)."
        )
    else:
        proposal_panel.section(loaded)  # what the trace shows of its model, until one is picked
        _model_picker(loaded, default_device, proposal_panel.form_prefill(loaded))
    for note in loaded.notes:
        if not note.startswith(NOTE_PREFIX):  # the proposal itself is shown above
            st.caption(for_markdown(note.removeprefix("note: ")))
    report = loaded.analysis.roofline
    if report is not None:
        _phase_table(report, "")
    elif record is None and loaded.model is None:
        if loaded.analysis.model_proposal is None:
            st.info("No run.json beside this trace: pick the model it ran (a preset's shapes) to see the roofline.")
        return None
    else:
        st.info("The trace's device is not in the GPU table: pick the device it ran on above.")
    choice = _what_if_controls(loaded, default_device)
    if choice is not None and choice.device != NO_DEVICE:
        cpu_name = record.device if record else timeline_device(loaded.timeline)[0]
        shape = report.shape if report is not None else loaded.model
        try:
            what_if = what_if_report(loaded.answer_id, cpu_name, choice, loaded, shape)
        except ValueError as exc:
            st.error(f"No what-if: {for_markdown(exc)}")
            what_if = None
        if what_if is not None:
            _phase_table(what_if, "What-if (not part of the findings or downloads): ")
    return report


def _phase_table(report: RooflineReport, label: str) -> None:
    if report.phases.empty:
        st.info("No prefill or decode step to compare against the roofline.")
        return
    st.caption(label + _hardware_caption(report))
    tables.show(
        phase_table(report),
        column_config={
            "% of roofline": st.column_config.NumberColumn(format="%.0f%%", help="expected / measured"),
            "GPU window ms": st.column_config.NumberColumn(
                format="localized", help="the median step's first device work to its last"
            ),
            "% over the window": st.column_config.NumberColumn(format="%.0f%%", help="expected / GPU window"),
            "context": st.column_config.NumberColumn(format="localized", help="cached tokens before the step (mean)"),
        },
    )
    crossover = report.summary.compute_bound_prompt_tokens
    if crossover:
        st.caption(f"Prefill turns compute bound at {compact(crossover)} prompt tokens on this device.")
    if not label:
        components.finding_alerts(ranked(report.findings))
    for note in report.notes:
        st.caption(for_markdown(note))


def summary_line(report: RooflineReport | None, loaded: LoadedTrace | None = None) -> None:
    """ "Decode at X% of roofline" beside the summary cards; without a model, the one the trace shows, proposed."""
    if report is None and loaded is not None:
        proposal_panel.headline(loaded)
    if report is None or report.phases.empty:
        return
    parts = []
    for phase in ("decode", "prefill"):
        pct = getattr(report.summary, f"{phase}_roofline_pct")
        if pct is None or (isinstance(pct, float) and math.isnan(pct)):
            continue
        bound = getattr(report.summary, f"{phase}_bound")
        parts.append(f"**{phase.capitalize()} at {format_value(pct, '%')} of roofline** ({bound} bound)")
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
    if report is None and (anat.roofline or {}).get("status") != "ok":
        proposal = proposal_panel.proposal_of(loaded)
        if proposal is not None and proposal.candidates:
            st.info(
                f"The per-category roofline needs the model: accept the proposed {proposal.preset or 'preset'} (or "
                "correct it) under Expected vs measured."
            )
            return
        st.info(
            "The per-category roofline needs a model and a device: pick the model under Expected vs measured "
            "(a run.json beside the trace gives it)."
        )
        return
    roofline = anat.roofline or {}
    if roofline.get("status") != "ok":
        st.info(f"No per-category roofline: {for_markdown(roofline.get('status', 'unknown'))}.")
        return
    st.caption(
        f"{for_markdown(roofline['model'])} on {for_markdown(roofline['hardware'])} at "
        f"{format_value(roofline['memory_gb_s'], 'GB/s')}; step {anat.median_step}, context "
        f"{compact(roofline['context'])} tokens, "
        f"batch {roofline['batch']} (from {for_markdown(roofline.get('source', 'the steps'))}). gemm reads every "
        "layer's weights and lm_head once; moe the experts the step's tokens reach; attention reads the KV cache; "
        "the rest has no byte floor here and counts as overhead."
    )
    tables.show(
        tables.category_roofline_table(roofline),
        column_config={
            "time_us": st.column_config.NumberColumn("measured (us)", format="localized"),
            "bytes_MB": st.column_config.NumberColumn("bytes (MB)", format="localized"),
            "floor_us": st.column_config.NumberColumn("floor (us)", format="localized"),
            "achieved_GB_s": st.column_config.NumberColumn("achieved (GB/s)", format="localized"),
            "pct_of_roofline": st.column_config.NumberColumn("% of roofline", format="%.0f%%"),
        },
    )
    for row in roofline["categories"]:
        if row.get("note"):
            st.caption(f"{row['category']}: {for_markdown(row['note'])}")
    if roofline.get("finding"):
        st.warning(for_markdown(roofline["finding"]))
