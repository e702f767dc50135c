"""Which request is which, once the ledger has the counts: requests numbered in the order they joined (the engine
serves first come, first served), prompts completing oldest first (only the newest prefilling prompt can be the one
the token budget cut), finishes known by identity only when every live decoder finishes at once (or none does).

A finish of some but not all decoders leaves who finished unknown: from there those decoders are "maybe alive" until
the count says all of them are gone, and their last step, output tokens and end-to-end time stay unknown. Where a
step's counts are not all known, following stops: later requests keep only what the front end says of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .ledger import UNKNOWN


@dataclass
class Followed:
    """Per request (in join order): its first step, the step of its first token, its last step (UNKNOWN where not
    known), the steps it certainly ran in, and whether it was already running when the trace began; per step, the
    oldest request it certainly served (UNKNOWN when an older one may still be running or following stopped)."""

    first_step: list[int] = field(default_factory=list)
    first_token_step: list[int] = field(default_factory=list)
    last_step: list[int] = field(default_factory=list)
    steps: list[list[int]] = field(default_factory=list)
    before_trace: list[bool] = field(default_factory=list)
    step_request: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    complete: bool = True  # every step followed
    stopped_at: int = -1  # the step where following stopped, -1 if it did not

    def new(self, step: int, before: bool, token_step: int = UNKNOWN) -> int:
        self.first_step.append(step)
        self.first_token_step.append(token_step)
        self.last_step.append(UNKNOWN)
        self.steps.append([])
        self.before_trace.append(before)
        return len(self.first_step) - 1


@dataclass
class _Live:
    prefilling: list[int] = field(default_factory=list)  # join order
    decoding: list[int] = field(default_factory=list)  # certainly alive
    maybe: list[int] = field(default_factory=list)  # possibly alive (who finished was not known)
    alive: int = 0  # decoders alive, certain and maybe


def follow(counts: pd.DataFrame) -> Followed:
    """Follow the requests through the steps whose counts (P, D, J, F, C) the ledger agreed on."""
    out = Followed(step_request=np.full(len(counts), UNKNOWN, np.int64))
    live = _Live()
    rows = counts[["P", "D", "J", "F", "C"]].to_numpy()
    for t, (p, d, j, f, c) in enumerate(rows):
        if t == 0:
            if p == UNKNOWN or d == UNKNOWN:
                return _stop(out, 0)
            live.decoding = [out.new(0, True) for _ in range(d)]
            live.alive = d
            joined = j if j != UNKNOWN else 0  # the newest `joined` prompts joined here; the others, who knows
            live.prefilling = [out.new(0, k < p - joined) for k in range(p)]
        else:
            if UNKNOWN in (p, d, j, f, c):
                return _stop(out, t)
            _finish(out, live, f, t)
            live.prefilling += [out.new(t, False) for _ in range(j)]
        _record(out, live, t)
        if c == UNKNOWN:  # the first step's prompts: which ended there is not known; nothing after it can be followed
            return _stop(out, t + 1) if t + 1 < len(rows) else out
        done, live.prefilling = live.prefilling[:c], live.prefilling[c:]
        for rid in done:
            out.first_token_step[rid] = t
        live.decoding += done
        live.alive += c
    return out


def _finish(out: Followed, live: _Live, finishing: int, t: int) -> None:
    if finishing == 0:
        return
    if finishing == live.alive:
        for rid in live.decoding:
            out.last_step[rid] = t - 1
        live.decoding, live.maybe, live.alive = [], [], 0
        return
    live.maybe += live.decoding
    live.decoding = []
    live.alive -= finishing


def _record(out: Followed, live: _Live, t: int) -> None:
    certain = live.prefilling + live.decoding
    for rid in certain:
        out.steps[rid].append(t)
    if certain and (not live.maybe or min(live.maybe) > min(certain)):
        out.step_request[t] = min(certain)


def _stop(out: Followed, t: int) -> Followed:
    out.complete = False
    out.stopped_at = t
    return out
