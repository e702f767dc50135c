"""Last resort for finding steps: a kernel sequence that repeats with the same length each time.

Decode steps of one model run the same kernels in the same order, so some kernel name recurs
once per step, every N kernels, with the same few kernels after it. That shape is strict on
purpose: a trace that merely runs a few forwards (a benchmark) should not pass for generation.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

MIN_REPEATS = 5  # fewer looks like a benchmark loop, not a generation
MIN_STEP_KERNELS = 8
MAX_SPREAD = 0.1  # step lengths in kernels may vary this much (relative), after the first step
CANDIDATES = 30
FOLLOWERS_CHECKED = 3


class KernelPattern(NamedTuple):
    name: str
    positions: np.ndarray  # index in the kernel sequence where each step starts
    kernels_per_step: int


def repeating_pattern(names: pd.Series) -> KernelPattern | None:
    """The kernel that opens each step, if the kernel name sequence repeats regularly."""
    codes = pd.Series(names).astype("category").cat.codes.to_numpy()
    n = len(codes)
    if n < MIN_REPEATS * MIN_STEP_KERNELS:
        return None
    counts = np.bincount(codes)
    best: KernelPattern | None = None
    for code in np.argsort(counts)[::-1][:CANDIDATES]:
        count = counts[code]
        if count < MIN_REPEATS or count > n // MIN_STEP_KERNELS:
            continue
        pos = np.flatnonzero(codes == code)
        lengths = np.diff(pos)[1:]  # the first step may be a prefill of a different length
        if len(lengths) < MIN_REPEATS - 2 or np.median(lengths) < MIN_STEP_KERNELS:
            continue
        if (lengths.max() - lengths.min()) > MAX_SPREAD * np.median(lengths):
            continue
        followers = pos[1:-1, None] + np.arange(1, FOLLOWERS_CHECKED + 1)
        if not (codes[followers] == codes[followers[0]]).all():
            continue
        # most repeats wins; among equals the kernel seen first, the likeliest start of a forward
        if best is None or (count, -pos[0]) > (len(best.positions), -best.positions[0]):
            best = KernelPattern(str(names.iloc[pos[0]]), pos, int(np.median(lengths)))
    return best
