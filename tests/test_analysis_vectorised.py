"""The vectorised analysis helpers against plain references on synthetic random data (issue 17's speed work).

Each reference is the slow, obvious formulation (pandas isin/groupby, a per-op Python loop over the nesting
definition); the fast code must agree with it exactly, dtypes included, ties and empty inputs included.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from stepscope.analysis.activity import _leaf_ops
from stepscope.analysis.anatomy import _per_step
from stepscope.analysis.categories import CATEGORIES, host_op_categories, host_op_columns, nesting_parents
from stepscope.analysis.event_rows import isin_ints, kind_mask, name_mask, text_column
from stepscope.analysis.kernel_names import short_names
from stepscope.analysis.layers import MIN_BLOCK, MIN_LAYERS, _longest_repeat_runs
from stepscope.analysis.pipeline import _top_kernels
from stepscope.analysis.steps import _place
from stepscope.analysis.summary import _ttft_ms_by_request

SEEDS = range(40)


def _events(rng: np.random.Generator, n: int) -> pd.DataFrame:
    kinds = ["kernel", "cpu_op", "runtime", "annotation", "sync"]
    names = ["aten::mm", "aten::embedding", "cudaLaunchKernel", "k1", "k2"]
    return pd.DataFrame(
        {
            "kind": pd.Categorical.from_codes(rng.integers(-1, len(kinds), n), categories=kinds),
            "name": pd.Categorical.from_codes(rng.integers(-1, len(names), n), categories=names),
        }
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_row_masks_match_isin(seed):
    rng = np.random.default_rng(seed)
    ev = _events(rng, int(rng.integers(0, 50)))
    for kinds in (["kernel"], ("runtime", "sync"), ["missing"], []):
        assert np.array_equal(kind_mask(ev, kinds), ev["kind"].isin(list(kinds)).to_numpy())
    for names in (["aten::mm"], ("k1", "cudaLaunchKernel", "absent"), ()):
        assert np.array_equal(name_mask(ev, names), ev["name"].isin(list(names)).to_numpy())


@pytest.mark.parametrize("seed", SEEDS)
def test_isin_ints_matches_numpy(seed):
    rng = np.random.default_rng(seed)
    values = rng.integers(-5, 60, int(rng.integers(0, 40)))
    allowed = rng.integers(-3, 50, int(rng.integers(0, 40)))
    assert np.array_equal(isin_ints(values, allowed), np.isin(values, allowed))
    sparse = allowed * (1 << 26)  # a range too wide for the lookup table
    assert np.array_equal(isin_ints(values * (1 << 26), sparse), np.isin(values * (1 << 26), sparse))


def test_text_column_is_what_a_frame_infers():
    labels = ("launch", "sync", "other")
    for codes in (np.array([2, 0, 0, 1]), np.array([], dtype=np.int8)):
        inferred = pd.DataFrame({"c": np.asarray(labels, dtype=object)[codes]})["c"]
        built = pd.DataFrame({"c": text_column(labels, codes)})["c"]
        assert built.dtype == inferred.dtype
        assert built.equals(inferred)


def _nesting_by_definition(tid, ts, dur):
    """Depth and parent straight from nesting_parents' docstring, one op at a time."""
    order = sorted(range(len(ts)), key=lambda i: (tid[i], ts[i], -dur[i]))
    t, s = [tid[i] for i in order], [ts[i] for i in order]
    e = [ts[i] + dur[i] for i in order]
    depth = []
    for i in range(len(order)):
        started = sum(1 for j in range(i) if t[j] == t[i])
        ended = sum(1 for j in range(len(order)) if t[j] == t[i] and e[j] <= s[i]) - (e[i] == s[i])
        depth.append(max(started - ended, 0))
    parent = []
    for i in range(len(order)):
        up = [j for j in range(i) if t[j] == t[i] and depth[j] == depth[i] - 1] if depth[i] > 0 else []
        parent.append(up[-1] if up else -1)
    return order, parent, depth


@pytest.mark.parametrize("seed", SEEDS)
def test_nesting_matches_its_definition(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 30))
    tid = rng.integers(0, 3, n) * 5
    ts = np.sort(rng.integers(-20, 300, n)) if seed % 2 else rng.integers(-20, 300, n)
    dur = rng.choice([0, 1, 10, 40, 200], n)
    order, parent, depth = nesting_parents(tid, ts, dur)
    ref_order, ref_parent, ref_depth = _nesting_by_definition(list(tid), list(ts), list(dur))
    assert list(order) == ref_order
    assert list(depth) == ref_depth
    assert list(parent) == ref_parent


def _per_step_by_groupby(work: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """The per-step category table as a pandas groupby (how it was first written)."""
    placed = work[work["step"] >= 0]
    counted = placed[placed["leaf"]] if len(placed) else placed
    time = placed.groupby(["step", "category"], observed=True)["time_ns"].sum()
    count = counted.groupby(["step", "category"], observed=True).size()
    frame = pd.DataFrame({"time_ns": time, "kernels": count}).fillna(0).reset_index()
    frame["kernels"] = frame["kernels"].astype(np.int64)
    frame["time_ns"] = frame["time_ns"].astype(np.int64)
    frame = frame[(frame["time_ns"] > 0) | (frame["kernels"] > 0)]
    kinds = steps["kind"].to_numpy() if len(steps) else np.array([], dtype=object)
    frame.insert(1, "kind", kinds[frame["step"].to_numpy()] if len(frame) else [])
    return frame.sort_values(["step", "time_ns"], ascending=[True, False]).reset_index(drop=True)


@pytest.mark.parametrize("seed", SEEDS)
def test_per_step_categories_match_groupby(seed):
    rng = np.random.default_rng(seed)
    n, n_steps = int(rng.integers(0, 40)), int(rng.integers(0, 4))
    work = pd.DataFrame(
        {
            "time_ns": rng.choice([0, 0, 5, 10, 10, 30], n).astype(np.int64),  # many ties and zeros
            "leaf": rng.random(n) < 0.5,
            "category": pd.Categorical(rng.choice(list(CATEGORIES), n), categories=CATEGORIES),
            "step": rng.integers(-1, max(n_steps, 1), n).astype(np.int64) if n_steps else np.full(n, -1),
        }
    )
    steps = pd.DataFrame({"kind": np.array(rng.choice(["prefill", "decode"], n_steps), dtype=object)})
    pd.testing.assert_frame_equal(_per_step(work, steps), _per_step_by_groupby(work, steps), check_exact=True)


def _top_kernels_by_groupby(act, steps, work_step, top):
    """The heaviest kernels per phase as a pandas groupby over the names as strings (how it was first written)."""
    kernel = act.work_is_kernel
    phase = np.full(len(work_step), "outside steps", dtype=object)
    placed = work_step >= 0
    if len(steps):
        phase[placed] = steps["kind"].to_numpy()[work_step[placed]]
    dur = (act.work_end - act.work_start)[kernel]
    frame = pd.DataFrame({"phase": phase[kernel], "name": np.asarray(act.work_name)[kernel], "dur": dur})
    grouped = frame.groupby(["phase", "name"], observed=True, sort=False)["dur"].agg(["count", "sum"]).reset_index()
    grouped = grouped.rename(columns={"sum": "total_ns"})
    grouped["share_pct"] = 100.0 * grouped["total_ns"] / grouped.groupby("phase")["total_ns"].transform("sum")
    grouped = grouped.sort_values(["phase", "total_ns"], ascending=[True, False])
    grouped = grouped.groupby("phase", sort=False).head(top).reset_index(drop=True)
    grouped.insert(1, "short", short_names(grouped["name"].astype(str)).astype(str))
    return grouped


@pytest.mark.parametrize("seed", SEEDS)
def test_top_kernels_match_groupby(seed):
    rng = np.random.default_rng(seed)
    n, n_steps = int(rng.integers(1, 60)), int(rng.integers(0, 4))
    names = ["k_a", "k_b", "void gemm<float>(int)", "zz", "ampere_sgemm_128x64_nn"]
    start, dur = rng.integers(0, 100, n), rng.choice([0, 1, 2, 2, 5], n)  # equal totals: ties
    act = SimpleNamespace(
        work_is_kernel=rng.random(n) < 0.8,
        work_name=pd.Categorical.from_codes(rng.integers(0, len(names), n), categories=names),
        work_start=start,
        work_end=start + dur,
    )
    steps = pd.DataFrame({"kind": np.array(rng.choice(["prefill", "decode", "zeta"], n_steps), dtype=object)})
    work_step = rng.integers(-1, n_steps, n) if n_steps else np.full(n, -1)
    top = int(rng.integers(1, 4))
    fast, slow = _top_kernels(act, steps, work_step, top), _top_kernels_by_groupby(act, steps, work_step, top)
    if slow.empty:
        assert fast.empty
    else:
        pd.testing.assert_frame_equal(fast, slow, check_exact=True)


def _longest_repeat_run_by_loop(codes: np.ndarray, p: int) -> tuple[int, int]:
    """(length, start) of the first longest stretch of codes[i] == codes[i + p], one position at a time."""
    best, best_at, run = 0, 0, 0
    for i in range(len(codes) - p):
        run = run + 1 if codes[i] == codes[i + p] else 0
        if run > best:
            best, best_at = run, i - run + 1
    return best, best_at


@pytest.mark.parametrize("seed", SEEDS)
def test_repeat_runs_match_a_loop(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(MIN_BLOCK * MIN_LAYERS, 80))
    block = rng.integers(0, 4, int(rng.integers(1, 9)))  # a repeated block with noise: long, tied and no runs
    codes = np.resize(block, n)
    noise = rng.random(n) < rng.choice([0.0, 0.05, 0.3, 1.0])
    codes[noise] = rng.integers(0, 6, int(noise.sum()))
    periods = np.arange(MIN_BLOCK, n // MIN_LAYERS + 1)
    expected = [_longest_repeat_run_by_loop(codes, int(p)) for p in periods]
    for cells in (1 << 21, n, 3 * n + 1):  # all periods at once, one per block, blocks of three (a ragged end)
        runs, starts = _longest_repeat_runs(codes.astype(np.int8), periods, cells=cells)
        assert list(zip(runs.tolist(), starts.tolist(), strict=True)) == expected


@pytest.mark.parametrize("seed", SEEDS)
def test_host_op_columns_match_the_frame(seed):
    """The arrays host_work builds its frame from are host_op_categories' columns, whether or not the ops
    come in nesting order (one thread, sorted: nothing reordered; several threads or unsorted: sorted and back)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    names = ["aten::mm", "aten::view", "aten::add", "Torch-Compiled Region: 0/0", "aten::linear", "mystery"]
    tid = np.zeros(n, dtype=np.int64) if seed % 2 else rng.integers(0, 3, n).astype(np.int64)
    ts = np.sort(rng.integers(0, 300, n)) if seed % 3 else rng.integers(0, 300, n)
    ops = pd.DataFrame(
        {
            "ts": ts.astype(np.int64),
            "dur": rng.choice([0, 1, 10, 40, 200], n).astype(np.int64),
            "tid": tid,
            "name": pd.Categorical.from_codes(rng.integers(0, len(names), n), categories=names),
        }
    )
    frame = host_op_categories(ops)
    columns = host_op_columns(*(ops[c].to_numpy() for c in ("tid", "ts", "dur")), ops["name"].array)
    assert list(columns) == ["short", "self_ns", "category", "leaf", "outer"]
    for name, values in columns.items():
        assert pd.Series(values).equals(frame[name].reset_index(drop=True)), name


def _leaf_ops_by_loop(tid, ts, dur) -> list[int]:
    """Positions of the ops that no op of their thread starts inside (the next op in (thread, start, longest
    first) order starts on another thread or at/after its end), in order of start, one op at a time."""
    order = sorted(range(len(ts)), key=lambda i: (tid[i], ts[i], -dur[i]))
    leaves = []
    for k, i in enumerate(order):
        nxt = order[k + 1] if k + 1 < len(order) else None
        if nxt is None or tid[nxt] != tid[i] or ts[nxt] >= ts[i] + dur[i]:
            leaves.append(i)
    return sorted(leaves, key=lambda i: ts[i])  # stable: equal starts keep the nesting order


@pytest.mark.parametrize("seed", SEEDS)
def test_leaf_ops_match_a_loop(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 30))
    tid = np.zeros(n, dtype=np.int64) if seed % 2 else rng.integers(0, 3, n).astype(np.int64)
    ts = np.sort(rng.integers(-20, 300, n)) if seed % 3 else rng.integers(-20, 300, n)
    dur = rng.choice([0, 1, 10, 40, 200], n).astype(np.int64)
    assert _leaf_ops(tid, ts, dur).tolist() == _leaf_ops_by_loop(tid.tolist(), ts.tolist(), dur.tolist())


def _ttft_by_pandas(steps: pd.DataFrame) -> dict[int, float]:
    """Each request's first prefill, start to token, as pandas drop_duplicates (how it was first written)."""
    prefill = steps[steps["kind"] == "prefill"]
    if prefill.empty:
        return {}
    first = prefill.drop_duplicates("request", keep="first").sort_values("request", kind="stable")
    ms = (first["token_ns"].to_numpy() - first["start_ns"].to_numpy()) / 1e6
    return dict(zip(first["request"].to_numpy().tolist(), ms.tolist(), strict=True))


@pytest.mark.parametrize("seed", SEEDS)
def test_ttft_by_request_matches_pandas(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 30))
    start = np.sort(rng.integers(0, 10_000, n)).astype(np.int64)
    steps = pd.DataFrame(
        {
            "kind": np.array(rng.choice(["prefill", "decode", "mixed"], n), dtype=object),
            "request": rng.integers(0, 5, n).astype(np.int64),  # unsorted, repeated: several prefills per request
            "start_ns": start,
            "token_ns": start + rng.integers(1, 3_000_000, n),
        }
    )
    fast, slow = _ttft_ms_by_request(steps), _ttft_by_pandas(steps)
    assert list(fast.items()) == list(slow.items())


def _place_by_loop(times, start, limit) -> list[int]:
    """Per time: the last step starting at or before it, if the time is before that step's limit; else -1."""
    out = []
    for t in times:
        k = max((i for i, s in enumerate(start) if s <= t), default=-1)
        out.append(k if k >= 0 and t < limit[k] else -1)
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_place_matches_a_loop(seed):
    rng = np.random.default_rng(seed)
    n, n_steps = int(rng.integers(0, 40)), int(rng.integers(0, 6))
    times = rng.integers(-5, 100, n).astype(np.int64)
    if seed % 4:
        times = np.sort(times)  # sorted (the painted runs), with repeats; else unsorted (the searches)
    start = np.sort(rng.integers(0, 90, n_steps)).astype(np.int64)  # repeated starts: the last one holds
    limit = start + rng.choice([-3, 0, 1, 5, 20, 200], n_steps)  # limits before, at, past the next start
    assert _place(times, start, limit).tolist() == _place_by_loop(times.tolist(), start.tolist(), limit.tolist())
