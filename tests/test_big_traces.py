"""Issue 27: big serving traces. The anatomy's module spans narrowed to the categorised ones give the same
enclosing category as every span would (checked against a brute-force walk on nested SYNTHETIC spans)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.categories import CATEGORIES, categorised_rows, enclosing_categories


def _nested_spans(rng: np.random.Generator, n_top: int) -> list[tuple[int, int, int, str]]:
    """(tid, ts, dur, name) of properly nested spans on two threads: each top-level span holds a random tree."""
    names = ["nn.Module: LlamaRMSNorm_0", "nn.Module: LlamaAttention_0", "model.py(12): forward", "torch/nn/f.py: x"]
    spans = []

    def tree(tid: int, start: int, end: int, depth: int) -> None:
        spans.append((tid, start, end - start, names[rng.integers(len(names))]))
        if depth < 4 and end - start > 40:
            cut = start + 5
            while cut + 10 < end - 5:
                length = int(rng.integers(5, max(6, (end - cut) // 2)))
                tree(tid, cut, min(cut + length, end - 5), depth + 1)
                cut += length + int(rng.integers(1, 10))

    for tid in (1, 2):
        t = 0
        for _ in range(n_top):
            length = int(rng.integers(100, 400))
            tree(tid, t, t + length, 0)
            t += length + int(rng.integers(1, 50))
    return spans


def _brute_force(spans, point_tid, point_ts) -> np.ndarray:
    """The innermost span with a strong category holding each point (same thread, start <= ts < end)."""
    _, cats = _categories([s[3] for s in spans])
    strong = {"norm", "attention"}
    out = np.full(len(point_ts), -1, dtype=np.int64)
    for i, (tid, ts) in enumerate(zip(point_tid, point_ts, strict=True)):
        best = None
        for (s_tid, s_ts, s_dur, _), cat in zip(spans, cats, strict=True):
            inside = s_tid == tid and s_ts <= ts < s_ts + s_dur and cat in strong
            if inside and (best is None or s_dur < best[0]):
                best = (s_dur, cat)
        if best is not None:
            out[i] = CATEGORIES.index(best[1])
    return out


def _categories(names: list[str]):
    from analysis.categories import categorize

    short, category = categorize(pd.Series(pd.Categorical(names)))
    return short, [str(c) for c in category]


def test_enclosing_categories_on_categorised_spans_only_matches_every_span() -> None:
    rng = np.random.default_rng(7)
    spans = _nested_spans(rng, 30)
    tid, ts, dur = (np.array([s[k] for s in spans], dtype=np.int64) for k in range(3))
    names = pd.Series(pd.Categorical([s[3] for s in spans]))
    ts, dur = ts * 2, dur * 2  # spans on even times, points on odd ones: no point starts with a span (see
    spans = [(t, 2 * a, 2 * d, name) for t, a, d, name in spans]  # categories._categorised_spans on ties)
    point_tid = rng.integers(1, 3, 400)
    point_ts = rng.choice(int(ts.max() + dur.max()) // 2, 400, replace=False) * 2 + 1  # no two at once, either
    got = enclosing_categories(tid, ts, dur, names, point_tid, point_ts)
    assert (got >= 0).sum() > 50  # the check is not vacuous: many points lie in a norm or attention module
    assert got.tolist() == _brute_force(spans, point_tid, point_ts).tolist()


def test_categorised_rows_keeps_only_strong_names_of_the_rows_asked() -> None:
    names = pd.Series(pd.Categorical(["nn.Module: LlamaRMSNorm_0", "model.py(12): forward", "aten::view", None]))
    rows = np.array([True, True, True, True])
    assert categorised_rows(names, rows).tolist() == [True, False, False, False]
    assert categorised_rows(names, np.array([False, True, True, True])).tolist() == [False, False, False, False]
