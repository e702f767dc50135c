"""What each forward holds: how many sequences, how many new positions, how many of them prefill, which model.

Runs on the boundary frame of the strategy that found the forwards, when that strategy read shapes (aten::embedding
lookups with record_shapes). The evidence, most exact first:

- a causal mask built on the host per sequence before a packed forward (one `[.., q_i, k_i]` triu_ per sequence,
  the q_i summing to the forward's new positions; HF continuous batching with sdpa): each sequence's new positions
  and cached length, so decodes (q = 1 after a prompt), prefill chunks and newly joined sequences (k = q) are exact;
- the token ids' shape: `[B, S]` is a padded batch of B sequences (beams, left-padded prompts) advancing S positions
  each; `[1, N]` or `[N]` sampled as S > 1 rows after the forward (the sampling op's `[S, vocab]` input) is a packed
  batch of S sequences (vLLM, SGLang, generate_batch), decode when N == S;
- the attention's key length against its query length: a forward that reads only its own positions starts its
  sequences afresh (a new request); one that reads a growing cache continues them;
- two token-embedding tables used in turn: the narrower model's forwards are a draft model's (speculative decoding).

Kinds follow: decode (every sequence one token), prefill (every sequence prefilling), mixed (both), verify (a target
forward scoring more than one position per decoding sequence), draft, empty. `opens` counts the requests that join.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from itertools import pairwise
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..shapes import clean_dims, token_shape
from .frames import Found, Views

SAMPLING_OPS = ("aten::argmax", "aten::multinomial", "aten::softmax", "aten::log_softmax", "aten::topk", "aten::sort")
ATTENTION_OPS = (
    "aten::scaled_dot_product_attention",
    "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_efficient_attention",
    "aten::_scaled_dot_product_cudnn_attention",
    "aten::_scaled_dot_product_flash_attention_for_cpu",
)
MASK_BLOCK_OPS = ("aten::triu_",)
READS_SHAPES = ("embedding-lookup", "host-forwards", "profiler-steps")  # strategies whose forwards hold lookups


@dataclass
class Reading:
    """Per forward, what the trace's shapes say (-1 or None: not recorded)."""

    table: list = field(default_factory=list)  # (rows, width) of the token-embedding table, None
    ids_batch: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # rows of the token ids, -1
    ids_positions: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # positions per row, -1
    packed_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))  # ids given as [1, N] or [N]
    sampled: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # rows sampled after it, -1
    query: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # attention query length, -1
    keys: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # attention key length, -1
    blocks: list = field(default_factory=list)  # per-sequence (q, k) mask blocks, or None


def compose(views: Views, found: Found) -> Found:
    """The strategy's forwards with their composition read from the trace, kinds and requests re-derived where
    it is exact enough; for the strategies that read annotations, only the counts the kinds imply."""
    bounds = found.bounds
    if bounds.empty:
        return found
    if found.segmentation.method not in READS_SHAPES or not len(views.embeddings):
        return Found(_implied_counts(bounds), found.segmentation)
    reading = read_forwards(views, bounds)
    if not any(t is not None for t in reading.table):
        return Found(_implied_counts(bounds), found.segmentation)
    steps, evidence, warnings = _composed(bounds, reading)
    if _same_answer(bounds, steps):
        evidence = []  # the shapes confirm what the strategy read from them: nothing new decided
    seg = found.segmentation
    segmentation = type(seg)(seg.method, seg.confidence, (*seg.warnings, *warnings), (*seg.evidence, *evidence))
    return Found(_implied_counts(steps), segmentation)


def _same_answer(before: pd.DataFrame, after: pd.DataFrame) -> bool:
    """Whether the composition left the strategy's kinds, requests, tokens and sequences as they were."""
    return all(before[c].equals(after[c]) for c in ("kind", "request", "index", "tokens", "batch"))


def read_forwards(views: Views, bounds: pd.DataFrame) -> Reading:
    """What the shapes inside (and just before) each forward say, one search per forward and op family."""
    start = bounds["start_ns"].to_numpy()
    host_end = bounds["host_end_ns"].to_numpy()
    after = np.append(start[1:], np.iinfo(np.int64).max)
    before = np.append(np.iinfo(np.int64).min, host_end[:-1])
    emb = views.embeddings
    first = _first_inside(emb["ts"].to_numpy(), start, after)
    dims = emb["_dims"].to_numpy()
    reading = Reading()
    reading.table = [_table(dims[i]) if i >= 0 else None for i in first]
    shapes = [token_shape(dims[i]) if i >= 0 else (None, None) for i in first]
    reading.ids_batch = np.array([b if b is not None else -1 for b, _ in shapes], dtype=np.int64)
    reading.ids_positions = np.array([p if p is not None else -1 for _, p in shapes], dtype=np.int64)
    reading.packed_ids = np.array([i >= 0 and _packed_ids(dims[i]) for i in first], dtype=bool)
    vocab = {t[0] for t in reading.table if t is not None}
    ops = shaped_ops(views)
    reading.sampled = _sampled_rows(ops, start, after, vocab)
    reading.query, reading.keys = _attention_lengths(ops, start, host_end)
    reading.blocks = _mask_blocks(ops, before, start, reading.ids_positions, reading.ids_batch)
    return reading


def _first_inside(ts: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Index of the first of the sorted times in [start, end) of each range, -1 for none."""
    pos = np.searchsorted(ts, start, side="left")
    ok = (pos < len(ts)) & (ts[np.minimum(pos, max(len(ts) - 1, 0))] < end) if len(ts) else np.zeros(len(start), bool)
    return np.where(ok, pos, -1)


def _table(dims) -> tuple[int, int] | None:
    if dims and isinstance(dims[0], list) and len(dims[0]) == 2:
        return int(dims[0][0]), int(dims[0][1])
    return None


def _packed_ids(dims) -> bool:
    ids = dims[1] if dims and len(dims) > 1 else None
    return isinstance(ids, list) and (len(ids) == 1 or (len(ids) == 2 and ids[0] == 1))


class ShapedOps(NamedTuple):
    """The host ops whose shapes the composition reads, read once: start times, names, and for each op the index of
    its input dims among `distinct` (the parsed records, one per distinct text; the last is None: unrecorded)."""

    ts: np.ndarray
    name: np.ndarray
    code: np.ndarray
    distinct: list

    def family(self, names: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
        """(start times, index into `distinct`) of the ops with one of these names, in time order."""
        rows = np.isin(self.name, names)
        return self.ts[rows], self.code[rows]

    def per_record(self, feature, width: int = 1) -> np.ndarray:
        """`feature(dims)` of every distinct record (an array, one row per record)."""
        return np.array([feature(d) for d in self.distinct], dtype=np.int64).reshape(len(self.distinct), width)


def shaped_ops(views: Views) -> ShapedOps:
    names = (*SAMPLING_OPS, *ATTENTION_OPS, *MASK_BLOCK_OPS)
    if "input_dims" not in views.events:
        return ShapedOps(np.zeros(0, np.int64), np.zeros(0, object), np.zeros(0, np.int64), [None])
    ops = views.ops_named(names, ("ts", "name", "input_dims"))
    column = ops["input_dims"]
    if not isinstance(column.dtype, pd.CategoricalDtype):
        column = column.astype(str).astype("category")
    codes = column.cat.codes.to_numpy()
    used, inverse = np.unique(codes, return_inverse=True)  # parse only the records these ops carry
    categories = column.cat.categories
    distinct = [_dims(str(categories[c])) if c >= 0 else None for c in used] + [None]
    return ShapedOps(ops["ts"].to_numpy(), ops["name"].astype(str).to_numpy(), inverse.astype(np.int64), distinct)


def _dims(text: str):
    if not text:
        return None
    try:
        return clean_dims(json.loads(text))
    except (ValueError, RecursionError):
        return None


def _sampled_rows(ops: ShapedOps, start: np.ndarray, after: np.ndarray, vocab: set[int]) -> np.ndarray:
    """Rows of the first sampling op (input [S, vocab] or [S, P, vocab]) after each forward starts and before the
    next one: the sequences whose next token is drawn, -1 where none is seen."""
    ts, code = ops.family(SAMPLING_OPS)
    rows = ops.per_record(lambda d: _vocab_rows(d, vocab))[code, 0]
    keep = rows > 0
    ts, rows = ts[keep], rows[keep]
    first = _first_inside(ts, start, after)
    if not len(rows):
        return np.full(len(start), -1, np.int64)
    return np.where(first >= 0, rows[np.maximum(first, 0)], -1)


def _vocab_rows(dims, vocab: set[int]) -> int:
    logits = dims[0] if dims else None
    if isinstance(logits, list) and len(logits) in (2, 3) and logits[-1] in vocab:
        return int(logits[0])
    return -1


def _attention_lengths(ops: ShapedOps, start: np.ndarray, host_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(query length, key length) of the first attention op inside each forward, -1 where none is recorded."""
    ts, code = ops.family(ATTENTION_OPS)
    lengths = ops.per_record(_qk, 2)[code]
    first = _first_inside(ts, start, np.maximum(host_end, start + 1))
    if not len(lengths):
        return np.full(len(start), -1, np.int64), np.full(len(start), -1, np.int64)
    picked = np.where(first[:, None] >= 0, lengths[np.maximum(first, 0)], -1)
    return picked[:, 0], picked[:, 1]


def _qk(dims) -> tuple[int, int]:
    if dims and len(dims) >= 2 and len(dims[0]) == 4 and len(dims[1]) == 4:
        return int(dims[0][2]), int(dims[1][2])
    return -1, -1


def _mask_blocks(ops: ShapedOps, before: np.ndarray, start: np.ndarray, positions: np.ndarray, batch: np.ndarray):
    """Per packed forward, the (q, k) of each sequence's causal-mask block built on the host just before it (after
    the previous forward's host work): kept only when the q add up to the forward's new positions."""
    ts, code = ops.family(MASK_BLOCK_OPS)
    shape = ops.per_record(_block, 2)[code]
    keep = shape[:, 0] > 0
    ts, shape = ts[keep], shape[keep]
    lo = np.searchsorted(ts, before, side="right")
    hi = np.searchsorted(ts, start, side="left")
    blocks = []
    for i in range(len(start)):  # one slice per forward, not per event
        qk = shape[lo[i] : hi[i]] if hi[i] > lo[i] and batch[i] == 1 else None
        blocks.append(qk if qk is not None and int(qk[:, 0].sum()) == positions[i] else None)
    return blocks


def _block(dims) -> tuple[int, int]:
    mask = dims[0] if dims else None
    if isinstance(mask, list) and len(mask) == 4 and mask[0] == 1 and mask[1] == 1 and mask[2] > 0:
        return int(mask[2]), int(mask[3])
    return -1, -1


class Composed(NamedTuple):
    """One forward's reading: kind, new positions, sequences, prefill positions, decoding sequences, requests
    joining, and the source that decided (None: a count the trace does not give)."""

    kind: str
    tokens: int
    sequences: int
    prefill: int | None
    decoding: int | None
    opens: int
    source: str


def _composed(bounds: pd.DataFrame, r: Reading) -> tuple[pd.DataFrame, list[str], list[str]]:
    steps = bounds.copy()
    draft, role_note = _draft_forwards(r)
    known = np.array([t is not None for t in r.table]) & (r.ids_positions >= 0)
    target = known & ~draft
    context = _Context(
        speculative=bool(draft.any()),
        growing_cache=_cache_grows(r.keys[target]),
        first_target=int(np.flatnonzero(target)[0]) if target.any() else -1,
    )
    read = {}
    for i in np.flatnonzero(known):  # one reading per forward, not per event
        read[int(i)] = _one_forward(r, int(i), bool(draft[i]), context)
        context.previous_sequences = read[int(i)].sequences
    steps = _with_readings(steps, read, draft)
    sources = {c.source for c in read.values()}
    steps = _requests(steps, r.blocks if "mask" in sources else None)
    evidence = [role_note] if role_note else []
    if context.growing_cache and (steps["kind"] == "verify").any():
        steps["accepted"] = _accepted(steps, r, target)
        evidence.append(
            "accepted draft tokens per verify from the target's cache: the cached length of its next forward "
            "minus this one's, less the token the target adds itself"
        )
    evidence += _evidence(sources, context.growing_cache)
    uncertain = sum(c.source == "sampled" and c.kind == "mixed" for c in read.values())
    warnings = []
    if uncertain:
        warnings.append(
            f"{uncertain} packed forward(s) hold more positions than sequences after a forward that was already "
            "decoding: taken as mixed (decodes plus a prefill chunk); the split between them, and the requests "
            "that joined, are not in the trace (requests counted from the batch's growth: a lower bound)"
        )
    return steps, evidence, warnings


@dataclass
class _Context:
    speculative: bool  # a draft model's forwards are in the trace
    growing_cache: bool  # the attention's key length grows: a dynamic cache
    first_target: int  # the first forward of the served model
    previous_sequences: int = 0  # sequences of the forward before


def _one_forward(r: Reading, i: int, draft: bool, c: _Context) -> Composed:
    b, p = int(r.ids_batch[i]), int(r.ids_positions[i])
    if draft:
        return Composed("draft", b * p, b, None, None, 0, "draft")
    blocks, sampled = r.blocks[i], int(r.sampled[i])
    if blocks is not None and (len(blocks) > 1 or sampled <= 1):
        return _from_mask_blocks(blocks[:, 0], blocks[:, 1])
    if r.packed_ids[i] and sampled > 1:
        return _from_packed(b * p, sampled, c.previous_sequences)
    return _from_padded(b, p, int(r.query[i]), int(r.keys[i]), i == c.first_target, c)


def _from_mask_blocks(q: np.ndarray, k: np.ndarray) -> Composed:
    """Exact: a sequence with one new position after cached ones decodes; one reading nothing cached joins."""
    decode = (q == 1) & (k > 1)
    kind = "mixed" if decode.any() and (~decode).any() else "decode" if decode.all() else "prefill"
    return Composed(kind, int(q.sum()), len(q), int(q[~decode].sum()), int(decode.sum()), int((k == q).sum()), "mask")


def _from_packed(tokens: int, sequences: int, previous: int) -> Composed:
    """[1, N] ids, S sequences sampled: N == S decodes them all; otherwise some prefill, and after a forward that
    held sequences the split between prefill and decode is not known."""
    opens = sequences if previous == 0 else max(0, sequences - previous)
    if tokens == sequences:
        return Composed("decode", tokens, sequences, 0, sequences, opens, "sampled")
    if previous == 0:
        return Composed("prefill", tokens, sequences, tokens, 0, opens, "sampled")
    return Composed("mixed", tokens, sequences, None, None, opens, "sampled")


def _from_padded(b: int, p: int, query: int, keys: int, first: bool, c: _Context) -> Composed:
    """[B, S] ids: B sequences of S new positions each. A multi-position forward opens a request when it is the
    first, or its attention reads only its own positions; one that reads a growing cache continues its request
    (a verify when a draft model is present, a prefill chunk otherwise); without attention shapes and without a
    draft model, as before: it opens one."""
    source = "attention" if query > 0 else "ids"
    fresh = query > 0 and query == keys
    continues = query > 0 and keys > query and c.growing_cache
    if first or (p > 1 and (fresh or (not continues and not c.speculative))):
        return Composed("prefill", b * p, b, b * p, 0, 1, source)
    if p > 1 and c.speculative:
        return Composed("verify", b * p, b, 0, b, 0, source)
    if p > 1:
        return Composed("prefill", b * p, b, b * p, 0, 0, source)
    return Composed("decode", b, b, 0, b, 0, source)


def _with_readings(steps: pd.DataFrame, read: dict[int, Composed], draft: np.ndarray) -> pd.DataFrame:
    """The boundary frame with each read forward's composition; the others keep what the strategy said."""
    rows = np.fromiter(read, dtype=np.int64, count=len(read))
    values = list(read.values())
    kind = steps["kind"].to_numpy(dtype=object).copy()
    kind[rows] = [c.kind for c in values]
    opens = steps["opens"].to_numpy().copy()
    opens[rows] = [c.opens for c in values]
    steps["kind"], steps["opens"] = kind, opens.astype(np.int64)
    for column, field_name in (
        ("tokens", "tokens"),
        ("batch", "sequences"),
        ("prefill_tokens", "prefill"),
        ("decode_sequences", "decoding"),
    ):
        current = steps[column].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
        if column in ("prefill_tokens", "decode_sequences"):
            current = np.full(len(steps), np.nan)
        current[rows] = [np.nan if getattr(c, field_name) is None else getattr(c, field_name) for c in values]
        steps[column] = _ints(current)
    steps["model"] = np.where(draft, "draft", steps["model"].to_numpy(dtype=object))
    return steps


def _accepted(steps: pd.DataFrame, r: Reading, target: np.ndarray):
    """Per verify forward, the draft tokens the target kept: its next forward (same request) caches this one's
    cached positions plus the last token plus the accepted ones. <NA> where either forward's cache is unknown."""
    kind, request = steps["kind"].to_numpy(), steps["request"].to_numpy()
    past = np.where((r.keys > 0) & (r.query > 0), r.keys - r.query, -1)
    idx = np.flatnonzero(target)
    accepted = np.full(len(steps), np.nan)
    for a, b in pairwise(idx):  # consecutive target forwards: a few per request
        if kind[a] == "verify" and request[a] == request[b] and past[a] >= 0 and past[b] >= 0:
            scored = int(r.ids_positions[a]) - 1  # the draft tokens it scored after its last accepted one
            accepted[a] = min(max(past[b] - past[a] - 1, 0), max(scored, 0))
    return _ints(accepted)


def _ints(values: np.ndarray):
    return pd.array(np.where(np.isnan(values), np.nan, np.round(values)), dtype="Float64").astype("Int64")


def _cache_grows(keys: np.ndarray) -> bool:
    """Whether the attention's key length grows from forward to forward (a dynamic cache: keys = cached + new);
    a static cache reads the same preallocated length every time and says nothing about what is cached."""
    k = keys[keys > 0]
    return len(k) >= 2 and len(np.unique(k)) > 1


def _draft_forwards(r: Reading) -> tuple[np.ndarray, str]:
    """Forwards of a draft model: two or more token-embedding tables in use, the narrower ones (fewer columns:
    a smaller model) are drafts; the target is the widest. No second table: no draft."""
    tables = [t for t in r.table if t is not None]
    distinct = sorted(set(tables), key=lambda t: (t[1], tables.count(t)))
    draft = np.zeros(len(r.table), dtype=bool)
    if len(distinct) < 2:
        return draft, ""
    target = distinct[-1]
    draft[:] = [t is not None and t != target for t in r.table]
    note = (
        f"{len(distinct)} token-embedding tables in use: {list(target)} ({tables.count(target)} forwards) is the "
        f"target model's, the narrower {', '.join(str(list(t)) for t in distinct[:-1])} a draft model's "
        f"({int(draft.sum())} forwards, speculative decoding); draft forwards open no request"
    )
    return draft, note


def _requests(steps: pd.DataFrame, blocks: list | None) -> pd.DataFrame:
    """Request numbers from the requests each forward opens (a draft forward before the first opening serves the
    first request). With per-sequence mask blocks, sequences are followed from forward to forward (a sequence
    whose cached length equals one's length in the forward before is that one) and a forward's request is the
    oldest it serves; each request's first forward and the forward that emits its first token go in
    attrs["request_steps"] for TTFT."""
    opens = steps["opens"].to_numpy()
    request = np.maximum(np.cumsum(opens) - 1, 0)
    if blocks is not None:
        request, first_token = _follow_sequences(blocks, opens, request)
        steps.attrs["request_steps"] = first_token
    steps["request"] = request.astype(np.int64)
    steps["index"] = steps.groupby("request", sort=False).cumcount().to_numpy().astype(np.int64)
    return steps


def _follow_sequences(blocks: list, opens: np.ndarray, fallback: np.ndarray) -> tuple[np.ndarray, pd.DataFrame]:
    """(each forward's oldest request, per request its first forward and first-token forward), following each
    sequence by its cached length: forwards and their sequences are few, not events."""
    request = fallback.copy()
    live: list[tuple[int, int]] = []  # (request, length after the forward) of the sequences seen last
    first_step: dict[int, int] = {}
    token_step: dict[int, int] = {}
    next_id = 0
    for i, qk in enumerate(blocks):
        if qk is None:
            continue
        now = []
        pool = list(live)
        for q, k in qk:
            past = int(k - q)
            match = next((j for j, (_, length) in enumerate(pool) if past > 0 and length == past), None)
            if match is None:
                rid, next_id = next_id, next_id + 1
                first_step[rid] = i
            else:
                rid = pool.pop(match)[0]
            if not (q == 1 and past > 0):  # still prefilling: its first token comes at the end of this chunk
                token_step[rid] = i
            now.append((rid, int(k)))
        live = now
        if now:
            request[i] = min(rid for rid, _ in now)
    table = pd.DataFrame(
        {
            "request": list(first_step),
            "first_step": list(first_step.values()),
            "token_step": [token_step.get(rid, first_step[rid]) for rid in first_step],
        }
    )
    return request, table


def _evidence(sources: set[str], growing_cache: bool) -> list[str]:
    lines = []
    if "mask" in sources:
        lines.append(
            "composition from the per-sequence causal mask blocks built before each packed forward (one [q, k] "
            "block per sequence, the q adding up to the forward's positions): decodes, prefill chunks and joining "
            "requests exact"
        )
    if "sampled" in sources:
        lines.append("packed forwards ([1, N] token ids): sequences from the rows sampled after each forward")
    if "attention" in sources:
        cache = "a growing cache continues them" if growing_cache else "a static cache tells nothing"
        lines.append(
            "requests from the attention's key length: a multi-token forward that reads only its own positions "
            f"starts a request; {cache}"
        )
    if "ids" in sources:
        lines.append("sequences and positions from the token ids' [batch, positions] shape")
    return lines


def _implied_counts(steps: pd.DataFrame) -> pd.DataFrame:
    """Fill prefill_tokens and decode_sequences where the kind alone implies them: a prefill's tokens all prefill,
    a decode's sequences all decode; mixed, verify and draft keep what their source read."""
    kind = steps["kind"].to_numpy(dtype=object)
    prefill = steps["prefill_tokens"].copy()
    decoding = steps["decode_sequences"].copy()
    is_prefill, is_decode = kind == "prefill", kind == "decode"
    prefill[is_prefill & prefill.isna().to_numpy()] = steps["tokens"][is_prefill & prefill.isna().to_numpy()]
    decoding[is_prefill & decoding.isna().to_numpy()] = 0
    prefill[is_decode & prefill.isna().to_numpy()] = 0
    decoding[is_decode & decoding.isna().to_numpy()] = steps["batch"][is_decode & decoding.isna().to_numpy()]
    empty = kind == "empty"
    prefill[empty], decoding[empty] = 0, 0
    return steps.assign(prefill_tokens=prefill.astype("Int64"), decode_sequences=decoding.astype("Int64"))
