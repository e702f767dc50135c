"""Follow the sequences of a continuously batched run from step to step, by counts: which steps decode, prefill or
mix, and how many requests join, finish and get their first token where the evidence decides it.

A serving engine's batch changes only by requests joining (a prefill chunk of a new request), prompts completing (the
request emits its first token and decodes from the next step), and requests finishing (they leave before the next
step). What the trace says of each step is a set of counts, each possibly unknown: its sequences S and positions N
(shapes), prefilling and decoding sequences P and D (engine annotations), requests that joined J and finished F (the
worker's python frames), outputs O = D + C (the API server's output batches: C prompts completed). The engine's rules
tie them together:

    before step t: d decoders live, p partial prefills carried;  F <= d finish;  J join
    step t:        D = d - F,  P = p + J,  S = P + D,  N >= D + 2P (one position a decoder, at least two a prompt
                   chunk: the one the budget cut may be a single position, and no prompt is one token long)
    after step t:  C of the P prompts complete (C >= P - 1: at most one prompt is cut by the token budget, and only
                   in a step that used the whole budget); d' = D + C,  p' = P - C

Every path of states (d, p) through the steps that obeys every count is kept (forward, then backward from the last
step); a step's figure is known when every kept path gives it the same value, and unknown otherwise. Nothing is
guessed: where a run's counts allow two readings, the figure that differs is unknown. At the first step the trace
holds no history: any d and p are allowed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

UNKNOWN = -1
FIELDS = ("P", "D", "J", "F", "C")
MAX_TRANSITIONS = 20_000  # per step; past this the counts decide too little to follow (a huge unlabelled batch)
MAX_STATES = 512  # readings kept between steps: more, and following costs more than it can decide


@dataclass(frozen=True)
class Resolved:
    """Per step, the counts every consistent reading agrees on (UNKNOWN where they differ), and whether the readings
    could be followed at all (`followed` False: some step's counts contradict every reading)."""

    counts: pd.DataFrame  # P, D, J, F, C per step (int64, UNKNOWN where not decided) and kind ("unknown" likewise)
    followed: bool
    reason: str  # why not followed, or ""


@dataclass(frozen=True)
class Batches:
    """The API server's output batches in order (analysis.serving.front_end): per batch its time, the requests it
    gave a token and those that finished. One batch per step that gave any request a token, in step order; a step
    that gave none (only a prompt chunk the budget cut) sends none, so which step owns which batch is part of what
    the ledger follows."""

    ts_ns: np.ndarray
    outputs: np.ndarray
    finished: np.ndarray


def resolve(obs: pd.DataFrame, budget: int | None, batches: Batches | None = None, start=None) -> Resolved:
    """`obs`: one row per step with S, N, P, D, J, F, changed (int64, UNKNOWN where the trace does not say),
    `size` (+1: the step carries a prompt chunk, -1: it cannot have used the whole budget) and `short`
    (short_of_largest: not budget-full either); `budget`: the token budget per step when known (a prompt is cut
    only in a step that uses all of it); `batches` with the steps' `start` times: the front end's output batches
    (a batch never comes before its step starts; each is a step's)."""
    n = len(obs)
    empty = pd.DataFrame({f: np.full(n, UNKNOWN, np.int64) for f in FIELDS}).assign(kind="unknown")
    if n == 0:
        return Resolved(empty, True, "")
    rows = obs.to_dict("records")
    for row, allowed in zip(rows, sizes_allow_cut(obs).tolist(), strict=True):
        row["sizes_allow_cut"] = allowed
    idle = bool(obs.attrs.get("idle_before", False))
    d_max = 0 if idle else _d_max(obs, batches)
    if d_max is None:
        return Resolved(empty, False, "nothing states how many sequences ran when the trace began")
    states = {(d, p, 0, UNKNOWN) for d in range(d_max + 1) for p in ((0,) if idle else (0, 1))}
    layers: list[list] = []
    for t, row in enumerate(rows):
        moves = []
        for state in states:
            moves.extend(_moves(state, row, budget, t, batches, start))
            if len(moves) > MAX_TRANSITIONS:
                return Resolved(empty, False, f"step {t}: too many readings of its counts to follow the batch")
        if not moves:
            return Resolved(empty, False, f"step {t}: its counts contradict every reading of the steps before")
        layers.append(moves)
        states = {after for _, after, _ in moves}
        if len(states) > MAX_STATES:
            return Resolved(empty, False, f"step {t}: too many readings of the counts so far to follow the batch")
    if batches is not None:  # every batch is some step's
        layers[-1] = [m for m in layers[-1] if m[1][2] == len(batches.outputs)]
        if not layers[-1]:
            return Resolved(empty, False, "the front end's output batches pair with no reading of the steps")
    return Resolved(_agreed(layers, n), True, "")


def _d_max(obs: pd.DataFrame, batches: Batches | None) -> int | None:
    """The most decoders live when the trace began that a reading needs (those that finished before the first step
    change no step's kind): at most the first step's batch, decoders or (with the front end) outputs, so at most the
    largest stated. Where the first step states none of them (a profile opened while the batch runs, shapes not
    recorded: the worker's frames count joins and finishes, not the batch), each either finishes within the trace
    (F counts it) or decodes to its end, at most as many as any later step's positions, and one such survivor reads
    as any number where no step states its positions: the finishes stated plus that bound them. None when a step's
    finishes are unknown too: then nothing bounds them (tests/data/captures/vllm/saturated_shapes_stacks with shapes
    stripped, cut mid-run: four sequences ran, the largest count stated was one)."""
    values = [obs[c].to_numpy() for c in ("S", "D", "J", "F") if c in obs]
    if batches is not None:
        values.append(batches.outputs)
    stated = max(max((int(v.max()) for v in values if len(v)), default=0), 0)
    first = obs.iloc[0]
    if batches is not None or first["S"] != UNKNOWN or first["D"] != UNKNOWN:
        return stated
    finishes, positions = obs["F"].to_numpy(), obs["N"].to_numpy()
    if (finishes == UNKNOWN).any():
        return None
    survivors = max(int(positions.max()), 1)  # N >= D at every step; UNKNOWN (-1) everywhere: one stands for any
    return max(stated, int(finishes.sum()) + survivors)


def _moves(state: tuple, row: dict, budget: int | None, t: int, batches: Batches | None, start):
    """Every (state, next state, (P, D, J, F, C)) one step allows from `state` = (decoders, partial prompts, front-end
    batches taken, finishes the last batch reported or UNKNOWN)."""
    d, p, taken, reported = state
    first = t == 0
    finishes = _finishes(row, d, reported, first)
    for f in finishes:
        decoding = d - f
        if row["D"] != UNKNOWN and decoding != row["D"]:
            continue
        for outputs, after_taken, finished in _outputs(row, taken, batches, start, t, decoding):
            for joins in _joins(row, p, decoding, outputs):
                if row["changed"] != UNKNOWN and not first and (joins + f > 0) != bool(row["changed"]):
                    continue
                prefill = p + joins
                if not _fits(row, prefill, decoding, budget):
                    continue
                for done in _completions(row, prefill, decoding, budget, outputs):
                    after = (decoding + done, prefill - done, after_taken, finished)
                    yield state, after, (prefill, decoding, joins, f, done)


def _finishes(row: dict, d: int, reported: int, first: bool) -> range | list[int]:
    if first:
        return range(d + 1)
    known = [v for v in (row["F"], reported) if v != UNKNOWN]
    if len(set(known)) > 1:
        return []
    if known:
        return [known[0]] if known[0] <= d else []
    return [0] if row["changed"] == 0 else range(d + 1)


def _outputs(row: dict, taken: int, batches: Batches | None, start, t: int, decoding: int):
    """(outputs of this step or UNKNOWN, batches taken after it, finishes its batch reports): the next batch, or no
    batch for a step that gave no request a token (no decoder: only a prompt chunk the budget cut)."""
    if batches is None:
        yield UNKNOWN, taken, UNKNOWN
        return
    if taken < len(batches.outputs) and batches.ts_ns[taken] >= start[t]:
        yield int(batches.outputs[taken]), taken + 1, int(batches.finished[taken])
    if decoding == 0:
        yield 0, taken, 0


def _joins(row: dict, p: int, decoding: int, outputs: int) -> range | list[int]:
    if row["J"] != UNKNOWN:
        return [row["J"]]
    if row["P"] != UNKNOWN:
        return [row["P"] - p] if row["P"] >= p else []
    if row["S"] != UNKNOWN:
        j = row["S"] - decoding - p
        return [j] if j >= 0 else []
    if outputs != UNKNOWN:  # C = O - D prompts completed; at most one more prompt than that was prefilling
        done = outputs - decoding
        return [j for j in (done - p, done - p + 1) if j >= 0] if done >= 0 else []
    return []  # nothing bounds the joins: the step is opaque (the caller does not follow such runs)


def _fits(row: dict, prefill: int, decoding: int, budget: int | None) -> bool:
    if prefill < 0 or decoding < 0:
        return False
    if row["P"] != UNKNOWN and prefill != row["P"]:
        return False
    if row["S"] != UNKNOWN and prefill + decoding != row["S"]:
        return False
    tokens = row["N"]
    if tokens != UNKNOWN:
        # a prompt chunk is at least two positions, but for the one the budget cut (a 1-token prompt is not served)
        cut = budget is not None and tokens >= budget and prefill > 0
        if tokens < decoding + 2 * prefill - int(cut) or (prefill == 0 and tokens != decoding):
            return False
    return not (row["size"] > 0 and prefill == 0)


def _completions(row: dict, prefill: int, decoding: int, budget: int | None, outputs: int) -> list[int]:
    """The prompts that may complete: all of them, or all but one when the step may have been cut by the budget."""
    if outputs != UNKNOWN:
        done = outputs - decoding
        return [done] if 0 <= done <= prefill and prefill - done <= 1 else []
    if prefill == 0:
        return [0]
    may_fill = budget is None or row["N"] == UNKNOWN or row["N"] >= budget
    cut = may_fill and row["sizes_allow_cut"]
    return [prefill - 1, prefill] if cut else [prefill]


def sizes_allow_cut(obs: pd.DataFrame) -> np.ndarray:
    """Per step, whether its products allow a prompt cut by the token budget: a cut step used the whole budget, so
    it is neither among the small steps (`size` -1) nor short of a bigger step (`short`). One rule for the count
    ledger and the phase follow (phases.py)."""
    return (obs["size"].to_numpy() >= 0) & ~obs["short"].to_numpy(dtype=bool)


def kept_moves(layers: list[list[tuple]]):
    """Backward from the last step, each step's moves (state before, state after, value) whose state after leads on
    to the end of the run: every state after the last step ends a path."""
    alive = None
    for t in range(len(layers) - 1, -1, -1):
        kept = [m for m in layers[t] if alive is None or m[1] in alive]
        alive = {m[0] for m in kept}
        yield t, kept


def _agreed(layers, n: int) -> pd.DataFrame:
    """Backward from the last step: keep the moves whose next state leads on; per step the values all kept agree on,
    and the kind they agree on (a step can be mixed in every reading without its counts agreeing)."""
    out = {f: np.full(n, UNKNOWN, np.int64) for f in FIELDS}
    kinds = np.full(n, "unknown", dtype=object)
    for t, kept in kept_moves(layers):
        values = {m[2] for m in kept}
        for k, field in enumerate(FIELDS):
            seen = {v[k] for v in values}
            if len(seen) == 1:
                out[field][t] = seen.pop()
        seen_kinds = {_kind(v[0], v[1]) for v in values}
        if len(seen_kinds) == 1:
            kinds[t] = seen_kinds.pop()
    frame = pd.DataFrame(out)
    frame["kind"] = kinds
    return frame


def _kind(prefill: int, decoding: int) -> str:
    if prefill and decoding:
        return "mixed"
    return "prefill" if prefill else "decode" if decoding else "empty"
