"""Follow a served run's phases where its steps state no counts: no sequences, prefills or joins (no annotation,
record_shapes or python frames), so the count ledger (analysis.serving.ledger) has nothing to follow.

What such a step still says is coarse: whether requests joined or left before it (`changed`, from the host work that
prepared it), whether it carries a prompt chunk or could not have used the whole token budget (`size`), and whether
the engine was idle before the first step. The engine's rules (ledger.py) hold for booleans as for counts, so the
state followed is (any decoder live, a partial prompt carried):

    before a step: with no change nobody joins or leaves; with a change decoders may finish or be preempted (all of
                   them, or some: invisible in booleans), a carried partial prompt may be preempted, requests may join
    the step:      every live decoder decodes; the carried partial prompt and every joining prompt prefill
    after it:      every prompt chunk completes (its request decodes from the next step) or, only where the step may
                   have used the whole budget (size not -1, not short of a bigger step), one is cut and carried

Every path of states through the steps is kept (forward, then backward from the last step) and a step's kind stands
only where every kept path gives it; a run no path explains is not followed (a signal misread), and nothing is
claimed. Counts stay unknown: booleans do not count requests.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .ledger import UNKNOWN, kept_moves, sizes_allow_cut

STATES = ((False, False), (False, True), (True, False), (True, True))


@dataclass(frozen=True)
class Phases:
    """Per step the kind every consistent path gives ("unknown" where they differ), and whether any path exists."""

    kinds: np.ndarray
    followed: bool
    reason: str


def follow_phases(obs: pd.DataFrame, empty: np.ndarray | None = None, known: np.ndarray | None = None) -> Phases:
    """`obs`: one row per step with `changed` (1, 0, UNKNOWN), `size` (+1, -1, 0) and `short` (clearly smaller than
    another step: not budget-full), attrs["idle_before"];
    `empty`: steps step finding found empty (nothing scheduled; every other step ran a forward, so holds something);
    `known`: kinds other evidence already decided ("unknown" elsewhere), which every path must give."""
    n = len(obs)
    unknown = np.full(n, "unknown", dtype=object)
    if n == 0:
        return Phases(unknown, True, "")
    empty = np.zeros(n, dtype=bool) if empty is None else np.asarray(empty, dtype=bool)
    known = unknown if known is None else np.asarray(known, dtype=object)
    changed, size = obs["changed"].to_numpy(), obs["size"].to_numpy()
    may_fill = sizes_allow_cut(obs)
    states = {(False, False)} if obs.attrs.get("idle_before", False) else set(STATES)
    layers: list[list[tuple]] = []
    for t in range(n):
        moves = [
            m
            for state in states
            for m in _moves(state, int(changed[t]), int(size[t]), bool(empty[t]), bool(may_fill[t]))
            if known[t] in ("unknown", m[2])
        ]
        if not moves:
            return Phases(unknown, False, f"step {t}: no reading of the phases before it allows it")
        layers.append(moves)
        states = {after for _, after, _ in moves}
    return Phases(_agreed(layers, n), True, "")


def _moves(state: tuple[bool, bool], changed: int, size: int, empty: bool, may_fill: bool):
    """Every (state, next state, kind) one step allows from `state` = (decoders live, partial prompt carried)."""
    decoders, partial = state
    stays = [(decoders, partial)]
    leaves = stays if changed == 0 else [(d, p) for d in {decoders, False} for p in {partial, False}]
    for live, carried in leaves:
        for join in (False,) if changed == 0 else (False, True):
            # a change is a join or a leave; a decoder leaving beside others that stay shows in no boolean
            if changed == 1 and not (join or (live, carried) != state or decoders):
                continue
            prefill = carried or join
            if empty != (not prefill and not live) or (size > 0 and not prefill):
                continue
            kind = "mixed" if prefill and live else "prefill" if prefill else "decode" if live else "empty"
            for after in _after(live, prefill, may_fill):
                yield state, after, kind


def _after(live: bool, prefill: bool, may_fill: bool) -> set[tuple[bool, bool]]:
    """States after a step: its prompts all complete and decode next, or one the budget cut is carried (not in a
    step too small to have used the whole budget) while the others, if any, complete."""
    if not prefill:
        return {(live, False)}
    cut = {(live, True), (True, True)} if may_fill else set()
    return {(True, False)} | cut


def _agreed(layers: list[list[tuple]], n: int) -> np.ndarray:
    """Backward from the last step: keep the moves whose next state leads on; per step the kind all kept agree on."""
    kinds = np.full(n, "unknown", dtype=object)
    for t, kept in kept_moves(layers):
        seen = {m[2] for m in kept}
        if len(seen) == 1:
            kinds[t] = seen.pop()
    return kinds


def phase_counts(kinds: np.ndarray) -> pd.DataFrame:
    """The counts a kind alone gives (ledger columns): no prefills in a decode step, no decoders in a prefill step,
    neither in an empty one; everything else unknown."""
    frame = pd.DataFrame({c: np.full(len(kinds), UNKNOWN, np.int64) for c in ("P", "D", "J", "F", "C")})
    frame.loc[np.isin(kinds, ("decode", "empty")), "P"] = 0
    frame.loc[np.isin(kinds, ("prefill", "empty")), "D"] = 0
    frame["kind"] = kinds
    return frame
