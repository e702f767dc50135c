"""What a continuously batched trace says of each step, as counts for the ledger (analysis.serving.ledger).

Per step, each count UNKNOWN unless the trace states it:

- S, N: sequences and positions. N from the packed token ids (`[N]` or `[1, N]`) or the engine's annotation; S from
  the attention op's per-sequence metadata (analysis.step_finding.packed_metadata) or the annotation.
- P, D: prefilling and decoding sequences, from the engine's annotation (vLLM's context_C / generation_G).
- J, F: requests that joined in the step and that finished before it, from the worker's python frames (with_stack):
  vLLM V1 makes a request's cached state once, when it first joins (`CachedRequestState.__post_init__`), and drops it
  once, when it has finished (`GPUModelRunner._on_request_state_removed`), so preempted and resumed requests count in
  neither (WORKER_FRAMES).
- changed: whether requests joined or left before the step (1) or not (0), from how much host work prepared it
  (batch_changes).
- size: +1 where the step's matrix products are so much bigger than the small steps' that it carries a prompt
  chunk, -1 where they are too small for a step that used the whole token budget (size_classes).
- short: the step's products are clearly smaller than another step's, so it held fewer positions and did not use
  the whole budget, whatever it carried (short_of_largest).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..event_rows import kind_mask
from ..names import name_matches
from .ledger import UNKNOWN

if TYPE_CHECKING:
    from ..step_finding.frames import Views

WORKER_FRAMES = (
    ("J", re.compile(r"(?:^|/)v1/worker/gpu_input_batch\.py\(\d+\): __post_init__$")),
    ("F", re.compile(r"(?:^|/)v1/worker/gpu_model_runner\.py\(\d+\): _on_request_state_removed$")),
)
COUNTS = ("S", "N", "P", "D", "J", "F", "changed")


def empty_observations(n: int) -> pd.DataFrame:
    frame = pd.DataFrame({c: np.full(n, UNKNOWN, np.int64) for c in COUNTS})
    frame["size"] = np.zeros(n, dtype=np.int64)  # size_classes: +1 carries a prompt chunk, -1 cannot be budget-full
    frame["short"] = np.zeros(n, dtype=bool)  # short_of_largest: cannot be budget-full, whatever it carries
    return frame


def worker_frame_counts(views: Views, start: np.ndarray, host_end: np.ndarray) -> dict[str, np.ndarray] | None:
    """Per step, the joins (J) and finishes (F) the worker's python frames show between the previous step's host
    work and the end of this one's; None when the trace holds neither frame (no stacks, another engine)."""
    ev = views.events
    python = kind_mask(ev, ["python"])
    if not python.any() or not len(start):
        return None
    ts = ev["ts"].to_numpy()
    found = {}
    for key, pattern in WORKER_FRAMES:
        hit = python & name_matches(ev["name"], pattern)
        found[key] = np.sort(ts[hit])
    if not any(len(v) for v in found.values()):
        return None
    lo = np.append(np.iinfo(np.int64).min, host_end[:-1])
    return {
        key: (np.searchsorted(times, host_end, side="right") - np.searchsorted(times, lo, side="right")).astype(
            np.int64
        )
        for key, times in found.items()
    }


def annotated_counts(bounds: pd.DataFrame) -> dict[str, np.ndarray]:
    """S, N, P, D from an engine's step annotations as step finding read them (batch, tokens, decode_sequences). A
    step whose "generation" sequences score more positions than there are of them is a verify in a speculative run
    (most decoding steps are so: its sequences decode, its positions are not one each) and otherwise a preempted
    request recomputing its cache (vLLM counts a request with output as generation): P and D unknown there."""
    batch = _ints(bounds["batch"])
    tokens = _ints(bounds["tokens"])
    decoding = _ints(bounds["decode_sequences"])
    prefill_tokens = _ints(bounds["prefill_tokens"])
    kind = bounds["kind"].to_numpy(dtype=object)
    generation_tokens = np.where((tokens >= 0) & (prefill_tokens >= 0), tokens - prefill_tokens, UNKNOWN)
    several = (generation_tokens > decoding) | (kind == "verify")
    decoding_steps = (decoding > 0) | (kind == "verify")
    if decoding_steps.any() and several.sum() >= 0.5 * decoding_steps.sum():  # a speculative run: verifies decode
        known = (batch >= 0) & (decoding >= 0)
        positions = np.where(several, UNKNOWN, tokens)  # a verify scores several positions per sequence
        return {
            "S": batch,
            "N": positions,
            "P": np.where(known, batch - decoding, UNKNOWN),
            "D": np.where(known, decoding, UNKNOWN),
        }
    plain = (batch >= 0) & (decoding >= 0) & ~several
    prefill = np.where(plain, batch - decoding, UNKNOWN)
    return {"S": batch, "N": tokens, "P": prefill, "D": np.where(plain, decoding, UNKNOWN)}


def _ints(column: pd.Series) -> np.ndarray:
    return column.astype("Float64").fillna(UNKNOWN).to_numpy(dtype=float).astype(np.int64)


def batch_changes(views: Views, start: np.ndarray, sequences: np.ndarray, lookups: np.ndarray) -> np.ndarray | None:
    """Per step, whether requests joined or left since the step before (1), or not (0), UNKNOWN for the first step;
    None when the trace does not show it. The host prepares a step with more work when its batch changed (vLLM
    rebuilds its per-batch sampling metadata): the host ops between consecutive forwards then fall in two groups a
    clear gap apart; counted between consecutive forwards' first token lookups (`lookups`, -1: none), which each
    step's preparation precedes. Used only when they are two such groups and, where the sequence count is stated,
    every change of it falls in the upper one (otherwise the groups mean something else). Where no step states it
    (`sequences` all -1: no shapes, annotations or frames) that check cannot be made: the caller must check the
    groups against the run's phases instead (analysis.serving.phases; follow_served drops them when no reading of
    the phases allows them). In every real capture (tests/data/captures/vllm, shapes stripped) the two groups were
    465-468 and 489-494 ops, every change in the upper one."""
    n = len(start)
    stated = bool((sequences >= 0).all())
    if n < 3 or not (stated or (sequences < 0).all()):
        return None
    ev = views.events
    ops = ev["ts"].to_numpy()[kind_mask(ev, ["cpu_op"])]
    anchor = np.where(lookups >= 0, lookups, start)
    between = np.diff(np.searchsorted(ops, anchor, side="left"))
    ran = (lookups[1:] >= 0) & (lookups[:-1] >= 0)
    if stated:
        ran &= (sequences[1:] > 0) & (sequences[:-1] > 0)
    if ran.sum() < 2:
        return None
    values = np.unique(between[ran])
    if len(values) < 2:
        return None
    gaps = np.diff(values)
    cut = int(np.argmax(gaps))
    low, high = values[: cut + 1], values[cut + 1 :]
    spread = max(int(low[-1] - low[0]), int(high[-1] - high[0]), 1)
    if gaps[cut] < max(8, 3 * spread):
        return None
    changed = np.where(ran, (between >= high[0]).astype(np.int64), UNKNOWN)
    if stated and ((np.diff(sequences) != 0) & (changed == 0)).any():
        return None
    return np.append(UNKNOWN, changed)


GEMM_OP = re.compile(r"(?i)(?:^|::|_)(?:mm|addmm|bmm|linear|matmul|onednn_mm|gemm\w*)$")
GEMM_KERNEL = re.compile(r"(?i)gemm|gemv|cutlass|cublas|xmma|wgmma|matmul")
SIZE_GAP = 1.5  # the smallest step of the big group is at least this many times the largest of the small group


def step_sizes(views: Views, start: np.ndarray, on_device: bool) -> np.ndarray:
    """Per step, how big its matrix products are: the median and the lower quartile of the durations of its GEMM
    kernels (its GEMM host ops on a CPU trace) from its start to the next step's, shape (steps, 2), NaN where it has
    none. A prompt chunk of tens of positions makes every product of the forward longer than a decode's few positions
    do: the lower quartile too (size_classes checks it)."""
    ev = views.events
    kinds = ["kernel"] if on_device else ["cpu_op"]
    rows = kind_mask(ev, kinds) & name_matches(ev["name"], GEMM_KERNEL if on_device else GEMM_OP)
    ts, dur = ev["ts"].to_numpy()[rows], ev["dur"].to_numpy()[rows]
    order = np.argsort(ts, kind="stable")
    ts, dur = ts[order], dur[order]
    bounds = np.searchsorted(ts, np.append(start, np.iinfo(np.int64).max), side="left")
    out = np.full((len(start), 2), np.nan)
    for i in range(len(start)):  # one slice per step
        if bounds[i + 1] > bounds[i]:
            out[i] = np.quantile(dur[bounds[i] : bounds[i + 1]].astype(float), (0.5, 0.25))
    return out


def size_classes(sizes: np.ndarray) -> np.ndarray:
    """Per step +1 (it carries a prompt chunk), -1 (too small to be a step that used the whole token budget), 0 (no
    claim), from step_sizes' medians and lower quartiles: when the medians fall in two groups a clear gap apart (the
    split that best separates their logarithms, the big group's smallest SIZE_GAP times the small group's largest)
    and every big step's lower quartile is above every small step's, else all 0. Decode steps' products stay about
    the same size whatever their batch (memory-bound on a GPU, overhead-bound on a CPU); a chunk of a prompt's
    positions makes all of them several times longer. A cost paid once lengthens only some: on a CPU the first
    product of each new shape (oneDNN making its primitive) takes ten times longer, which lifts the median of a small
    model's few products (9 a step in tests/data/captures/vllm/hol_long_prompt, where the steps of a 32-token budget
    cost no more than decodes and only steps with new shapes stood out) but not their lower quartile."""
    sizes = np.asarray(sizes, dtype=float).reshape(len(sizes), -1)
    median, lower = sizes[:, 0], sizes[:, -1]
    out = np.zeros(len(sizes), dtype=np.int64)
    known = np.isfinite(median) & (median > 0)
    if known.sum() < 4:
        return out
    values = np.sort(np.log(median[known]))
    best, cut = -1.0, -1
    for k in range(1, len(values)):  # Otsu's split on a few hundred values at most per distinct step
        low, high = values[:k], values[k:]
        between = k * (len(values) - k) * (high.mean() - low.mean()) ** 2
        if between > best:
            best, cut = between, k
    if values[cut] - values[cut - 1] < np.log(SIZE_GAP):
        return out
    logs = np.log(np.where(known, median, 1.0))
    threshold = (values[cut] + values[cut - 1]) / 2
    big, small = known & (logs > threshold), known & (logs < threshold)
    if not np.nanmin(lower[big]) > np.nanmax(lower[small]):  # some products only: a one-time cost, not a chunk
        return out
    out[big] = 1
    out[small] = -1
    return out


def short_of_largest(sizes: np.ndarray) -> np.ndarray:
    """Per step, whether its products are clearly smaller than another step's (its median SIZE_GAP times under that
    step's lower quartile): it held fewer positions, so it did not use the whole token budget, whatever it carried.
    Products grow with the positions a forward holds, and every step that used the whole budget holds the same
    number; a first chunk of 16 positions in a run whose later steps hold 256 is no cut step
    (tests/data/captures/vllm/interference_chunks), so its prompt completed and decodes next. Lower quartiles on the
    big side keep one-time costs (oneDNN's first product of a shape) from making a step look big."""
    sizes = np.asarray(sizes, dtype=float).reshape(len(sizes), -1)
    median, lower = sizes[:, 0], sizes[:, -1]
    largest = np.nanmax(lower, initial=0.0) if np.isfinite(lower).any() else 0.0
    with np.errstate(invalid="ignore"):
        return np.isfinite(median) & (median > 0) & (median * SIZE_GAP < largest)
