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

from stepscope.analysis.number_format import compact
from stepscope.exporters.safe_text import for_markdown
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


FORM_DEFAULTS = {"name": "my-model", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "head_dim": 0}
FORM_DEFAULTS |= {"vocab": 128256, "experts": 0, "experts_per_token": 0, "active": 8.0, "intermediate": 0}


def form(state: MutableMapping, prefill: dict | None = None) -> None:
    """The few numbers of a model; the MLP width from the (active) parameter count when it is not given. `prefill`:
    values to start from (a proposal read from the trace), its fields keyed apart so that a new one shows."""
    v = FORM_DEFAULTS | (prefill or {})
    tag = "_" + "_".join(str(v[k]) for k in sorted(prefill)) if prefill else ""
    with st.form("model_form"):
        name = st.text_input("Name", value=str(v["name"]), key=f"mf_name{tag}")
        a, b, c = st.columns(3)
        layers = a.number_input("Layers", 1, 1024, int(v["layers"]), key=f"mf_layers{tag}")
        hidden = b.number_input("Hidden", 1, 65536, int(v["hidden"]), key=f"mf_hidden{tag}")
        heads = c.number_input("Heads", 1, 1024, int(v["heads"]), key=f"mf_heads{tag}")
        kv_heads = a.number_input("KV heads", 1, 1024, int(v["kv_heads"]), key=f"mf_kv{tag}")
        head_dim = b.number_input("Head dim (0: hidden / heads)", 0, 4096, int(v["head_dim"]), key=f"mf_head_dim{tag}")
        vocab = c.number_input("Vocabulary", 1, 10_000_000, int(v["vocab"]), key=f"mf_vocab{tag}")
        experts = a.number_input("Experts (0: dense)", 0, 4096, int(v["experts"]), key=f"mf_experts{tag}")
        per_token = b.number_input("Experts per token", 0, 4096, int(v["experts_per_token"]), key=f"mf_per_token{tag}")
        active = c.number_input(
            "Active parameters (billions)", 0.0, 10_000.0, float(v["active"]), step=0.1, key=f"mf_active{tag}"
        )
        intermediate = a.number_input(
            "MLP width (0: from the parameters)", 0, 1_000_000, int(v["intermediate"]), key=f"mf_width{tag}"
        )
        dtypes = list(DTYPES)
        dtype = b.selectbox("Dtype", dtypes, index=dtypes.index(v.get("dtype", DTYPES[0])), key=f"mf_dtype{tag}")
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


def custom_model_inputs(state: MutableMapping, prefill: dict | None = None) -> None:
    """The expander with both ways in; open while a custom model is the choice, or when `prefill` (a proposal read
    from the trace) names no preset."""
    chosen = state.get(MODEL_KEY) or (None, None)
    custom = chosen[0] in ("config", "form")
    title = (
        "Correct the proposal: a few numbers, or a config.json"
        if prefill
        else "Your own model: a config.json, or a few numbers"
    )
    with st.expander(title, expanded=custom or bool(prefill and prefill.get("name") == "proposed")):
        if custom:
            st.caption(f"In use: {for_markdown(describe(chosen))}. Pick a preset above to use it instead.")
        left, right = st.columns([2, 3])
        with left:
            config_upload(state)
        with right:
            form(state, prefill)
