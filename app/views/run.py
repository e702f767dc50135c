"""Run: profile a generation with the collectors, watch it progress, then open the result.

The collectors run in this process (collectors.run API); a CollectorError is
shown as one line. A pair run makes eager and cuda-graph traces (eager and
compile on a CPU, where CUDA graphs do not exist) and opens them in Compare.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `streamlit run` puts app/ first, not the repo

import streamlit as st

from app.navigation import ANALYZE_KEY, COMPARE_KEYS, go_to
from app.safe_text import for_markdown
from app.trace_sources import runs_dir
from collectors.errors import CollectorError
from collectors.presets import DEFAULT_PRESET, PRESETS

MODES = ("eager", "cuda-graph", "compile")  # collectors.decode_loops.MODES, without importing torch to list them
DEVICES = ("auto", "cpu", "cuda")


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def _pair_modes(on_gpu: bool) -> tuple[str, str]:
    return ("eager", "cuda-graph") if on_gpu else ("eager", "compile")


def _spec_form():
    from collectors.run import RunSpec

    with st.form("run_spec"):
        left, right = st.columns(2)
        source = left.radio("Model", ["preset", "local model"], horizontal=True)
        presets = sorted(PRESETS)
        preset = left.selectbox("Preset (real shapes, random weights)", presets, index=presets.index(DEFAULT_PRESET),
                                format_func=lambda p: f"{p}: {PRESETS[p].description}")
        model = left.text_input("Local model folder", placeholder="/models/Llama-3.2-1B")
        device = right.selectbox("Device", DEVICES)
        mode = right.selectbox("Mode", MODES)
        prompt = right.text_input("Prompt (empty: deterministic token ids)")
        prompt_tokens = right.number_input("Prompt tokens (when no prompt)", 1, 32768, 16)
        new_tokens = left.number_input("New tokens", 1, 4096, 16)
        batch = left.number_input("Batch", 1, 1024, 1)
        single = st.form_submit_button("Run", type="primary")
        pair = st.form_submit_button("Run on/off pair (eager vs CUDA graphs; vs compile on CPU) and compare")
    spec = RunSpec(
        preset=preset, model=(model.strip() or None) if source == "local model" else None, device=device,
        prompt=prompt or None, prompt_tokens=int(prompt_tokens), new_tokens=int(new_tokens), batch=int(batch),
        mode=mode,
    )
    return spec, single, pair


def _run(spec, status) -> Path:
    """One collectors run with its stages shown as a progress bar inside the status box."""
    from collectors.run import STAGES, run_profiled_generation

    bar = status.progress(0.0, text=f"{spec.mode}: starting")

    def progress(stage: str, done: int, total: int) -> None:
        index = STAGES.index(stage) if stage in STAGES else 0
        fraction = (index + (done / total if total else 0)) / len(STAGES)
        bar.progress(min(max(fraction, 0.0), 1.0), text=f"{spec.mode}: {stage} {done}/{total}")

    folder = run_profiled_generation(spec, runs_dir(), progress)
    bar.progress(1.0, text=f"{spec.mode}: done, {folder.name}")
    return folder


def render() -> None:
    st.title("Run")
    on_gpu = _cuda_available()
    st.caption(f"Profiles a generation with torch.profiler and saves it under {for_markdown(runs_dir())}. "
               f"{'A CUDA GPU is available.' if on_gpu else 'No CUDA GPU here: runs use the CPU.'}")
    spec, single, pair = _spec_form()
    if not (single or pair):
        return
    from dataclasses import replace

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


render()
