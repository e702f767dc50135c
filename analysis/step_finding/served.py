"""Whether the forwards found are a serving engine's packed batches, and what the trace says of each (the counts
analysis.serving follows from step to step).

A run is served when its steps come from vLLM's or SGLang's step annotations, when its forwards' attention ops state
per-sequence metadata of a packed batch, when the worker's python frames show requests joining and finishing, or when
the engine's own frames or ops name vLLM or SGLang. Then a forward's kind is no longer read from its position or its
token count alone (a packed forward of N positions may hold any mix of prompt chunks and decodes): step finding's
kinds are kept only where an annotation wrote them; the others are "unknown" until the ledger decides them.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pandas as pd

from ..event_rows import kind_mask
from ..names import name_matches
from ..serving.observations import (
    annotated_counts,
    batch_changes,
    empty_observations,
    short_of_largest,
    size_classes,
    step_sizes,
    worker_frame_counts,
)
from .frames import Found, Views
from .packed_metadata import packed_sequences

ANNOTATED = ("vllm-annotations", "sglang-annotations")
# a serving engine's own frames or custom ops: vLLM's python packages and its torch op namespaces, SGLang's
ENGINE_NAMES = re.compile(r"(?:^|/)vllm/|^vllm::|^_vllm_|(?:^|/)sglang/|^sgl_kernel::")


def observe_served(views: Views, found: Found) -> Found:
    """The forwards with bounds.attrs["serving"] (one row of counts per forward) when they are a served run's; the
    forwards unchanged otherwise."""
    bounds = found.bounds
    if bounds.empty:
        return found
    method = found.segmentation.method
    start, host_end = bounds["start_ns"].to_numpy(), bounds["host_end_ns"].to_numpy()
    after = np.append(start[1:], np.iinfo(np.int64).max)  # a forward's ops run until the next one starts
    tokens = _packed_tokens(views, start, after)
    sequences = packed_sequences(views, start, np.maximum(host_end, after), tokens)
    frames = worker_frame_counts(views, start, host_end)
    annotated = method in ANNOTATED
    engine = _engine_named(views)
    if not (annotated or (sequences >= 0).any() or frames is not None or engine):
        return found
    opaque = not annotated and frames is None and (sequences < 0).all() and (tokens < 0).all()
    if opaque and _one_request_per_run(found, start, host_end):
        return found  # the shape of unbatched generation, read from the forwards' sizes as before
    obs = empty_observations(len(bounds))
    if annotated:
        for column, values in annotated_counts(bounds).items():
            obs[column] = values
        stated = sequences >= 0
        obs.loc[stated & (obs["S"].to_numpy() < 0), "S"] = sequences[stated & (obs["S"].to_numpy() < 0)]
    else:
        obs["N"], obs["S"] = tokens, sequences
    changes = (
        batch_changes(views, start, obs["S"].to_numpy(), _lookups(views, start, after)) if frames is None else None
    )
    if changes is not None:
        obs["changed"] = changes
        # no step states its sequences: checked against the run's phases in follow_served, not here
        obs.attrs["changes_unchecked"] = bool((obs["S"].to_numpy() < 0).all())
    if frames is not None:
        obs["J"], obs["F"] = frames["J"], frames["F"]
    if not annotated and (tokens < 0).any():  # the positions are not stated: how big the forwards are
        sizes = step_sizes(views, start, bool(kind_mask(views.events, ["kernel"]).any()))
        obs["size"], obs["short"] = size_classes(sizes), short_of_largest(sizes)
    obs.attrs["idle_before"] = _idle_before(views, start, int(obs["J"].iloc[0]))
    bounds = bounds.copy()
    if not annotated:  # a position or a token count says nothing of a packed batch's mix: the ledger decides
        bounds["kind"] = np.where(bounds["kind"].to_numpy(dtype=object) == "empty", "empty", "unknown")
        for column in ("tokens", "batch", "prefill_tokens", "decode_sequences"):  # `[N]` ids are not one sequence
            bounds[column] = pd.array([pd.NA] * len(bounds), dtype="Int64")
    bounds.attrs = {**found.bounds.attrs, "serving": obs}
    evidence = "a serving engine's continuous batching: " + (
        "its step annotations" if annotated else "packed forwards" if (sequences >= 0).any() else "its frames and ops"
    )
    seg = found.segmentation
    return Found(bounds, replace(seg, evidence=(*seg.evidence, evidence)))


SIZED_KINDS = re.compile(r"^kinds from kernel (?:launch grids|time per forward): ")
RUN_PAUSE = 4.0  # as host_forwards.REQUEST_PAUSE: a pause this many times the usual one ends a run of forwards


def _one_request_per_run(found: Found, start: np.ndarray, host_end: np.ndarray) -> bool:
    """Whether nothing states the batch but the forwards' sizes, and they show unbatched generation: in every run of
    forwards (split at long pauses) the first, and only the first, is large (its prefill), the others small. A
    request joining a running batch would make a large forward inside a run; a prompt cut by the token budget, two
    large forwards in a row. Then the kinds the sizes gave stand, as for any single-request trace."""
    if not any(SIZED_KINDS.match(line) for line in found.segmentation.evidence):
        return False
    kind = found.bounds["kind"].to_numpy(dtype=object)
    pauses = start[1:] - host_end[:-1]  # from one forward's end to the next one's start
    typical = max(float(np.median(pauses)), 1.0) if len(pauses) else 1.0
    opens = np.append(True, pauses > RUN_PAUSE * typical)
    large = kind == "prefill"
    return bool(large.any()) and bool((large == (opens & (kind != "empty"))).all())


IDLE_FACTOR = 2.0


def _idle_before(views: Views, start: np.ndarray, joined_first: int) -> bool:
    """Whether the engine was idle when the profile began (no request running then): where the worker's frames say,
    a request joins in its first forward (a profile opened, then requests sent), and either the first forward
    starts after a pause longer than IDLE_FACTOR of its steps' usual spacing, or the host ran no op for longer before
    its first op than IDLE_FACTOR times the longest stretch without one between the run's first and last forwards
    (a running batch steps on at once: the host's waits between its steps bound how long it waits for the next)."""
    if len(start) < 3 or joined_first == 0:
        return False
    began = int(views.events["ts"].min())
    spacing = float(np.median(np.diff(start)))
    if spacing > 0 and (start[0] - began) > IDLE_FACTOR * spacing:
        return True
    return _host_waited_first(views, began, start)


def _host_waited_first(views: Views, began: int, start: np.ndarray) -> bool:
    """Whether the host's first op comes IDLE_FACTOR times later after the trace began than the longest stretch
    without a running op between the first and last forwards' starts (ops merged as intervals)."""
    ev = views.events
    rows = kind_mask(ev, ["cpu_op"])
    ts = ev["ts"].to_numpy()[rows]
    if len(ts) < 2:
        return False
    order = np.argsort(ts, kind="stable")
    ts, end = ts[order], np.maximum.accumulate((ts + ev["dur"].to_numpy()[rows])[order])
    waits = ts[1:] - end[:-1]
    during = (ts[1:] > start[0]) & (ts[1:] <= start[-1])
    if not during.any():
        return False
    return bool(ts[0] - began > IDLE_FACTOR * max(float(waits[during].max()), 1.0))


def _packed_tokens(views: Views, start: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Per forward, the positions of its packed token ids (`[N]` or `[1, N]` on its first token-embedding lookup),
    -1 where the lookup is not packed or carries no shape."""
    emb = views.embeddings
    out = np.full(len(start), -1, dtype=np.int64)
    if not len(emb) or "_dims" not in emb:
        return out
    ts = emb["ts"].to_numpy()
    pos = np.searchsorted(ts, start, side="left")
    inside = (pos < len(ts)) & (ts[np.minimum(pos, max(len(ts) - 1, 0))] < after)
    dims = emb["_dims"].to_numpy()
    for i in np.flatnonzero(inside):  # one lookup per forward
        ids = dims[pos[i]][1] if dims[pos[i]] and len(dims[pos[i]]) > 1 else None
        if isinstance(ids, list) and (len(ids) == 1 or (len(ids) == 2 and ids[0] == 1)):
            out[i] = int(ids[-1])
    return out


def _lookups(views: Views, start: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Per forward, the time of its first token-embedding lookup, -1 where it has none."""
    emb = views.embeddings
    if not len(emb):
        return np.full(len(start), -1, dtype=np.int64)
    ts = emb["ts"].to_numpy()
    pos = np.searchsorted(ts, start, side="left")
    inside = (pos < len(ts)) & (ts[np.minimum(pos, len(ts) - 1)] < after)
    return np.where(inside, ts[np.minimum(pos, len(ts) - 1)], -1).astype(np.int64)


def _engine_named(views: Views) -> bool:
    """Whether the trace's distinct names include a serving engine's frames or ops (on the categories: no row pass)."""
    names = views.events["name"]
    if isinstance(names.dtype, pd.CategoricalDtype):
        categories = pd.Series(names.cat.categories.astype(str))
        return bool(categories.str.contains(ENGINE_NAMES).any())
    return bool(name_matches(names, ENGINE_NAMES).any())
