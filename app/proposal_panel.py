"""The model the trace shows, proposed on the Analyze page for a trace read without one (issue 45).

analysis/model_proposal.py reads the proposal from the trace (layers, ranks, dtype, hidden size, vocabulary,
experts) and the weights-only floor of a decode step where it names a preset; this panel shows both, labelled as
proposed, with a button that accepts it (the session's model: every figure is then read against it under a new
result key) and the "few numbers" form prefilled from it, to correct it. Nothing here computes a figure.
"""

from __future__ import annotations

import streamlit as st

from stepscope.analysis.model_proposal import ModelProposal, form_fields, roofline_text
from stepscope.analysis.roofline import usable_run_record
from stepscope.exporters.safe_text import for_markdown
from .analysis_settings import set_model
from .cache import LoadedTrace

PICKER_DTYPES = ("bfloat16", "float16", "float32")  # the preset picker's; an fp8 proposal is read in bf16


def proposal_of(loaded: LoadedTrace) -> ModelProposal | None:
    """The proposal to show: none once a model is known (a run.json, or one the user picked)."""
    if loaded.model is not None or usable_run_record(loaded.timeline) is not None:
        return None
    return loaded.analysis.model_proposal


def headline(loaded: LoadedTrace) -> None:
    """One line near the top: the proposal and its weights-only floor, both marked as proposed."""
    proposal = proposal_of(loaded)
    if proposal is None:
        return
    line = f"**Proposed model** (from the trace, not used yet): {for_markdown(proposal.text)}"
    if proposal.weights_roofline:
        line += f" · weights-only roofline: {for_markdown(roofline_text(proposal.weights_roofline))}"
    st.markdown(line + " · accept or correct it under Expected vs measured.")


def section(loaded: LoadedTrace) -> bool:
    """The proposal under Expected vs measured: what it rests on, Use it, and the form prefilled from it. False
    when there is nothing to propose."""
    proposal = proposal_of(loaded)
    if proposal is None:
        return False
    st.info(
        f"**Proposed from the trace** (a guess: no figure uses it until you accept it): {for_markdown(proposal.text)}",
        icon=":material/lightbulb:",
    )
    if proposal.weights_roofline:
        st.markdown(f"**Weights-only roofline (proposed):** {for_markdown(roofline_text(proposal.weights_roofline))}.")
    with st.expander("What the proposal rests on", expanded=False):
        for field, text in proposal.evidence.items():
            st.markdown(f"- **{field.replace('_', ' ')}**: {for_markdown(text)}")
    _accept(proposal)
    return True


def form_prefill(loaded: LoadedTrace) -> dict | None:
    """The "few numbers" form's starting values: the proposal's (analysis.model_proposal.form_fields)."""
    proposal = proposal_of(loaded)
    return form_fields(proposal) if proposal is not None else None


def _accept(proposal: ModelProposal) -> None:
    """Use it: the one fitting preset, or the one picked among those that fit."""
    if not proposal.candidates:
        st.caption("No preset has this shape: correct or complete its numbers below, then Use this model.")
        return
    preset = proposal.preset or st.selectbox(
        "Presets that fit what the trace shows", list(proposal.candidates), key="proposal_candidate"
    )
    dtype = proposal.dtype if proposal.dtype in PICKER_DTYPES else "bfloat16"
    if st.button(f"Use {preset}", key="proposal_use", type="primary", help="Read the trace against this model"):
        set_model(st.session_state, preset, dtype)
        st.rerun()
