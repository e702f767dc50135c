"""Find the forward passes (steps) in a trace, and say how they were found and how sure we are.

Order of preference: explicit annotations (a user's regex, Stepscope's own
markers, vLLM, SGLang, ProfilerStep), then the trace's own structure (the
token-embedding lookup that starts every forward, CUDA/HIP graph replays),
else nothing: training or single forwards are not generation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import numpy as np
import pandas as pd

from analysis.annotations import (
    StepLabel,
    oversized_step_warnings,
    profiler_step_label,
    regex_label,
    sglang_label,
    stepscope_label,
    vllm_label,
)
from analysis.kernel_pattern import KernelPattern, repeating_pattern
from analysis.model import Segmentation
from analysis.names import name_matches
from analysis.shapes import clean_dims, shape_warnings, token_shape
from parsers.timeline import Timeline

BOUNDARY_COLUMNS = ("start_ns", "host_end_ns", "kind", "request", "index", "tokens", "batch", "label")
TRAINING_NAME = re.compile(r"Backward|autograd::engine|Optimizer\.step")
GRAPH_LAUNCHES = ("cudaGraphLaunch", "hipGraphLaunch", "cuGraphLaunch")


def find_steps(timeline: Timeline, step_regex: str | None = None) -> tuple[pd.DataFrame, Segmentation]:
    ev = timeline.events
    annotations = ev[ev["kind"] == "annotation"]
    ann_names = annotations["name"].astype(str)
    warnings: list[str] = [*oversized_step_warnings(ann_names.unique()), *shape_warnings(ev)]  # issue 16

    families: list[tuple[str, float, Callable[[str], StepLabel | None]]] = []
    if step_regex:
        try:
            pattern = re.compile(step_regex)
        except re.error as exc:
            raise ValueError(f"step regex {step_regex!r} is invalid: {exc}") from None
        families.append(("user-regex", 0.9, lambda name: regex_label(pattern, name)))
    families += [
        ("stepscope-markers", 1.0, stepscope_label),
        ("vllm-annotations", 0.95, vllm_label),
        ("sglang-annotations", 0.95, sglang_label),
    ]
    for method, confidence, parse in families:
        found = _annotated_steps(annotations, ann_names, parse)
        if found is not None:
            if method == "user-regex" and found["kind"].isna().any():
                found = _kinds_by_position(found)
                warnings.append("the regex has no (?P<kind>...) group: first step taken as prefill, the rest decode")
            return found, Segmentation(method, confidence, tuple(warnings))
    if step_regex:
        warnings.append(f"no annotation matches the step regex {step_regex!r}")

    ops = ev[ev["kind"] == "cpu_op"]
    training = int(name_matches(ops["name"], TRAINING_NAME).sum()) if len(ops) else 0
    if training:
        warnings.append(f"training trace ({training} backward/optimizer ops): no generation steps")
        return _empty(), Segmentation("none", 0.9, tuple(warnings))

    embeddings = _token_embeddings(ops)
    profiler_steps = _annotated_steps(annotations, ann_names, profiler_step_label)
    if profiler_steps is not None and len(embeddings):
        steps = _label_profiler_steps(profiler_steps, embeddings)
        return steps, Segmentation("profiler-steps", 0.7, tuple(warnings))
    if len(embeddings):
        steps, shaped = _forwards_from_embeddings(embeddings)
        compiled = _compiled_forwards(ev, steps)
        if compiled is not None:
            steps = _merge_compiled_forwards(steps, compiled, shaped)
            warnings.append(
                f"{len(compiled)} forwards with no host embedding lookup (compiled or graph-replayed) found by "
                f"{compiled['label'].iloc[0][:60]!r}: taken as decode steps"
            )
        steps = _end_forwards_at_lm_head(steps, embeddings, ops)
        if not shaped:
            warnings.append("no input shapes recorded (record_shapes off): prefill/decode told apart by position")
        if len(steps) < 2 and steps["kind"].eq("prefill").all():
            warnings.append("a single forward pass: no decode steps")
        return steps, Segmentation("embedding-lookup", 0.85 if shaped else 0.6, tuple(warnings))

    graphs = ev[(ev["kind"].isin(("runtime", "driver"))) & ev["name"].isin(GRAPH_LAUNCHES)]
    if len(graphs) >= 2:
        steps = pd.DataFrame(
            {
                "start_ns": graphs["ts"].to_numpy(),
                "host_end_ns": (graphs["ts"] + graphs["dur"]).to_numpy(),
                "kind": "decode",
                "request": 0,
                "index": np.arange(len(graphs)),
                "tokens": pd.array([None] * len(graphs), dtype="Int64"),
                "batch": pd.array([None] * len(graphs), dtype="Int64"),
                "label": graphs["name"].astype(str).to_numpy(),
            }
        )
        warnings.append("steps inferred from graph replays: each replay taken as one decode step")
        return steps, Segmentation("graph-replays", 0.4, tuple(warnings))
    repeated = _steps_from_kernel_pattern(timeline)
    if repeated is not None:
        steps, pattern = repeated
        warnings.append(
            f"steps inferred from a repeating kernel sequence: every {pattern.kernels_per_step} kernels, "
            f"opening with {pattern.name[:80]!r}; prefill/decode told apart by length only"
        )
        return steps, Segmentation("kernel-pattern", 0.3, tuple(warnings))
    warnings.append("nothing in the trace looks like token generation")
    return _empty(), Segmentation("none", 0.5, tuple(warnings))


def _empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="Int64" if c in ("tokens", "batch") else None) for c in BOUNDARY_COLUMNS})


def _annotated_steps(
    annotations: pd.DataFrame, names: pd.Series, parse: Callable[[str], StepLabel | None]
) -> pd.DataFrame | None:
    distinct = names.unique()
    labels = {n: parse(n) for n in distinct}
    labels = {n: lab for n, lab in labels.items() if lab is not None}
    if not labels:
        return None
    rows = annotations[names.isin(list(labels)).to_numpy()]
    # Tensor-parallel traces repeat each step per rank: keep the process with the most steps.
    main_pid = rows["pid"].value_counts().index[0]
    rows = rows[rows["pid"] == main_pid].sort_values("ts", kind="stable")
    parsed = [labels[str(n)] for n in rows["name"]]
    requests = [lab.request if lab.request is not None else 0 for lab in parsed]
    indexes = [lab.index for lab in parsed]
    if any(i is None for i in indexes):
        indexes = list(range(len(parsed)))
    return pd.DataFrame(
        {
            "start_ns": rows["ts"].to_numpy(),
            "host_end_ns": (rows["ts"] + rows["dur"]).to_numpy(),
            "kind": pd.array([lab.kind for lab in parsed], dtype=object),
            "request": np.array(requests, dtype=np.int64),
            "index": np.array(indexes, dtype=np.int64),
            "tokens": pd.array([lab.tokens for lab in parsed], dtype="Int64"),
            "batch": pd.array([lab.batch for lab in parsed], dtype="Int64"),
            "label": rows["name"].astype(str).to_numpy(),
        }
    )


def _kinds_by_position(steps: pd.DataFrame) -> pd.DataFrame:
    steps = steps.copy()
    missing = steps["kind"].isna()
    first = np.arange(len(steps)) == 0
    steps.loc[missing, "kind"] = np.where(first[missing.to_numpy()], "prefill", "decode")
    return steps


def _token_embeddings(ops: pd.DataFrame) -> pd.DataFrame:
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


def _token_shape(dims) -> tuple[int | None, int | None]:
    """(batch, new positions per sequence) from an embedding's input dims, None when unknown."""
    return token_shape(dims)


def _forwards_from_embeddings(emb: pd.DataFrame) -> tuple[pd.DataFrame, bool]:
    starts = emb["ts"].to_numpy()
    shapes = [_token_shape(d) for d in emb["_dims"]]
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
    request = np.cumsum(new_request) - 1
    index = np.arange(n) - np.maximum.accumulate(np.where(new_request, np.arange(n), 0))
    kind = np.where(index == 0, "prefill", "decode")
    batch = pd.array([s[0] for s in shapes], dtype="Int64")
    tokens = pd.array([None if s[1] is None else s[0] * s[1] for s in shapes], dtype="Int64")
    steps = pd.DataFrame(
        {
            "start_ns": starts,
            "host_end_ns": (emb["ts"] + emb["dur"]).to_numpy(),
            "kind": kind.astype(object),
            "request": request.astype(np.int64),
            "index": index.astype(np.int64),
            "tokens": tokens,
            "batch": batch,
            "label": "",
        }
    )
    return steps, shaped


def _label_profiler_steps(steps: pd.DataFrame, emb: pd.DataFrame) -> pd.DataFrame:
    """Give each ProfilerStep the kind and tokens of the first forward inside it."""
    steps = steps.copy()
    pos = np.searchsorted(emb["ts"].to_numpy(), steps["start_ns"].to_numpy(), side="left")
    kinds, tokens, batch = [], [], []
    for i, p in enumerate(pos):
        inside = p < len(emb) and emb["ts"].iloc[p] < steps["host_end_ns"].iloc[i]
        b, s = _token_shape(emb["_dims"].iloc[p]) if inside else (None, None)
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


def _steps_from_kernel_pattern(timeline: Timeline) -> tuple[pd.DataFrame, KernelPattern] | None:
    """Steps from a regularly repeating kernel sequence on the busiest GPU, placed at their launch calls."""
    ev = timeline.events
    kernels = ev[ev["kind"] == "kernel"]
    if kernels.empty:
        return None
    kernels = kernels[kernels["device"] == kernels["device"].value_counts().index[0]].sort_values("ts", kind="stable")
    pattern = repeating_pattern(kernels["name"].reset_index(drop=True))
    if pattern is None:
        return None
    opening = kernels.iloc[pattern.positions]
    calls = ev[ev["kind"].isin(("runtime", "driver")) & (ev["correlation"] >= 0)]
    launch_ts = dict(zip(calls["correlation"].to_numpy(), calls["ts"].to_numpy(), strict=False))
    starts = np.array([launch_ts.get(c, t) for c, t in zip(opening["correlation"], opening["ts"], strict=True)])
    # a prefill runs the same kernels as a decode step in eager mode, only longer (more tokens)
    first_kernels = pattern.positions[1] - pattern.positions[0]
    spans = np.diff(opening["ts"].to_numpy())
    kind = np.full(len(starts), "decode", dtype=object)
    if first_kernels > 1.5 * pattern.kernels_per_step or spans[0] > 1.5 * np.median(spans[1:]):
        kind[0] = "prefill"
    steps = pd.DataFrame(
        {
            "start_ns": starts,
            "host_end_ns": starts,
            "kind": kind,
            "request": 0,
            "index": np.arange(len(starts)),
            "tokens": pd.array([None] * len(starts), dtype="Int64"),
            "batch": pd.array([None] * len(starts), dtype="Int64"),
            "label": "",
        }
    )
    return steps, pattern


COMPILED_REGION = re.compile(r"^Torch-Compiled Region: ")
# Between two forwards the host takes the token: a sampling op, or a sync / device-to-host copy.
TOKEN_HANDOFF = re.compile(r"^aten::(argmax|multinomial)$|Synchronize|MemcpyDtoH|Memcpy DtoH|cudaMemcpy$|hipMemcpy$")


def _compiled_forwards(ev: pd.DataFrame, eager: pd.DataFrame) -> pd.DataFrame | None:
    """Forwards that never call aten::embedding on the host: torch.compile'd or CUDA-graph-replayed decode steps.

    Each is opened by a compiled-region call (the most frequent one) or, failing that, a graph launch. They
    count as forwards only when the host takes a token between them; graph pieces of one forward (vLLM's
    piecewise graphs) have no token handoff between them and stay inside their eager forward.
    """
    host = ev[ev["kind"].isin(("cpu_op", "annotation"))]
    regions = host[name_matches(host["name"], COMPILED_REGION)]
    if len(regions):
        counts = regions["name"].value_counts()
        chosen = counts[counts == counts.max()].index
        first = regions[regions["name"].isin(chosen)].iloc[0]["name"]
        openers = regions[regions["name"] == first]
    else:
        openers = ev[ev["kind"].isin(("runtime", "driver")) & ev["name"].isin(GRAPH_LAUNCHES)]
    if openers.empty:
        return None
    starts = openers["ts"].to_numpy()
    eager_starts = eager["start_ns"].to_numpy()
    per_forward = np.diff(np.searchsorted(starts, np.append(eager_starts, np.iinfo(np.int64).max)))
    if len(eager_starts) >= 2 and per_forward.min() == per_forward.max() > 0:
        return None  # the same number inside every eager forward: pieces of it, not forwards
    handoffs = ev[name_matches(ev["name"], TOKEN_HANDOFF)]["ts"].to_numpy()
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
    return merged[list(BOUNDARY_COLUMNS)]
