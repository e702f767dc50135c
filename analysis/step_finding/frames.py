"""What every step-finding strategy shares: the boundary frame it returns and the views of the trace it reads.

A strategy gets a `Views` (the timeline plus slices computed once, on first use) and returns a `Found`
(boundary frame + segmentation) or None. The boundary frame has BOUNDARY_COLUMNS; `boundary_frame`
builds it from arrays or scalars so no strategy spells the columns out again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

import numpy as np
import pandas as pd

from stepscope.parsers.timeline import Timeline
from ..event_rows import kind_mask, name_mask, take_rows
from ..model import Segmentation

BOUNDARY_COLUMNS = (
    "start_ns",
    "host_end_ns",
    "kind",
    "request",
    "index",
    "tokens",
    "batch",  # sequences in the forward
    "label",
    "prefill_tokens",  # of the tokens, those of sequences still prefilling; <NA> when the trace does not tell
    "decode_sequences",  # sequences past their prompt (one token each; more in a verify); <NA> when unknown
    "model",  # "draft" for a draft model's forward in speculative decoding, else "" (the model served)
    "opens",  # requests that join in this forward (a draft's forwards open none)
    "accepted",  # in a verify: draft tokens the target kept, per sequence; <NA> when the trace does not show it
)
COUNT_COLUMNS = ("tokens", "batch", "prefill_tokens", "decode_sequences", "accepted")  # nullable integers
GRAPH_LAUNCHES = ("cudaGraphLaunch", "hipGraphLaunch", "cuGraphLaunch")


class Found(NamedTuple):
    bounds: pd.DataFrame  # BOUNDARY_COLUMNS
    segmentation: Segmentation


def boundary_frame(
    start_ns,
    host_end_ns,
    kind="decode",
    request=0,
    index=None,
    tokens=None,
    batch=None,
    label="",
    prefill_tokens=None,
    decode_sequences=None,
    model="",
    opens=None,
    accepted=None,
) -> pd.DataFrame:
    """The frame of step boundaries; scalars are broadcast, index defaults to 0..n-1, the counts to <NA>, `opens`
    to one request at the first step of each request number."""
    start = np.asarray(start_ns, dtype=np.int64)
    n = len(start)

    def column(value, dtype=None):
        if value is None or np.isscalar(value):
            return np.full(n, value, dtype=dtype if value is not None else object)
        return np.asarray(value, dtype=dtype)

    def nullable_int(value):
        if value is None:
            return pd.array([None] * n, dtype="Int64")
        return pd.array(value, dtype="Int64")

    requests = column(request, np.int64)
    if opens is None:
        opens = first_of_each(requests)
    return pd.DataFrame(
        {
            "start_ns": start,
            "host_end_ns": np.asarray(host_end_ns, dtype=np.int64)
            if not np.isscalar(host_end_ns)
            else np.full(n, host_end_ns, dtype=np.int64),
            "kind": column(kind, object),
            "request": requests,
            "index": np.arange(n, dtype=np.int64) if index is None else column(index, np.int64),
            "tokens": nullable_int(tokens),
            "batch": nullable_int(batch),
            "label": column(label, object),
            "prefill_tokens": nullable_int(prefill_tokens),
            "decode_sequences": nullable_int(decode_sequences),
            "model": column(model, object),
            "opens": column(opens, np.int64),
            "accepted": nullable_int(accepted),
        }
    )


def first_of_each(request: np.ndarray) -> np.ndarray:
    """1 at the first step of each request number, else 0: every request opens once."""
    return (~pd.Series(request).duplicated()).to_numpy().astype(np.int64)


def requests_opened_by(opens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Request number and index within the request of each step, given which steps open a request
    (the first step always does)."""
    opens = np.asarray(opens, dtype=bool).copy()
    if len(opens):
        opens[0] = True
    position = np.arange(len(opens))
    request = np.cumsum(opens) - 1
    index = position - np.maximum.accumulate(np.where(opens, position, 0))
    return request.astype(np.int64), index.astype(np.int64)


def empty_frame() -> pd.DataFrame:
    return boundary_frame(np.array([], dtype=np.int64), np.array([], dtype=np.int64))


@dataclass
class Views:
    """The timeline and the slices of it that several strategies read, each computed once when first asked for.

    `warnings` collects what earlier strategies noticed (e.g. a step regex that matched nothing); the
    strategy that answers hands them on in its segmentation.
    """

    timeline: Timeline
    step_regex: str | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def events(self) -> pd.DataFrame:
        return self.timeline.events

    @cached_property
    def annotations(self) -> pd.DataFrame:
        ev = self.events
        return ev[kind_mask(ev, ["annotation"])]

    @cached_property
    def ops(self) -> pd.DataFrame:
        ev = self.events
        return ev[kind_mask(ev, ["cpu_op"])]

    def ops_named(self, names: tuple[str, ...], columns: tuple[str, ...] | None = None) -> pd.DataFrame:
        """The host ops (cpu_op rows; every column, or only `columns`) with one of these exact names: what
        `ops[ops["name"].isin(names)]` gives, without copying every host op first."""
        ev = self.events
        rows = kind_mask(ev, ["cpu_op"]) & name_mask(ev, names)
        return ev[rows] if columns is None else take_rows(ev, rows, columns)

    @cached_property
    def launch_calls(self) -> pd.DataFrame:
        ev = self.events
        return ev[kind_mask(ev, ("runtime", "driver"))]

    @cached_property
    def graph_launches(self) -> pd.DataFrame:
        calls = self.launch_calls
        return calls[calls["name"].isin(GRAPH_LAUNCHES)]

    @cached_property
    def embeddings(self) -> pd.DataFrame:
        from .embedding import token_embeddings

        return token_embeddings(self.ops_named(("aten::embedding",)))

    def result(self, bounds: pd.DataFrame, method: str, confidence: float, *notes: str, evidence=()) -> Found:
        """A strategy's answer, carrying the warnings gathered so far plus its own notes."""
        return Found(bounds, Segmentation(method, confidence, (*self.warnings, *notes), tuple(evidence)))
