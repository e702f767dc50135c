"""Layers inside one forward: the block of kernels that repeats once per transformer layer.

A decoder's forward is a head (embedding, position set-up), the same block once per layer, and a
tail (final norm, lm_head, sampling). In the step's kernel sequence that block is the period P
for which kernel i equals kernel i+P over the longest stretch. The period is searched on kernel
names first; models that alternate layer variants (gpt-oss: sliding-window and full attention
every other layer) repeat by name only every two layers, so the category sequence is searched
too and wins when its period divides the name period over the same stretch.

When no block repeats over at least half of the step, the answer is "no clean repetition" with
what was seen, never a guessed count.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .categories import CATEGORIES

ATTENTION = CATEGORIES.index("attention")  # category codes are indices into CATEGORIES
MIN_BLOCK = 3  # kernels in a layer: fewer is a loop inside an op, not a layer
MIN_LAYERS = 2
MIN_COVERAGE = 0.5  # share of the step's kernels the repeated blocks must cover
SAME_LAYER = 0.75  # kernel overlap at which two parts of a block count as variants of one layer
MAX_KERNELS = 20000  # longer sequences are not searched (cost grows with length squared)


@dataclass(frozen=True)
class Repetition:
    period: int  # kernels per block
    start: int  # index of the first kernel of the first block
    repeats: int
    stop: int = 0  # end (exclusive) of the stretch that repeats, a partial last block included

    @property
    def covered(self) -> int:
        return self.period * self.repeats


@dataclass(frozen=True)
class LayerResult:
    layers: int | None
    kernels_per_layer: int | None
    head_kernels: int | None
    tail_kernels: int | None
    layer_us: dict[str, float] | None  # p50, p90, min, max, first, last (device span of each block)
    layer_kernel_us: dict[str, float] | None  # p50 of the kernel time inside each block
    head_us: float | None
    tail_us: float | None
    block_starts_ns: tuple[int, ...]  # device start of each layer's first kernel (for a timeline lane)
    block_ends_ns: tuple[int, ...]
    evidence: str

    def as_dict(self) -> dict:
        return {
            "layers": self.layers,
            "kernels_per_layer": self.kernels_per_layer,
            "layer_us": self.layer_us,
            "layer_kernel_us": self.layer_kernel_us,
            "head_us": self.head_us,
            "tail_us": self.tail_us,
            "evidence": self.evidence,
        }


def find_repetition(codes: np.ndarray) -> Repetition | None:
    """The period whose repetition covers the most of the sequence (smallest such period)."""
    codes = np.asarray(codes)
    n = len(codes)
    if n < MIN_BLOCK * MIN_LAYERS or n > MAX_KERNELS:
        return None
    periods = np.arange(MIN_BLOCK, n // MIN_LAYERS + 1)
    runs, starts = _longest_repeat_runs(codes, periods)
    repeats = (runs + periods) // periods
    best = [
        Repetition(int(p), int(at), int(r), int(at + run + p))
        for p, run, at, r in zip(periods, runs, starts, repeats, strict=True)
        if r >= MIN_LAYERS
    ]
    if not best:
        return None
    top = max(r.covered for r in best)
    # multiples of the true period cover (almost) as much: take the smallest period near the top
    near = [r for r in best if r.covered >= top - r.period and r.covered >= 0.9 * top]
    return min(near, key=lambda r: r.period)


def _longest_repeat_runs(codes: np.ndarray, periods: np.ndarray, cells: int = 1 << 21) -> tuple[np.ndarray, np.ndarray]:
    """For each period p: (length, start) of the longest stretch of i where codes[i] == codes[i + p] (the first
    such stretch on a tie; (0, 0) for none). Several periods at once, as rows of a (periods x positions) matrix
    of at most about `cells` cells: one pass per block of rows instead of a few small passes per period."""
    n = len(codes)
    runs = np.zeros(len(periods), dtype=np.int64)
    starts = np.zeros(len(periods), dtype=np.int64)
    if len(periods) == 0:
        return runs, starts
    pos = np.arange(n)
    rows = max(1, cells // max(n, 1))
    # row r of `ahead` is codes[r:r + n] (a view, padded past the end): each period's row is copied, not gathered
    ahead = sliding_window_view(np.concatenate([codes, np.zeros(int(periods.max()), dtype=codes.dtype)]), n)
    for lo in range(0, len(periods), rows):  # a loop over blocks of periods, not over kernels
        p = periods[lo : lo + rows, None]
        same = (pos < n - p) & (codes == ahead[p[:, 0]])  # past the end (the padding): no match
        # the run of matches ending at each position: the position minus the last mismatch at or before it
        length = pos - np.maximum.accumulate(np.where(same, -1, pos), axis=1)
        end = np.argmax(length, axis=1)  # the first position where the longest run ends: the first longest run
        run = length[np.arange(len(p)), end]
        runs[lo : lo + rows] = run
        starts[lo : lo + rows] = np.where(run > 0, end - run + 1, 0)
    return runs, starts


def detect_layers(
    name_codes: np.ndarray, category_codes: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray, what: str = "kernels"
) -> LayerResult:
    """Layers of one forward from its kernels in launch order (names, categories, device times).

    Kernels whose name occurs once in the step cannot belong to a repeated block (head, tail, or
    an interloper from another stream landing mid-layer): they are set aside before the search
    and only count towards the time of the stretch they fall in."""
    name_codes, category_codes = np.asarray(name_codes), np.asarray(category_codes)
    all_start, all_end = np.asarray(start_ns), np.asarray(end_ns)
    n_all = len(name_codes)
    counts = np.bincount(name_codes - name_codes.min()) if n_all else np.array([], dtype=np.int64)
    keep = counts[name_codes - name_codes.min()] > 1 if n_all else np.zeros(0, dtype=bool)
    kept_idx = np.flatnonzero(keep)
    all_cats = category_codes
    name_codes, category_codes = name_codes[keep], category_codes[keep]
    start_ns, end_ns = all_start[keep], all_end[keep]
    n = len(name_codes)
    by_name = find_repetition(name_codes)
    by_cat = find_repetition(category_codes)
    rep, how = by_name, "kernel names"
    if (
        by_cat is not None
        and by_name is not None
        and by_name.period % by_cat.period == 0
        and by_name.period > by_cat.period
        and by_cat.covered >= 0.9 * by_name.covered
    ):
        k = by_name.period // by_cat.period
        rep, how = by_cat, f"kernel categories (names repeat only every {k} layers: alternating layer variants)"
    elif by_name is None and by_cat is not None:
        rep, how = by_cat, "kernel categories (names never repeat)"
    if rep is None or rep.covered < MIN_COVERAGE * n_all:
        seen = f"best: {rep.repeats} x {rep.period} {what}, {rep.covered / n_all:.0%} of the step" if rep else "none"
        return _no_layers(
            f"no block of {what} repeats over at least {MIN_COVERAGE:.0%} of the step's {n_all} ({seen}): "
            "layers not counted"
        )
    first = rep.start
    block_first = first + rep.period * np.arange(rep.repeats)
    offsets = _layers_per_block(name_codes[first : first + rep.period], category_codes[first : first + rep.period])
    if offsets is not None:
        # each block holds several layers: cut it where each layer's attention starts (shifted so the
        # first cut is the block's start), over the whole repeating stretch, a partial last block included
        cuts = (first + rep.period * np.arange(rep.repeats + 1)[:, None] + offsets[None, :]).ravel()
        block_first = cuts[cuts < rep.stop]
        how += f"; each block holds {len(offsets)} layers (one attention each) of unequal length"
    lengths = np.diff(block_first)
    typical = int(np.median(lengths)) if len(lengths) else rep.period
    block_last = np.append(block_first[1:] - 1, min(block_first[-1] + typical, rep.stop, n) - 1)
    if len(block_first) > MIN_LAYERS and block_last[-1] - block_first[-1] + 1 < 0.75 * typical:
        block_first, block_last = block_first[:-1], block_last[:-1]  # a stub of a layer: left to the tail
        block_last[-1] = min(block_first[-1] + typical, rep.stop, n) - 1
    block_first, block_last, ends = _near_copy_ends(
        block_first, block_last, typical, name_codes, category_codes, all_cats, kept_idx
    )
    if ends:
        how += f"; the {' and '.join(ends)} layer(s) differ from the rest by a few kernels"
    first = int(block_first[0])
    rep = Repetition(typical, first, len(block_first), int(block_last[-1]) + 1)
    start_ns, end_ns = np.asarray(start_ns), np.asarray(end_ns)
    b_start = start_ns[block_first]
    # a block runs until the next one starts; the last one until its last kernel ends
    b_end = np.append(b_start[1:], end_ns[block_last[-1]] if len(block_last) else 0)
    b_end = np.maximum(b_end, b_start)
    span_us = (b_end - b_start) / 1e3
    dur = end_ns - start_ns
    cum = np.concatenate([[0], np.cumsum(dur)])
    kernel_us = (cum[block_last + 1] - cum[block_first]) / 1e3
    first_all = int(kept_idx[first])
    last_all = int(kept_idx[block_last[-1]])
    head_us = (b_start[0] - all_start[:first_all].min()) / 1e3 if first_all > 0 else 0.0
    tail_us = (all_end[last_all + 1 :].max() - b_end[-1]) / 1e3 if last_all + 1 < n_all else 0.0
    set_aside = n_all - n
    evidence = (
        f"a block of {rep.period} {what} repeats {rep.repeats} times by {how}, covering "
        f"{last_all + 1 - first_all} of the step's {n_all} {what} ({(last_all + 1 - first_all) / n_all:.0%}); "
        f"head {first_all} {what}, "
        f"tail {n_all - last_all - 1}" + (f"; {set_aside} {what} seen once in the step set aside" if set_aside else "")
    )
    return LayerResult(
        layers=rep.repeats,
        kernels_per_layer=rep.period,
        head_kernels=first_all,
        tail_kernels=n_all - last_all - 1,
        layer_us=_spread(span_us),
        layer_kernel_us={"p50": float(np.median(kernel_us))},
        head_us=float(max(head_us, 0.0)),
        tail_us=float(max(tail_us, 0.0)),
        block_starts_ns=tuple(int(x) for x in b_start),
        block_ends_ns=tuple(int(x) for x in b_end),
        evidence=evidence,
    )


def _near_copy_ends(
    block_first: np.ndarray,
    block_last: np.ndarray,
    typical: int,
    name_codes: np.ndarray,
    category_codes: np.ndarray,
    all_cats: np.ndarray,
    kept_idx: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The layers with a first or last one added where it differs from the others by a kernel or two (the first
    layer's norm has no residual add to fuse; the last one's ends in the final norm): it is still a layer."""
    n = len(name_codes)
    ends = []
    lo = max(block_first[0] - typical, 0)
    head_seq = name_codes[lo : block_first[0]]
    if len(head_seq) >= 0.75 * typical and _is_near_copy(
        head_seq,
        name_codes[block_first[0] : block_last[0] + 1],
        all_cats[kept_idx[lo] : kept_idx[block_first[0]]],
        category_codes[block_first[0] : block_last[0] + 1],
    ):
        block_first = np.insert(block_first, 0, block_first[0] - len(head_seq))
        block_last = np.insert(block_last, 0, block_first[1] - 1)
        ends.append("first")
    hi = block_last[-1] + 1 + typical
    tail_seq = name_codes[block_last[-1] + 1 : hi]
    if len(tail_seq) >= 0.75 * typical and _is_near_copy(
        tail_seq,
        name_codes[block_first[-1] : block_last[-1] + 1],
        all_cats[kept_idx[block_last[-1]] + 1 : kept_idx[min(hi, n) - 1] + 1],
        category_codes[block_first[-1] : block_last[-1] + 1],
    ):
        block_first = np.append(block_first, block_last[-1] + 1)
        block_last = np.append(block_last, block_last[-1] + len(tail_seq))
        ends.append("last")
    return block_first, block_last, ends


def _layers_per_block(names: np.ndarray, cats: np.ndarray) -> np.ndarray | None:
    """Offsets at which the layers of a repeated block start, when the block is more than one layer:
    a decoder layer runs one attention (a stretch of attention kernels), so k stretches in the
    block are k layers (gpt-oss alternates sliding-window and full-attention layers of 17 and 18
    kernels; a compiled CPU graph can alternate 27 and 29 host ops). The parts must be near copies
    of each other, else the block is left whole."""
    attention = np.asarray(cats) == ATTENTION
    run_start = np.flatnonzero(attention & ~np.append(False, attention[:-1]))
    if len(run_start) < 2:
        return None
    offsets = run_start - run_start[0]
    parts = [names[a:b] for a, b in zip(offsets, np.append(offsets[1:], len(names)), strict=True)]
    if min(_multiset_similarity(parts[0], p) for p in parts[1:]) < SAME_LAYER:
        return None
    return offsets


def _is_near_copy(seq: np.ndarray, block: np.ndarray, seq_cats: np.ndarray, block_cats: np.ndarray) -> bool:
    """Mostly the same kernels as a layer, and no kind of work a layer never does (an embedding
    lookup or sampling belongs to the head or tail, not to a layer)."""
    return _multiset_similarity(seq, block) >= SAME_LAYER and set(seq_cats.tolist()) <= set(block_cats.tolist())


def _multiset_similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Shared kernels over all kernels of two sequences, counting repeats (1.0: same kernels)."""
    values = np.union1d(a, b)
    ca = np.array([(a == v).sum() for v in values])
    cb = np.array([(b == v).sum() for v in values])
    return float(np.minimum(ca, cb).sum() / max(np.maximum(ca, cb).sum(), 1))


def _spread(values: np.ndarray) -> dict[str, float]:
    return {
        "p50": float(np.median(values)),
        "p90": float(np.percentile(values, 90)),
        "min": float(values.min()),
        "max": float(values.max()),
        "first": float(values[0]),
        "last": float(values[-1]),
    }


def _no_layers(evidence: str) -> LayerResult:
    return LayerResult(None, None, None, None, None, None, None, None, (), (), evidence)
