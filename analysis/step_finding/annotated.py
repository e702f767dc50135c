"""Strategies that read step annotations the engine or the user wrote, and the training guard.

Annotations are the most specific evidence there is: they come first. Each family parses names
into a StepLabel; the rows of the process with the most steps become the boundaries.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pandas as pd

from ..annotations import (
    StepLabel,
    profiler_step_label,
    regex_label,
    sglang_label,
    stepscope_label,
    vllm_label,
)
from ..event_rows import kind_mask
from ..names import name_matches
from ..user_patterns import compile_user_pattern
from .frames import Found, Views, boundary_frame, empty_frame

TRAINING_NAME = re.compile(r"Backward|autograd::engine|Optimizer\.step")


def user_regex(views: Views) -> Found | None:
    if not views.step_regex:
        return None
    pattern = compile_user_pattern(views.step_regex, "step regex")  # RE2: linear time; ValueError, one line
    found = annotated_steps(views, lambda name: regex_label(pattern, name))
    if found is None:
        return None
    notes = []
    if found["kind"].isna().any():
        found = _kinds_by_position(found)
        notes.append("the regex has no (?P<kind>...) group: first step taken as prefill, the rest decode")
    evidence = [f"{len(found)} annotations matching the regex {views.step_regex!r}"]
    return views.result(found, "user-regex", 0.9, *notes, evidence=evidence)


def _family(method: str, confidence: float, parse: Callable[[str], StepLabel | None], what: str):
    def strategy(views: Views) -> Found | None:
        found = annotated_steps(views, parse)
        if found is None:
            return None
        return views.result(found, method, confidence, evidence=[f"{len(found)} {what}, kinds as written there"])

    strategy.__name__ = method.replace("-", "_")
    strategy.__doc__ = f"Steps from {what}."
    return strategy


stepscope_markers = _family("stepscope-markers", 1.0, stepscope_label, "Stepscope step markers")
vllm_annotations = _family("vllm-annotations", 0.95, vllm_label, "vLLM execute_context_..._generation_... annotations")
sglang_annotations = _family("sglang-annotations", 0.95, sglang_label, "SGLang step[...] annotations")


def regex_unmatched(views: Views) -> Found | None:
    """Not a strategy of its own: once no annotation family answered, say that the user's regex matched nothing."""
    if views.step_regex:
        views.warnings.append(f"no annotation matches the step regex {views.step_regex!r}")
    return None


def training_guard(views: Views) -> Found | None:
    """Training traces repeat steps too (ProfilerStep, forward spans): they are not generation."""
    ev = views.events  # host ops named like backward/optimizer work, counted without selecting the host ops
    training = int((kind_mask(ev, ["cpu_op"]) & name_matches(ev["name"], TRAINING_NAME)).sum())
    if not training:
        return None
    note = f"training trace ({training} backward/optimizer ops): no generation steps"
    return views.result(empty_frame(), "none", 0.9, note, evidence=[note])


def profiler_steps(views: Views) -> Found | None:
    """ProfilerStep#N ranges, each labelled by the first token-embedding lookup inside it."""
    embeddings = views.embeddings
    if not len(embeddings):
        return None
    steps = annotated_steps(views, profiler_step_label)
    if steps is None:
        return None
    steps = _label_profiler_steps(steps, embeddings)
    evidence = [f"{len(steps)} ProfilerStep#N annotations; kinds from the aten::embedding inside each"]
    return views.result(steps, "profiler-steps", 0.7, evidence=evidence)


def annotated_steps(views: Views, parse: Callable[[str], StepLabel | None]) -> pd.DataFrame | None:
    annotations = views.annotations
    names, hit = _distinct_names(annotations["name"])
    labels = {n: parse(n) for n in names}  # one parse per distinct annotation name
    labels = {n: lab for n, lab in labels.items() if lab is not None}
    if not labels:
        return None
    rows = annotations[hit(list(labels))]
    # Tensor-parallel traces repeat each step per rank: keep the process with the most steps.
    main_pid = rows["pid"].value_counts().index[0]
    rows = rows[rows["pid"] == main_pid].sort_values("ts", kind="stable")
    parsed = [labels[str(n)] for n in rows["name"]]  # one label per annotation: annotations are few
    indexes = [lab.index for lab in parsed]
    return boundary_frame(
        rows["ts"].to_numpy(),
        (rows["ts"] + rows["dur"]).to_numpy(),
        kind=[lab.kind for lab in parsed],
        request=[lab.request if lab.request is not None else 0 for lab in parsed],
        index=None if any(i is None for i in indexes) else indexes,
        tokens=[lab.tokens for lab in parsed],
        batch=[lab.batch for lab in parsed],
        label=rows["name"].astype(str).to_numpy(),
        prefill_tokens=[lab.prefill_tokens for lab in parsed],
        decode_sequences=[lab.decode_sequences for lab in parsed],
    )


def _distinct_names(column: pd.Series) -> tuple[list[str], Callable[[list[str]], np.ndarray]]:
    """(the distinct names as strings, a function giving the mask of rows named one of a list): on the codes of a
    categorical column, so that annotation names are not turned into strings row by row."""
    if not isinstance(column.dtype, pd.CategoricalDtype):
        text = column.astype(str)
        return list(text.unique()), lambda wanted: text.isin(wanted).to_numpy()
    codes = column.cat.codes.to_numpy()
    categories = column.cat.categories
    present = np.unique(codes[codes >= 0])
    as_text = {str(categories[c]): int(c) for c in present}

    def hit(wanted: list[str]) -> np.ndarray:
        return np.isin(codes, [as_text[w] for w in wanted])

    return list(as_text), hit


def _kinds_by_position(steps: pd.DataFrame) -> pd.DataFrame:
    steps = steps.copy()
    missing = steps["kind"].isna()
    first = np.arange(len(steps)) == 0
    steps.loc[missing, "kind"] = np.where(first[missing.to_numpy()], "prefill", "decode")
    return steps


def _label_profiler_steps(steps: pd.DataFrame, emb: pd.DataFrame) -> pd.DataFrame:
    """Give each ProfilerStep the kind and tokens of the first forward inside it."""
    from .embedding import token_shape

    steps = steps.copy()
    pos = np.searchsorted(emb["ts"].to_numpy(), steps["start_ns"].to_numpy(), side="left")
    kinds, tokens, batch = [], [], []
    for i, p in enumerate(pos):  # one iteration per ProfilerStep, not per event
        inside = p < len(emb) and emb["ts"].iloc[p] < steps["host_end_ns"].iloc[i]
        b, s = token_shape(emb["_dims"].iloc[p]) if inside else (None, None)
        if not inside:
            kinds.append("empty")
        elif s is None:
            kinds.append("prefill" if i == 0 else "decode")
        else:
            kinds.append("prefill" if s > 1 else "decode")
        tokens.append(None if s is None else b * s)
        batch.append(b)
    steps["kind"] = kinds
    steps["tokens"] = pd.array(tokens, dtype="Int64")
    steps["batch"] = pd.array(batch, dtype="Int64")
    return steps
