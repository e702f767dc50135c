"""Run: profile a generation with the collectors, watch it progress, then open the result; or profile a live
vLLM server (the Live server tab, app/live_server_panel.py).

A profiled generation runs in a child process (collectors.child: nice'd, bounded by STEPSCOPE_RUN_TIMEOUT_S and
STEPSCOPE_RUN_MEMORY_MB), so one session's run never stalls the server; its stages stream into a progress bar,
Stop ends it, and a CollectorError is shown as one line. A pair run makes eager and cuda-graph traces (eager and
compile on a CPU, where CUDA graphs do not exist) and opens them in Compare.
The prefill sweep (collectors.sweep) times prefill over prompt lengths and plots
it against its roofline; past sweeps in the runs folder can be shown again.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from stepscope.analysis.roofline import load_sweep, sweep_frame
from stepscope.collectors.errors import CollectorError
from stepscope.contracts.presets import DEFAULT_PRESET, PRESETS
from stepscope.exporters.figures.sweep_chart import sweep_figure
from stepscope.exporters.safe_text import for_markdown
from .. import live_server_panel, memory_panel
from ..exposure import ALLOW_REMOTE_ENV, remote_runs_allowed, run_bound, run_spec_problem
from ..navigation import ANALYZE_KEY, COMPARE_KEYS, go_to
from ..sweeps import past_sweeps, run_sweep
from ..tables import shown_frame
from ..trace_sources import runs_dir

MODES = ("eager", "cuda-graph", "compile")  # collectors.decode_loops.MODES, without importing torch to list them
DEVICES = ("auto", "cpu", "cuda")
SWEEP_SHOWN_KEY = "sweep_shown"  # session state: the sweep.json path the sweep figure shows
SWEEP_DEFAULTS = {"preset": "tiny-llama", "min_tokens": 16, "max_tokens": 512, "points": 6}  # seconds on a CPU


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def _pair_modes(on_gpu: bool) -> tuple[str, str]:
    return ("eager", "cuda-graph") if on_gpu else ("eager", "compile")


def _spec_form():
    from stepscope.collectors.run import RunSpec

    with st.form("run_spec"):
        left, right = st.columns(2)
        source = left.radio("Model", ["preset", "local model"], horizontal=True)
        presets = sorted(PRESETS)
        preset = left.selectbox(
            "Preset (real shapes, random weights)",
            presets,
            index=presets.index(DEFAULT_PRESET),
            format_func=lambda p: f"{p}: {PRESETS[p].description}",
        )
        model = left.text_input("Local model folder", placeholder="/models/Llama-3.2-1B")
        device = right.selectbox("Device", DEVICES)
        mode = right.selectbox("Mode", MODES)
        prompt = right.text_input("Prompt (empty: deterministic token ids)")
        prompt_tokens = right.number_input("Prompt tokens (when no prompt)", 1, run_bound("prompt_tokens"), 16)
        new_tokens = left.number_input("New tokens", 1, run_bound("new_tokens"), 16)
        batch = left.number_input("Batch", 1, run_bound("batch"), 1)
        profile_memory = memory_panel.profile_memory_option(right)
        single = st.form_submit_button("Run", type="primary")
        pair = st.form_submit_button("Run on/off pair (eager vs CUDA graphs; vs compile on CPU) and compare")
    spec = RunSpec(
        preset=preset,
        model=(model.strip() or None) if source == "local model" else None,
        device=device,
        prompt=prompt or None,
        prompt_tokens=int(prompt_tokens),
        new_tokens=int(new_tokens),
        batch=int(batch),
        mode=mode,
        profile_memory=profile_memory,
    )
    return spec, single, pair


def _run(spec, status) -> Path:
    """One collectors run in its child process, its stages shown as a progress bar inside the status box. The
    heartbeat between stages redraws the bar: a click on Stop reruns the page, which interrupts this script at
    that call, and run_in_child's cleanup ends the child."""
    from stepscope.collectors.child import run_in_child
    from stepscope.collectors.run import STAGES, stage_hint

    bar = status.progress(0.0, text=f"{spec.mode}: starting")
    status.button("Stop", key="run_stop", help="end the run's process now")
    shown = {"fraction": 0.0, "text": f"{spec.mode}: starting"}

    def progress(stage: str, done: int, total: int) -> None:
        if stage:
            index = STAGES.index(stage) if stage in STAGES else 0
            shown["fraction"] = min(max((index + (done / total if total else 0)) / len(STAGES), 0.0), 1.0)
            shown["text"] = f"{spec.mode}: {stage} {done}/{total}{stage_hint(spec.mode, stage, done)}"
        bar.progress(shown["fraction"], text=shown["text"])

    folder = run_in_child(spec, runs_dir(), progress)
    bar.progress(1.0, text=f"{spec.mode}: done, {folder.name}")
    return folder


def _generation_section(on_gpu: bool) -> None:
    spec, single, pair = _spec_form()
    if st.session_state.get("run_stop"):
        st.warning("Run stopped: its process was ended.")
    if not (single or pair):
        return
    from dataclasses import replace

    problem = run_spec_problem(spec.new_tokens, spec.batch, spec.prompt_tokens, spec.model, spec.prompt)
    if problem:  # checked here too: the form's maxima are only the browser's
        st.error(f"Run refused: {for_markdown(problem)}")
        return
    specs = [replace(spec, mode=m) for m in _pair_modes(on_gpu)] if pair else [spec]
    folders = []
    with st.status(f"Running {len(specs)} profiled generation(s)...", expanded=True) as status:
        try:
            for one in specs:
                folders.append(_run(one, status))
        except CollectorError as exc:
            status.update(label="Run failed", state="error")
            st.error(f"Run failed: {for_markdown(exc)}")
            return
        status.update(label="Done", state="complete")
    keys = [f"run:{folder.name}" for folder in folders]
    if pair:
        st.session_state[COMPARE_KEYS] = (keys[0], keys[1])
        go_to("compare")
    else:
        st.session_state[ANALYZE_KEY] = keys[0]
        go_to("analyze")


def _sweep_form():
    from stepscope.collectors.sweep import SweepSpec

    with st.form("sweep_spec"):
        left, middle, right = st.columns(3)
        presets = sorted(PRESETS)
        preset = left.selectbox(
            "Preset",
            presets,
            index=presets.index(SWEEP_DEFAULTS["preset"]),
            key="sweep_preset",
            format_func=lambda p: f"{p}: {PRESETS[p].description}",
        )
        device = left.selectbox("Device", DEVICES, key="sweep_device")
        min_tokens = middle.number_input(
            "Min prompt tokens", 1, 131072, SWEEP_DEFAULTS["min_tokens"], key="sweep_min_tokens"
        )
        max_tokens = middle.number_input(
            "Max prompt tokens", 1, 131072, SWEEP_DEFAULTS["max_tokens"], key="sweep_max_tokens"
        )
        points = right.number_input("Points (log-spaced)", 1, 64, SWEEP_DEFAULTS["points"], key="sweep_points")
        repeats = right.number_input("Timed repeats per point (fastest kept)", 1, 20, 3, key="sweep_repeats")
        submitted = st.form_submit_button("Run sweep", type="primary")
    spec = SweepSpec(
        preset=preset,
        device=device,
        min_tokens=int(min_tokens),
        max_tokens=int(max_tokens),
        points=int(points),
        repeats=int(repeats),
    )
    return spec, submitted


def _run_sweep_with_status(spec) -> Path | None:
    from stepscope.collectors.sweep import STAGES

    with st.status(
        f"Sweeping prefill of {spec.preset}, {spec.min_tokens}-{spec.max_tokens} tokens...", expanded=True
    ) as status:
        bar = status.progress(0.0, text="starting")

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in STAGES:  # e.g. waiting for the device lock
                bar.progress(0.0, text=stage)
                return
            fraction = (STAGES.index(stage) + (done / total if total else 0)) / len(STAGES)
            bar.progress(min(max(fraction, 0.0), 1.0), text=f"{stage} {done}/{total}")

        try:
            path, _ = run_sweep(spec, runs_dir(), progress)
        except CollectorError as exc:
            status.update(label="Sweep failed", state="error")
            st.error(f"Sweep failed: {for_markdown(exc)}")
            return None
        status.update(label=f"Sweep done: {path.parent.name}", state="complete", expanded=False)
    return path


def _show_sweep(paths: list[Path]) -> None:
    chosen = st.session_state.get(SWEEP_SHOWN_KEY)
    names = [str(p) for p in paths]
    picked = st.selectbox(
        "Sweep",
        names,
        index=names.index(chosen) if chosen in names else 0,
        format_func=lambda p: Path(p).parent.name,
        key="sweep_pick",
        help="Sweeps found in the runs folder (runs/*/sweep.json), newest first.",
    )
    st.session_state[SWEEP_SHOWN_KEY] = picked
    try:
        record = load_sweep(picked)
    except ValueError as exc:
        st.error(for_markdown(exc))
        return
    figure, notes = sweep_figure(record)
    st.plotly_chart(figure, width="stretch", key="sweep_chart")
    hardware = record.get("hardware")
    caption = (
        f"{for_markdown(record.get('device'))}, {for_markdown(record.get('dtype'))}, batch "
        f"{for_markdown(record.get('batch'))}; each point the fastest of {for_markdown(record.get('repeats'))} "
        "timed prefills. "
    )
    caption += (
        f"Expected from {for_markdown(hardware.get('name'))}: {hardware.get('memory_gbps', 0):,.0f} GB/s, "
        f"{hardware.get('tflops', 0):.3g} TFLOP/s ({for_markdown(hardware.get('source'))})."
        if isinstance(hardware, dict)
        else "No hardware figures for this device: no expected curve."
    )
    st.caption(caption)
    for note in notes:
        st.caption(for_markdown(note))
    with st.expander("Sweep points"):
        st.dataframe(shown_frame(sweep_frame(record)), hide_index=True, width="stretch")


def _sweep_section() -> None:
    st.subheader("Prefill sweep")
    st.caption(
        "Times one prefill forward over a range of prompt lengths against its roofline: where prefill "
        "turns compute bound, and where one prefill costs as much as one decode step. "
        "The default (tiny-llama, 16-512 tokens, 6 points) takes seconds on a CPU."
    )
    with st.expander("Run a prefill sweep", expanded=not past_sweeps(runs_dir())):
        spec, submitted = _sweep_form()
    if submitted:
        path = _run_sweep_with_status(spec)
        if path is not None:
            st.session_state[SWEEP_SHOWN_KEY] = str(path)
            st.session_state.pop("sweep_pick", None)
    paths = past_sweeps(runs_dir())
    if not paths:
        st.info("No sweeps in the runs folder yet.")
        return
    _show_sweep(paths)


def render() -> None:
    st.title("Run")
    if not remote_runs_allowed():
        st.error(f"Runs are off: the app is reachable beyond localhost. Set {ALLOW_REMOTE_ENV}=1 to allow them.")
        return
    on_gpu = _cuda_available()
    st.caption(
        f"Profiles a generation with torch.profiler and saves it under {for_markdown(runs_dir())}. "
        f"{'A CUDA GPU is available.' if on_gpu else 'No CUDA GPU here: runs use the CPU.'}"
    )
    generation, live = st.tabs(["Generation", "Live server"])
    with generation:
        _generation_section(on_gpu)
        _sweep_section()
    with live:
        live_server_panel.render()
