"""Your own model for the roofline, beside the presets: an uploaded config.json, or the few numbers a person knows
(layers, hidden, heads, KV heads, experts, active parameters, dtype: analysis.roofline.shape_from_form).

The choice is stored as plain data in the session's analysis settings (app/analysis_settings.py), so every page
opens traces with it and the front door keys its answers on the shape it resolves to. A config that names no
model is refused in one line and the previous choice stays.
"""

from __future__ import annotations

import json
from collections.abc import MutableMapping

import streamlit as st

from ..analysis.number_format import compact
from ..exporters.safe_text import for_markdown
from .analysis_settings import MODEL_KEY, model_of, set_custom_model

MAX_CONFIG_BYTES = 16 << 20  # the same bound as a model config read by name (contracts.safe_read)
DTYPES = ("bfloat16", "float16", "float32", "fp8")


def describe(choice) -> str:
    """A stored custom model in words, for the picker ("config.json: gpt-oss-20b")."""
    kind, data = choice
    try:
        shape = model_of(choice)
    except (ValueError, TypeError, KeyError):
        return f"{kind}: {data.get('name') or 'model'}"
    moe = f", {shape.experts} experts ({shape.experts_per_token} per token)" if shape.experts else ""
    source = "config.json" if kind == "config" else "your numbers"
    sizes = f"{shape.layers} layers, hidden {shape.hidden}, {compact(shape.parameters)} parameters{moe}"
    return f"{shape.name} ({source}: {sizes})"


def _use(state: MutableMapping, kind: str, data: dict) -> None:
    try:
        set_custom_model(state, kind, data)
    except (ValueError, TypeError, KeyError) as exc:
        st.error(f"Not a model the roofline can read: {for_markdown(exc)}")
        return
    st.rerun()  # every figure above (cards, findings) is read again with the model


def config_upload(state: MutableMapping) -> None:
    """A transformers config.json (or a run.json holding one), parsed as JSON: never executed or unpickled."""
    uploaded = st.file_uploader("config.json", type=["json"], key="model_config_upload")
    dtype = st.selectbox("Dtype it ran in", DTYPES, key="model_config_dtype")
    if uploaded is None or not st.button("Use this config", key="model_config_use"):
        return
    data = uploaded.getvalue()
    if len(data) > MAX_CONFIG_BYTES:
        st.error(f"{for_markdown(uploaded.name)} is over {MAX_CONFIG_BYTES >> 20} MB: not a model config")
        return
    try:
        config = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        st.error(f"{for_markdown(uploaded.name)} is not JSON: {for_markdown(exc)}")
        return
    if not isinstance(config, dict):
        st.error(f"{for_markdown(uploaded.name)} does not hold a JSON object")
        return
    if isinstance(config.get("model"), dict) and isinstance(config["model"].get("config"), dict):
        config = config["model"]["config"]  # a run.json: its model's config
    name = str(config.get("_name_or_path") or uploaded.name.removesuffix(".json"))
    _use(state, "config", {"config": config, "dtype": dtype, "name": name[:80]})


def form(state: MutableMapping) -> None:
    """The few numbers of a model; the MLP width from the (active) parameter count when it is not given."""
    with st.form("model_form"):
        name = st.text_input("Name", value="my-model", key="mf_name")
        a, b, c = st.columns(3)
        layers = a.number_input("Layers", 1, 1024, 32, key="mf_layers")
        hidden = b.number_input("Hidden", 1, 65536, 4096, key="mf_hidden")
        heads = c.number_input("Heads", 1, 1024, 32, key="mf_heads")
        kv_heads = a.number_input("KV heads", 1, 1024, 8, key="mf_kv")
        head_dim = b.number_input("Head dim (0: hidden / heads)", 0, 4096, 0, key="mf_head_dim")
        vocab = c.number_input("Vocabulary", 1, 10_000_000, 128256, key="mf_vocab")
        experts = a.number_input("Experts (0: dense)", 0, 4096, 0, key="mf_experts")
        per_token = b.number_input("Experts per token", 0, 4096, 0, key="mf_per_token")
        active = c.number_input("Active parameters (billions)", 0.0, 10_000.0, 8.0, step=0.1, key="mf_active")
        intermediate = a.number_input("MLP width (0: from the parameters)", 0, 1_000_000, 0, key="mf_width")
        dtype = b.selectbox("Dtype", DTYPES, key="mf_dtype")
        submitted = st.form_submit_button("Use this model")
    if not submitted:
        return
    data = {
        "name": name.strip()[:80] or "my-model",
        "layers": int(layers),
        "hidden": int(hidden),
        "heads": int(heads),
        "kv_heads": int(kv_heads),
        "vocab": int(vocab),
        "dtype": dtype,
        "active_parameters": float(active) * 1e9 or None,
        "experts": int(experts),
        "experts_per_token": int(per_token),
        "intermediate": int(intermediate) or None,
        "head_dim": int(head_dim) or None,
    }
    _use(state, "form", data)


def custom_model_inputs(state: MutableMapping) -> None:
    """The expander with both ways in; open while a custom model is the choice."""
    chosen = state.get(MODEL_KEY) or (None, None)
    custom = chosen[0] in ("config", "form")
    with st.expander("Your own model: a config.json, or a few numbers", expanded=custom):
        if custom:
            st.caption(f"In use: {for_markdown(describe(chosen))}. Pick a preset above to use it instead.")
        left, right = st.columns([2, 3])
        with left:
            config_upload(state)
        with right:
            form(state)
