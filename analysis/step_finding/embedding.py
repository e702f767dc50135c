"""Steps from the token-embedding lookup that opens every eager forward (aten::embedding on the host).

With record_shapes the lookup's input says batch and new tokens, so kinds and requests are exact;
compiled or graph-replayed decode forwards, which never call aten::embedding, are merged in from
their compiled-region calls or graph launches, and the lm_head matmul marks where each forward ends.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd

from ..event_rows import kind_mask, name_mask
from ..names import name_matches
from ..shapes import clean_dims
from ..shapes import token_shape as checked_token_shape
from .frames import (
    BOUNDARY_COLUMNS,
    GRAPH_LAUNCHES,
    Found,
    Views,
    boundary_frame,
    first_of_each,
    requests_opened_by,
)


def embedding_lookup(views: Views) -> Found | None:
    embeddings = views.embeddings
    if not len(embeddings):
        return None
    ev = views.events
    steps, shaped = _forwards_from_embeddings(embeddings)
    evidence = [f"{len(embeddings)} host aten::embedding lookups, one per eager forward"]
    notes = []
    compiled = _compiled_forwards(ev, steps)
    if compiled is not None:
        steps = _merge_compiled_forwards(steps, compiled, shaped)
        note = (
            f"{len(compiled)} forwards with no host embedding lookup (compiled or graph-replayed) found by "
            f"{compiled['label'].iloc[0][:60]!r}: taken as decode steps"
        )
        notes.append(note)
        evidence.append(note)
    read = tuple(c for c in ("ts", "dur", "name", "input_dims") if c in views.events)  # what the lm_head test reads
    lm_head_candidates = views.ops_named(LM_HEAD_OPS, read)
    steps = _end_forwards_at_lm_head(steps, embeddings, lm_head_candidates)
    if shaped:
        evidence.append("kinds and tokens from the lookups' input shapes")
    else:
        notes.append("no input shapes recorded (record_shapes off): prefill/decode told apart by position")
        evidence.append("kinds by position: the first forward of a request is its prefill")
    if len(steps) < 2 and steps["kind"].eq("prefill").all():
        notes.append("a single forward pass: no decode steps")
    return views.result(steps, "embedding-lookup", 0.85 if shaped else 0.6, *notes, evidence=evidence)


def token_embeddings(ops: pd.DataFrame) -> pd.DataFrame:
    """aten::embedding host ops that look up tokens (the largest table when shapes are known)."""
    emb = ops[ops["name"] == "aten::embedding"]
    if emb.empty:
        return emb
    shapes = emb["input_dims"].astype(str).map(_parse_dims)
    rows = shapes.map(lambda d: d[0][0] if d and len(d) > 1 and len(d[0]) == 2 else -1)
    if (rows > 0).any():
        emb = emb[(rows == rows.max()).to_numpy()]
        shapes = shapes[(rows == rows.max()).to_numpy()]
    # One lookup per forward: drop lookups nested in another on the same thread.
    emb = emb.assign(_dims=shapes.to_numpy())
    return emb.sort_values("ts", kind="stable")


def _parse_dims(text: str):
    if not text:
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return clean_dims(value)


def token_shape(dims) -> tuple[int | None, int | None]:
    """(batch, new positions per sequence) from an embedding's input dims, None when unknown."""
    return checked_token_shape(dims)


def _forwards_from_embeddings(emb: pd.DataFrame) -> tuple[pd.DataFrame, bool]:
    starts = emb["ts"].to_numpy()
    shapes = [token_shape(d) for d in emb["_dims"]]
    shaped = all(s[1] is not None for s in shapes)
    n = len(starts)
    new_request = np.zeros(n, dtype=bool)
    new_request[0] = True
    if shaped:
        seq = np.array([s[1] for s in shapes])
        new_request[1:] |= seq[1:] > 1  # a multi-token forward after the first opens a new request
    elif n > 2:
        intervals = np.diff(starts)
        new_request[1:] |= intervals > 4 * np.median(intervals)
    request, index = requests_opened_by(new_request)
    kind = np.where(index == 0, "prefill", "decode")
    steps = boundary_frame(
        starts,
        (emb["ts"] + emb["dur"]).to_numpy(),
        kind=kind.astype(object),
        request=request,
        index=index,
        tokens=[None if s[1] is None else s[0] * s[1] for s in shapes],
        batch=[s[0] for s in shapes],
    )
    return steps, shaped


LM_HEAD_OPS = ("aten::linear", "aten::matmul", "aten::mm", "aten::addmm")


def _end_forwards_at_lm_head(steps: pd.DataFrame, emb: pd.DataFrame, ops: pd.DataFrame) -> pd.DataFrame:
    """A forward's host work ends with the lm_head: the matmul whose weight has the vocabulary's rows.

    Knowing it lets the last forward of a request end where its work does instead of at a guess.
    """
    vocab = {d[0][0] for d in emb["_dims"] if d and len(d) > 1 and isinstance(d[0], list) and len(d[0]) == 2}
    if len(vocab) != 1:
        return steps
    vocab_rows = vocab.pop()
    mm = ops[ops["name"].isin(LM_HEAD_OPS)]
    if mm.empty:
        return steps
    dims = mm["input_dims"]
    categories = dims.cat.categories
    hit = np.fromiter((_has_vocab_weight(_parse_dims(str(c)), vocab_rows) for c in categories), bool, len(categories))
    heads = mm[np.append(hit, False)[dims.cat.codes.to_numpy()]]
    if heads.empty:
        return steps
    head_ends = (heads["ts"] + heads["dur"]).to_numpy()
    head_starts = heads["ts"].to_numpy()
    starts = steps["start_ns"].to_numpy()
    next_start = np.append(starts[1:], np.iinfo(np.int64).max)
    # the last lm_head starting inside each forward's range
    last = np.searchsorted(head_starts, next_start, side="left") - 1
    inside = (last >= 0) & (head_starts[np.maximum(last, 0)] >= starts)
    host_end = np.where(inside, head_ends[np.maximum(last, 0)], steps["host_end_ns"].to_numpy())
    return steps.assign(host_end_ns=np.maximum(host_end, steps["host_end_ns"].to_numpy()))


def _has_vocab_weight(dims, vocab_rows: int) -> bool:
    if not dims:
        return False
    return any(isinstance(d, list) and len(d) == 2 and vocab_rows in d for d in dims[1:])


COMPILED_REGION = re.compile(r"^Torch-Compiled Region: ")
# Between two forwards the host takes the token: a sampling op, or a sync / device-to-host copy.
TOKEN_HANDOFF = re.compile(r"^aten::(argmax|multinomial)$|Synchronize|MemcpyDtoH|Memcpy DtoH|cudaMemcpy$|hipMemcpy$")


def _compiled_forwards(ev: pd.DataFrame, eager: pd.DataFrame) -> pd.DataFrame | None:
    """Forwards that never call aten::embedding on the host: torch.compile'd or CUDA-graph-replayed decode steps.

    Each is opened by a compiled-region call (the most frequent one) or, failing that, a graph launch. They
    count as forwards only when the host takes a token between them; graph pieces of one forward (vLLM's
    piecewise graphs) have no token handoff between them and stay inside their eager forward.
    """
    regions = ev[kind_mask(ev, ("cpu_op", "annotation")) & name_matches(ev["name"], COMPILED_REGION)]
    if len(regions):
        counts = regions["name"].value_counts()
        chosen = counts[counts == counts.max()].index
        first = regions[regions["name"].isin(chosen)].iloc[0]["name"]
        openers = regions[regions["name"] == first]
    else:
        openers = ev[kind_mask(ev, ("runtime", "driver")) & name_mask(ev, GRAPH_LAUNCHES)]
    if openers.empty:
        return None
    starts = openers["ts"].to_numpy()
    eager_starts = eager["start_ns"].to_numpy()
    per_forward = np.diff(np.searchsorted(starts, np.append(eager_starts, np.iinfo(np.int64).max)))
    if len(eager_starts) >= 2 and per_forward.min() == per_forward.max() > 0:
        return None  # the same number inside every eager forward: pieces of it, not forwards
    handoffs = ev["ts"].to_numpy()[name_matches(ev["name"], TOKEN_HANDOFF)]
    if len(starts) > 1:
        between = np.searchsorted(handoffs, starts[1:]) - np.searchsorted(handoffs, starts[:-1], side="right")
        if np.mean(between > 0) < 0.9:
            return None
    return pd.DataFrame(
        {
            "start_ns": starts,
            "host_end_ns": (openers["ts"] + openers["dur"]).to_numpy(),
            "label": openers["name"].astype(str).to_numpy(),
        }
    )


def _merge_compiled_forwards(eager: pd.DataFrame, compiled: pd.DataFrame, shaped: bool) -> pd.DataFrame:
    """Interleave eager and compiled forwards; an eager multi-token forward (or any eager one, without shapes)
    opens a request, the compiled ones that follow are its decode steps with the prefill's batch."""
    eager = eager.assign(_eager=True)
    merged = pd.concat([eager, compiled.assign(_eager=False)], ignore_index=True)
    merged = merged.sort_values("start_ns", kind="stable").reset_index(drop=True)
    is_eager = merged["_eager"].to_numpy(dtype=bool)
    opens = is_eager & (merged["kind"].to_numpy() == "prefill") if shaped else is_eager
    request = np.maximum(np.cumsum(opens) - 1, 0)
    position = np.arange(len(merged))
    first = np.maximum.accumulate(np.where(opens, position, 0))
    batch = merged["batch"].astype("Float64").ffill()
    merged["batch"] = pd.array(batch.round(), dtype="Int64")
    merged.loc[~is_eager, "kind"] = "decode"
    merged.loc[~is_eager, "tokens"] = merged.loc[~is_eager, "batch"]
    merged["request"] = request.astype(np.int64)
    merged["index"] = (position - first).astype(np.int64)
    merged["label"] = merged["label"].fillna("")
    merged["model"] = merged["model"].fillna("")
    merged["opens"] = first_of_each(merged["request"].to_numpy())
    for column in ("prefill_tokens", "decode_sequences", "accepted"):
        merged[column] = pd.array(merged[column].astype("Float64").round(), dtype="Int64")
    return merged[list(BOUNDARY_COLUMNS)]
