"""A model shape proposed from what a trace shows, for traces that come without one (issue 45).

A trace from a real deployment names no model, yet it shows most of what the roofline needs: the layer count (the
anatomy's repeating block), the ranks (Kineto's distributedInfo), the dtype (GEMM kernel names: `BFloat16`,
`_BBS_`), the hidden size and vocabulary (the weight shapes of aten::linear/mm and the sampler's logits, where
record_shapes was on) and whether it is a mixture of experts (routing and expert kernels). From these a shape is
proposed ("36 layers, TP 8, bf16, mixture of experts: a gpt-oss-120b-class shape?"), matched against the presets
(analysis/roofline/model_presets.py, collectors/presets.py), with the weights-only floor of one decode step
(weight bytes per rank over the device's bandwidth) where the device is in the GPU table.

A proposal is a guess and is labelled as one: no figure of the answer reads it. The user accepts it (the app's
"Use it", the CLI's --model) and only then is the trace read against a model, under a new result key.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np
import pandas as pd

from stepscope.parsers.timeline import Timeline
from .categories import categorize
from .model import Analysis
from .names import match_text
from .number_format import compact, format_value
from .shapes import clean_dims

NOTE_PREFIX = "note: model proposed from the trace"  # the CLI's stderr line (a page shows the proposal itself)
NOTE = "a guess from the trace: no figure uses it until it is accepted (the app's Use it, or --model NAME)"
LM_HEAD_MIN = 16_000  # a linear this wide out of the hidden size is the vocabulary (lm_head), not an MLP
VOCAB_PAD = 64  # vLLM pads each rank's vocabulary shard to a multiple of 64
_DTYPES = (  # (dtype, pattern on a lowercase kernel name), the first that matches names it
    ("float8", re.compile(r"fp8|float8|e4m3|e5m2")),
    ("bfloat16", re.compile(r"bf16|bfloat16|_bbs_|_bss_|_bb_")),
    ("float16", re.compile(r"fp16|(?<!b)float16|half|_hhs_|_hss_|_hh_")),
)
_SHORT_DTYPE = {"bfloat16": "bf16", "float16": "fp16", "float8": "fp8", "float32": "fp32"}
_GEMM_OPS = ("aten::linear", "aten::mm", "aten::addmm", "aten::matmul")
_LOGIT_OPS = ("aten::argmax", "aten::softmax", "aten::log_softmax", "aten::topk", "aten::sort", "aten::multinomial")
_SDPA = re.compile(r"^aten::_?scaled_dot_product")


@dataclass(frozen=True)
class ModelProposal:
    """What the trace shows of its model, each figure None where it does not show it, and the presets it fits."""

    layers: int
    tensor_parallel: int | None
    dtype: str | None  # "bfloat16" | "float16" | "float8" | None
    hidden: int | None
    vocab: int | None
    heads: int | None  # all ranks together
    kv_heads: int | None
    head_dim: int | None
    moe: bool
    preset: str | None  # the one preset that fits every figure, else None
    candidates: tuple[str, ...]  # every preset no figure contradicts, best first
    text: str  # the proposal in words, ending in a question
    evidence: dict[str, str] = field(default_factory=dict)  # figure -> what it was read from
    weights_roofline: dict | None = None  # the weights-only floor of one decode step (weights_floor)
    note: str = NOTE


def propose_model(timeline: Timeline, analysis: Analysis) -> ModelProposal | None:
    """The proposal for a trace, None where the trace shows no repeating layer (no decoder to propose)."""
    anat = analysis.anatomy
    layers = anat.layers.layers if anat is not None and anat.layers is not None else None
    if not layers:
        return None
    evidence = {"layers": f"{layers} layers: {anat.layers.evidence}"}
    tp = _tensor_parallel(analysis, evidence)
    kernels = _kernel_names(timeline)
    dtype = _dtype(kernels, evidence)
    moe = _moe(kernels, evidence)
    seen = read_shapes(timeline)
    hidden = _hidden(seen, evidence)
    vocab = _vocab(seen, hidden, tp or 1, evidence)
    heads, kv_heads, head_dim = _heads(seen, tp or 1, evidence)
    figures = {"layers": layers, "hidden": hidden, "vocab": vocab, "moe": moe, "heads": heads, "head_dim": head_dim}
    figures["ranks"] = tp or 1
    candidates = fitting_presets(figures)
    preset = candidates[0] if len(candidates) == 1 else None
    proposal = ModelProposal(
        layers, tp, dtype, hidden, vocab, heads, kv_heads, head_dim, moe, preset, tuple(candidates), "", evidence
    )
    roofline = weights_floor(proposal, timeline, analysis) if preset else None
    return replace(proposal, text=proposal_text(proposal), weights_roofline=roofline)


def proposal_text(p: ModelProposal) -> str:
    """ "36 layers, TP 8, bf16, mixture of experts: a gpt-oss-120b-class shape?" """
    parts = [f"{p.layers} layers"]
    if p.tensor_parallel and p.tensor_parallel > 1:
        parts.append(f"TP {p.tensor_parallel}")
    if p.dtype:
        parts.append(_SHORT_DTYPE.get(p.dtype, p.dtype))
    if p.hidden:
        parts.append(f"hidden {p.hidden}")
    if p.vocab:
        parts.append(f"vocabulary {compact(p.vocab)}")
    if p.moe:
        parts.append("mixture of experts")
    head = ", ".join(parts)
    if p.preset:
        return f"{head}: a {p.preset}-class shape?"
    if p.candidates:
        return f"{head}: the shape of one of {', '.join(p.candidates[:4])}?"
    return f"{head}: no preset has this shape; give its sizes?"


def _tensor_parallel(analysis: Analysis, evidence: dict[str, str]) -> int | None:
    ranks = analysis.facts.world_size
    if ranks > 1:
        evidence["tensor_parallel"] = (
            f"TP {ranks}: distributedInfo names a world of {ranks} ranks (all taken as tensor parallel)"
        )
        return ranks
    return None


def _kernel_names(timeline: Timeline) -> pd.DataFrame:
    """The distinct device kernel names (host ops on a CPU trace) with their counts and categories."""
    ev = timeline.events
    kernels = ev[ev["kind"] == "kernel"]
    if kernels.empty:
        return pd.DataFrame(columns=["name", "count", "category"])
    counts = kernels["name"].value_counts()  # a categorical's counts: one bincount, no string per event
    counts = counts[counts > 0]
    counts.index = counts.index.astype(str)
    _, category = categorize(pd.Series(counts.index, dtype="category"))
    return pd.DataFrame({"name": counts.index, "count": counts.to_numpy(), "category": np.asarray(category)})


def _dtype(kernels: pd.DataFrame, evidence: dict[str, str]) -> str | None:
    """The dtype most distinct GEMM kernel names name (every kernel's name when no GEMM name names one)."""
    for pool, what in ((kernels[kernels["category"] == "gemm"], "GEMM kernel"), (kernels, "kernel")):
        votes = Counter(d for d in map(_dtype_of, pool["name"]) if d)
        if votes:
            dtype, n = votes.most_common(1)[0]
            named = sum(votes.values())
            others = ", ".join(f"{_SHORT_DTYPE[d]}: {k}" for d, k in votes.most_common()[1:])
            evidence["dtype"] = f"{_SHORT_DTYPE[dtype]}: {n} of the {named} distinct {what} names that name a type" + (
                f" ({others})" if others else ""
            )
            return dtype
    return None


def _dtype_of(name: str) -> str | None:
    text = match_text(name).lower()  # a bounded prefix: a dtype is named near a kernel name's start
    return next((dtype for dtype, pattern in _DTYPES if pattern.search(text)), None)


def _moe(kernels: pd.DataFrame, evidence: dict[str, str]) -> bool:
    moe = kernels[kernels["category"] == "moe"]
    if moe.empty:
        return False
    evidence["moe"] = f"mixture of experts: {len(moe)} distinct routing and expert kernels ({moe['name'].iloc[0][:60]})"
    return True


@dataclass(frozen=True)
class SeenShapes:
    """The shapes record_shapes kept that tell a model's sizes, each with how many ops showed it."""

    matmuls: Counter  # (in features K, out features N) of aten::linear/mm/addmm/matmul with a 2-D weight
    embeddings: Counter  # (rows, width) of aten::embedding's table
    logits: Counter  # the last dimension of what the sampler reads (argmax, softmax, topk ...)
    attention: Counter  # (heads, kv heads, head dim) of scaled_dot_product_attention's q and k, per rank


def read_shapes(timeline: Timeline) -> SeenShapes:
    """Each distinct (op, Input Dims) record read once (a categorical column: no pass per event)."""
    ev = timeline.events
    found = SeenShapes(Counter(), Counter(), Counter(), Counter())
    if "input_dims" not in ev:
        return found
    dims = ev["input_dims"]
    if isinstance(dims.dtype, pd.CategoricalDtype):  # the readers' form: the shaped rows from the codes
        recorded = np.flatnonzero(np.asarray(dims.cat.categories, dtype=object) != "")
        shaped = np.isin(dims.cat.codes.to_numpy(), recorded)
    else:
        shaped = (dims.astype(str) != "").to_numpy()
    if not shaped.any():
        return found
    for (name, text), count in _pair_counts(ev["name"], dims, shaped):
        try:
            value = clean_dims(json.loads(text))
        except (ValueError, RecursionError):
            continue
        if value:
            _count_shape(found, name, value, int(count))
    return found


def _pair_counts(names: pd.Series, dims: pd.Series, shaped: np.ndarray) -> list[tuple[tuple[str, str], int]]:
    """((name, Input Dims text), rows) among the shaped rows, most rows first, ties in the order they first
    appear (the counters keep that order for their ties). Counted on the categoricals' codes: the text of every
    row cost a cold command 25 ms on a 331k-event trace."""
    if isinstance(names.dtype, pd.CategoricalDtype) and isinstance(dims.dtype, pd.CategoricalDtype):
        name_codes = names.cat.codes.to_numpy()[shaped].astype(np.int64) + 1  # 0: a missing value ("nan")
        dim_codes = dims.cat.codes.to_numpy()[shaped].astype(np.int64) + 1
        name_text = ["nan", *names.cat.categories.astype(str)]
        dim_text = ["nan", *dims.cat.categories.astype(str)]
    else:
        name_codes, name_text = _codes(names[shaped].astype(str))
        dim_codes, dim_text = _codes(dims[shaped].astype(str))
    width = len(dim_text)
    keys, first, counts = np.unique(name_codes * width + dim_codes, return_index=True, return_counts=True)
    totals: Counter = Counter()
    for at in np.argsort(first, kind="stable").tolist():
        key = int(keys[at])
        totals[name_text[key // width], dim_text[key % width]] += int(counts[at])
    return sorted(totals.items(), key=lambda pair: -pair[1])  # stable: ties stay in order of appearance


def _codes(text: pd.Series) -> tuple[np.ndarray, list[str]]:
    codes, uniques = pd.factorize(text.to_numpy(dtype=object))
    return codes.astype(np.int64), list(uniques)


def _count_shape(found: SeenShapes, name: str, dims: list[list[int]], count: int) -> None:
    if name in _GEMM_OPS:
        pair = _matmul_pair(name, dims)
        if pair is not None:
            found.matmuls[pair] += count
    elif name == "aten::embedding" and len(dims[0]) == 2:
        found.embeddings[tuple(dims[0])] += count
    elif name in _LOGIT_OPS and dims[0]:
        found.logits[dims[0][-1]] += count
    elif _SDPA.match(name) and len(dims) >= 2 and len(dims[0]) == 4 and len(dims[1]) == 4:
        q, k = dims[0], dims[1]
        found.attention[(q[1], k[1], q[3])] += count


def _matmul_pair(name: str, dims: list[list[int]]) -> tuple[int, int] | None:
    """(K, N) of an op multiplying activations by a 2-D weight: linear's weight is [N, K], mm's and matmul's
    second operand [K, N], addmm's third."""
    if name == "aten::linear" and len(dims) >= 2 and len(dims[1]) == 2:
        n, k = dims[1]
        return (k, n)
    operand = dims[2] if name == "aten::addmm" and len(dims) >= 3 else dims[1] if len(dims) >= 2 else []
    return (operand[0], operand[1]) if len(operand) == 2 else None


def _hidden(seen: SeenShapes, evidence: dict[str, str]) -> int | None:
    """The in-features most weight matrices share (q, k, v, gate, up and lm_head all read the hidden state)."""
    ins = Counter()
    for (k, _), count in seen.matmuls.items():
        ins[k] += count
    for (_, width), count in seen.embeddings.items():
        ins[width] += count
    if not ins:
        return None
    hidden, count = ins.most_common(1)[0]
    total = sum(ins.values())
    evidence["hidden"] = f"hidden {hidden}: the in-features of {count} of {total} weight-matrix ops with shapes"
    return hidden


def _vocab(seen: SeenShapes, hidden: int | None, tp: int, evidence: dict[str, str]) -> int | None:
    """The sampler's logits (the whole vocabulary), else lm_head's out-features or the embedding's rows times the
    ranks (each rank holds a shard of both in tensor parallel)."""
    wide = [(v, c) for v, c in seen.logits.items() if v >= LM_HEAD_MIN]
    if wide:
        vocab = max(wide, key=lambda vc: vc[1])[0]
        evidence["vocab"] = f"vocabulary {vocab}: the last dimension of the logits the sampler reads"
        return vocab
    heads = [n for (k, n) in seen.matmuls if n >= LM_HEAD_MIN and (hidden is None or k == hidden)]
    rows = [v for (v, w) in seen.embeddings if v >= LM_HEAD_MIN and (hidden is None or w == hidden)]
    for found, what in ((heads, "lm_head's out-features"), (rows, "the embedding table's rows")):
        if found:
            shard = max(found)
            times = f" x {tp} ranks" if tp > 1 else ""
            evidence["vocab"] = f"vocabulary {shard * tp}: {what} {shard}{times}"
            return shard * tp
    return None


def _heads(seen: SeenShapes, tp: int, evidence: dict[str, str]) -> tuple[int | None, int | None, int | None]:
    if not seen.attention:
        return None, None, None
    (heads, kv_heads, head_dim), _ = seen.attention.most_common(1)[0]
    times = f" x {tp} ranks" if tp > 1 else ""
    evidence["heads"] = (
        f"{heads * tp} heads, {kv_heads * tp} KV heads of {head_dim}: scaled_dot_product_attention's q and k "
        f"shapes ({heads} and {kv_heads} heads{times})"
    )
    return heads * tp, kv_heads * tp, head_dim


@lru_cache(maxsize=1)
def _preset_shapes() -> tuple:
    from .roofline.model_source import model_shape, preset_names

    return tuple((name, model_shape(name)) for name in preset_names())


def fitting_presets(figures: dict) -> list[str]:
    """The presets that no known figure contradicts, those that agree on the most figures first."""
    scored = []
    for name, shape in _preset_shapes():
        checks = _checks(shape, figures)
        if all(checks):
            scored.append((-len(checks), name))
    return [name for _, name in sorted(scored)]


def _checks(shape, figures: dict) -> list[bool]:
    """One entry per figure the trace shows: whether the preset has it."""
    out = [shape.layers == figures["layers"], shape.is_moe == figures["moe"]]
    if figures.get("hidden"):
        out.append(shape.hidden == figures["hidden"])
    if figures.get("vocab"):
        out.append(abs(shape.vocab - figures["vocab"]) <= VOCAB_PAD * figures.get("ranks", 1))  # shards' padding
    if figures.get("heads"):
        out.append(shape.heads == figures["heads"])
    if figures.get("head_dim"):
        out.append(shape.head_dim == figures["head_dim"])
    return out


def weights_floor(proposal: ModelProposal, timeline: Timeline, analysis: Analysis) -> dict | None:
    """The weights-only floor of one decode step: the proposed preset's weight bytes a decode step reads, per rank,
    over the trace's device bandwidth (the GPU table's row), against the median step of the trace's main kind (a
    forward of any kind reads every weight at least once). None without a preset."""
    from .roofline import decode_cost, match_gpu, timeline_device
    from .roofline.model_source import model_shape

    if proposal.preset is None:
        return None
    dtype = proposal.dtype or ("bfloat16" if analysis.summary.on_gpu else "float32")  # the app's defaults
    shape = model_shape(proposal.preset, dtype)
    batch = analysis.summary.tokens_per_step if analysis.summary.step_kind == "decode" else None
    batch_known = batch is not None and batch >= 1
    cost = decode_cost(shape, context=1, batch=int(batch) if batch_known else 1)
    ranks = proposal.tensor_parallel or 1
    per_rank = cost.weight_bytes / ranks
    hardware = match_gpu(*timeline_device(timeline)) if analysis.summary.on_gpu else None
    floor_us = per_rank / hardware.memory_bytes_per_s * 1e6 if hardware is not None else None
    step_ms = analysis.summary.step_ms if analysis.summary.step_kind == "decode" else None  # a decode's floor
    measured_us = step_ms * 1e3 if step_ms else None
    basis = [f"{proposal.preset} in {_SHORT_DTYPE.get(dtype, dtype)}" + ("" if proposal.dtype else " (assumed)")]
    if ranks > 1:
        basis.append(f"over {ranks} ranks")
    if shape.is_moe:
        basis.append("experts reached at batch " + (f"{int(batch)}" if batch_known else "1 (the batch is unknown)"))
    return {
        "preset": proposal.preset,
        "bytes_per_rank": float(per_rank),
        "device": hardware.name if hardware is not None else None,
        "memory_gb_s": hardware.memory_bytes_per_s / 1e9 if hardware is not None else None,
        "floor_us": floor_us,
        "step_kind": "decode" if measured_us is not None else None,
        "measured_step_us": measured_us,
        "pct_of_floor": 100.0 * floor_us / measured_us if floor_us and measured_us else None,
        "basis": ", ".join(basis),
    }


def roofline_text(roofline: dict) -> str:
    """ "2.11 GB of weights per rank per decode step: 264 us at 8 TB/s (NVIDIA B200); the median decode step takes
    1.2 ms (22% of its floor)" """
    text = f"{format_value(roofline['bytes_per_rank'], 'B')} of weights per rank per decode step"
    if roofline.get("floor_us") is not None:
        text += (
            f": {format_value(roofline['floor_us'], 'us')} at {format_value(roofline['memory_gb_s'], 'GB/s')} "
            f"({roofline['device']})"
        )
    else:
        text += " (the device's bandwidth is not in the GPU table: no time floor)"
    if roofline.get("measured_step_us") is not None and roofline.get("pct_of_floor") is not None:
        text += (
            f"; the median {roofline['step_kind']} step takes {format_value(roofline['measured_step_us'], 'us')}, "
            f"the floor is {format_value(roofline['pct_of_floor'], '%')} of it"
        )
    return text + f" ({roofline['basis']})"


def proposal_note(proposal: ModelProposal | None) -> str | None:
    """The CLI's stderr line for a trace read without a model: what the trace shows and how to use it."""
    if proposal is None:
        return None
    use = f" (--model {proposal.preset} reads the trace against it)" if proposal.preset else ""
    line = f"{NOTE_PREFIX}, not used: {proposal.text}{use}"
    if proposal.weights_roofline:
        line += f"; {roofline_text(proposal.weights_roofline)}"
    return line


def form_fields(proposal: ModelProposal) -> dict:
    """The "few numbers" of the proposal (analysis.roofline.shape_from_form's names): what the trace shows, the
    fitting preset's published numbers where it shows nothing."""
    values: dict = {"name": proposal.preset or "proposed", "layers": proposal.layers}
    if proposal.preset:
        from .roofline.model_source import model_shape

        shape = model_shape(proposal.preset)
        values |= {"hidden": shape.hidden, "heads": shape.heads, "kv_heads": shape.kv_heads, "vocab": shape.vocab}
        values |= {"head_dim": shape.head_dim, "intermediate": shape.expert_intermediate or shape.intermediate}
        values |= {"experts": shape.experts, "experts_per_token": shape.experts_per_token}
    for key in ("hidden", "heads", "kv_heads", "head_dim", "vocab"):
        if getattr(proposal, key):
            values[key] = int(getattr(proposal, key))
    if proposal.dtype:
        values["dtype"] = "fp8" if proposal.dtype == "float8" else proposal.dtype
    return values
