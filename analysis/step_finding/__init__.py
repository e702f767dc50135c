"""Find the forward passes (steps) in a trace, and say how they were found, from what, and how sure we are.

Step finding is an ordered list of strategies. Each takes the trace's `Views` and returns its
boundaries and segmentation, or None to pass; the first answer wins, so the list runs from the
most specific evidence to the least: annotations someone wrote (a user's regex, Stepscope's
markers, vLLM, SGLang), the training guard, ProfilerStep ranges labelled by embedding lookups,
the host's own forward spans (call-tree repetition), embedding lookups, compiled regions with a token
handoff between them, then device-side repetition (graph replays, a repeating kernel sequence), else
nothing. Whatever answered, batch_contents.compose then reads what each forward holds (sequences,
prefill and decode, draft or target) from the shapes the trace recorded.

To add a strategy, write a function `(Views) -> Found | None` and put it in STRATEGIES where its
evidence ranks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pandas as pd

from stepscope.parsers.timeline import Timeline
from ..annotations import oversized_step_warnings
from ..event_rows import kind_mask
from ..model import Segmentation
from ..shapes import shape_warnings
from .annotated import (
    profiler_steps,
    regex_unmatched,
    sglang_annotations,
    stepscope_markers,
    training_guard,
    user_regex,
    vllm_annotations,
)
from .batch_contents import compose
from .compiled import compiled_forwards
from .device_patterns import graph_replays, kernel_pattern, nothing
from .embedding import embedding_lookup
from .frames import BOUNDARY_COLUMNS, Found, Views, boundary_frame
from .host_forwards import host_forwards
from .served import observe_served

Strategy = Callable[[Views], Found | None]

STRATEGIES: tuple[Strategy, ...] = (
    user_regex,
    stepscope_markers,
    vllm_annotations,
    sglang_annotations,
    regex_unmatched,
    training_guard,
    profiler_steps,
    host_forwards,
    embedding_lookup,
    compiled_forwards,
    graph_replays,
    kernel_pattern,
)

__all__ = ["BOUNDARY_COLUMNS", "STRATEGIES", "Found", "Views", "boundary_frame", "find_steps"]


def find_steps(timeline: Timeline, step_regex: str | None = None) -> tuple[pd.DataFrame, Segmentation]:
    """Step boundaries (BOUNDARY_COLUMNS) and how they were found: the first strategy that answers."""
    views = Views(timeline, step_regex)
    found = next((f for f in (strategy(views) for strategy in STRATEGIES) if f is not None), None) or nothing(views)
    found = compose(views, found)  # what each forward holds: sequences, prefill and decode, draft or target
    found = observe_served(views, found)  # a serving engine's packed batches: what each step's trace says of them
    # what the trace holds that no strategy may trust: numbers too large in step names, malformed shapes
    ev = timeline.events
    names = _annotation_names(ev)
    distrusted = (*oversized_step_warnings(names), *shape_warnings(ev))
    segmentation = found.segmentation
    if distrusted:
        segmentation = replace(segmentation, warnings=(*distrusted, *segmentation.warnings))
    return found.bounds, segmentation


def _annotation_names(ev: pd.DataFrame) -> list:
    """The distinct names of annotation rows, in order of first appearance, found on the categorical codes
    (a missing name stays NaN, as astype(str) leaves it)."""
    column = ev["name"]
    rows = kind_mask(ev, ["annotation"])
    if not isinstance(column.dtype, pd.CategoricalDtype):
        return list(column[rows].astype(str).unique())
    codes = column.cat.codes.to_numpy()[rows]
    distinct, first = np.unique(codes, return_index=True)
    categories = column.cat.categories
    return [str(categories[c]) if c >= 0 else np.nan for c in distinct[np.argsort(first)]]
