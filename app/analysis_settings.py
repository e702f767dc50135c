"""The analysis options a user can change (gap threshold, own step regex), kept in session state.

Every page loads traces with the same options, so Analyze and Compare always agree.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import TYPE_CHECKING

import streamlit as st

from stepscope.analysis import AnalysisOptions

if TYPE_CHECKING:
    from stepscope.analysis.front_door import Given
    from stepscope.analysis.roofline import ModelShape

GAP_US_KEY = "gap_threshold_us"
REGEX_KEY = "step_regex"
BATCH_KEY = "typed_batch"  # session state: sequences per step for traces that do not say it; 0 = none typed
# session state: the model a trace without run.json is read against, as plain data: (preset, dtype), or
# ("config", {"config": dict, "dtype": str, "name": str}) from an uploaded config.json, or ("form", {...}) the
# keyword arguments of analysis.roofline.shape_from_form
MODEL_KEY = "analysis_model"
CUSTOM_KINDS = ("config", "form")
DEVICE_KEY = "analysis_device"  # session state: the GPU table row for traces that name no device
DEFAULT_GAP_US = AnalysisOptions().gap_threshold_ns / 1000


def current_options(state: MutableMapping) -> AnalysisOptions:
    """The options every page opens traces with (ValueError for a value the analysis refuses)."""
    gap_us = float(state.get(GAP_US_KEY, DEFAULT_GAP_US))
    regex = (state.get(REGEX_KEY) or "").strip() or None
    batch = int(state.get(BATCH_KEY) or 0) or None
    return AnalysisOptions.from_us(gap_us, step_regex=regex, batch=batch)


def current_given(state: MutableMapping) -> Given:
    """The model and device picked for traces without a run.json (the roofline panel's choices), as the front door
    takes them. A run.json beside the trace wins over them, as over the CLI's --model and --gpu."""
    from stepscope.analysis.front_door import Given, resolve_device

    choice = state.get(MODEL_KEY)
    return Given(model_of(choice) if choice else None, resolve_device(state.get(DEVICE_KEY)))


def model_of(choice: tuple) -> ModelShape:
    """The ModelShape a stored choice describes (ValueError when it does not describe one)."""
    from stepscope.analysis.roofline.model_config import shape_from_config, shape_from_form
    from stepscope.analysis.roofline.model_source import model_shape

    kind, data = choice
    if kind == "config" and isinstance(data, dict):
        return shape_from_config(data["config"], dtype=data.get("dtype"), name=data.get("name"))
    if kind == "form" and isinstance(data, dict):
        return shape_from_form(**data)
    return model_shape(kind, data)


def set_custom_model(state: MutableMapping, kind: str, data: dict) -> ModelShape:
    """Choose a model described by an uploaded config.json ("config") or the small form ("form"); the shape is built
    first, so a description that names no model is refused (ValueError) and the previous choice stays."""
    if kind not in CUSTOM_KINDS:
        raise ValueError(f"unknown model description {kind!r}")
    shape = model_of((kind, data))
    state[MODEL_KEY] = (kind, data)
    return shape


def set_device(state: MutableMapping, device: str | None) -> None:
    """Choose (or with None, clear) the GPU for traces that name none."""
    if device is None:
        state.pop(DEVICE_KEY, None)
    else:
        state[DEVICE_KEY] = device


def set_model(state: MutableMapping, preset: str | None, dtype: str | None) -> None:
    """Choose (or with None, clear) the model for traces without a run.json; every page opens with it."""
    if preset is None:
        state.pop(MODEL_KEY, None)
    else:
        state[MODEL_KEY] = (preset, dtype)


def settings_expander() -> None:
    """Widgets bound to the session-state keys above; a change re-analyses (the parse stays cached)."""
    state = st.session_state
    with st.expander("Analysis settings", expanded=bool(state.get(REGEX_KEY) or state.get(BATCH_KEY))):
        left, right = st.columns([1, 2])
        left.number_input(
            "Shortest GPU idle gap reported (us)",
            min_value=0.0,
            max_value=1e6,
            value=DEFAULT_GAP_US,
            step=1.0,
            key=GAP_US_KEY,
            help="Idle intervals shorter than this are not listed as gaps (busy time is unchanged).",
        )
        right.text_input(
            "Your own step annotation regex (optional)",
            key=REGEX_KEY,
            placeholder=r"^my_step_(?P<kind>prefill|decode)",
            help="Matched against user annotations before any other method. Named groups kind (prefill/decode) "
            "and tokens are read when present.",
        )
        st.number_input(
            "Batch: sequences per step, for a trace that does not say (0: none)",
            min_value=0,
            max_value=1_000_000,
            value=0,
            step=1,
            key=BATCH_KEY,
            help="Without input shapes (record_shapes=True) or an engine's step annotations the trace does not say "
            "how many sequences a step advances, so tokens per step, tokens/s and the decode roofline are unknown. "
            "A batch typed here fills them, and they say they rest on it. Steps whose batch the trace states keep it.",
        )
