"""How many sequences a packed forward holds, from the per-sequence metadata its attention op is given.

A serving engine packs every scheduled position of every sequence into one flat `[num_tokens]` batch (vLLM, SGLang):
the token ids' shape then counts positions, not sequences. The attention op, though, is told where each sequence's
queries start and how long each sequence is: vLLM's CPU attention `_C::cpu_attention_with_kv_cache(query [N, H, D],
..., query_start_loc [S + 1], seq_lens [S], ..., block_table [S, blocks], ...)`, FlashAttention's varlen forward
(`cu_seqlens_q [S + 1]`, `seqused_k [S]`, `block_table [S, blocks]`), and their kin. An op whose name says attention
and whose inputs hold one 1-D tensor of length S + 1 and one of length S (and, when its first input's leading size
is given, that size equals the forward's positions) states S exactly, with record_shapes. A flat token tensor never
does: sequences are never counted from it.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd

from ..event_rows import kind_mask, take_rows
from ..names import name_matches
from ..shapes import clean_dims
from .frames import Views

ATTENTION_NAME = re.compile(r"(?i)att(?:n|ention)|flash|varlen_fwd|fwd_kvcache|paged")


def packed_sequences(views: Views, start: np.ndarray, host_end: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """Per forward, the sequences its first metadata-carrying attention op states (-1 where none does). `tokens`:
    the forward's packed positions (-1 unknown), which the op's query must match."""
    out = np.full(len(start), -1, dtype=np.int64)
    ev = views.events
    if "input_dims" not in ev or not len(start):
        return out
    rows = kind_mask(ev, ["cpu_op"]) & name_matches(ev["name"], ATTENTION_NAME)
    if not rows.any():
        return out
    ops = take_rows(ev, rows, ("ts", "input_dims"))
    column = ops["input_dims"]
    if not isinstance(column.dtype, pd.CategoricalDtype):
        column = column.astype(str).astype("category")
    codes = column.cat.codes.to_numpy()
    used, inverse = np.unique(codes, return_inverse=True)
    categories = column.cat.categories
    stated = np.array([_stated(str(categories[c])) if c >= 0 else (-1, -1) for c in used], dtype=np.int64)
    per_op = stated[inverse.reshape(-1)]
    keep = per_op[:, 0] > 0
    ts, per_op = ops["ts"].to_numpy()[keep], per_op[keep]
    if not len(ts):
        return out
    lo = np.searchsorted(ts, start, side="left")
    hi = np.searchsorted(ts, np.maximum(host_end, start + 1), side="left")
    for i in np.flatnonzero(hi > lo):  # one slice per forward, not per event
        candidates = per_op[lo[i] : hi[i]]
        match = candidates[(candidates[:, 1] < 0) | (tokens[i] < 0) | (candidates[:, 1] == tokens[i])]
        if len(match):
            out[i] = match[0, 0]
    return out


def _stated(text: str) -> tuple[int, int]:
    """(sequences, the first input's leading size or -1) an op's input dims state; (-1, -1) when they do not: exactly
    one pair of 1-D inputs of lengths S + 1 and S (S >= 1), and a first input (the packed query) of at least S rows."""
    try:
        dims = clean_dims(json.loads(text)) if text else None
    except (ValueError, RecursionError):
        dims = None
    if not dims or len(dims) < 3:
        return -1, -1
    one_d = [d[0] for d in dims if len(d) == 1]
    pairs = {n - 1 for n in one_d if n >= 2 and (n - 1) in one_d}
    if len(pairs) != 1:
        return -1, -1
    sequences = pairs.pop()
    lead = dims[0][0] if len(dims[0]) >= 2 else -1
    if lead >= 0 and lead < sequences:  # fewer query rows than sequences: not a packed query
        return -1, -1
    return sequences, lead
