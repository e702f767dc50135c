"""Many ranks of one run side by side: aligned steps, skew, communication, waiting, stragglers.

Why: in a tensor/pipeline-parallel run every step ends at a collective, so the ranks' step *durations* are
nearly equal and do not show who is slow; the rank everybody waits for at the collectives does. Each rank is
analysed with the same ``analyze()`` as a single trace; this module then

- aligns steps across ranks by (request, index) when every rank has markers/annotations, else by position;
- per rank and step measures communication (collective kernels on a GPU, collective host ops on a CPU-only
  trace: the categories module's `communication` rule, ``communication_mask``), exposed communication (not
  overlapped with that rank's compute), and time waiting at collectives (on one clock: the latest peer's
  arrival at the same collective minus this rank's arrival; across clocks: this rank's collective duration
  minus the fastest rank's);
- per step across ranks: the slowest rank (most step time not spent waiting for peers), the skew (latest end
  minus earliest end on one clock, else the spread of durations);
- findings: a straggler rank with its evidence, communication-bound steps, imbalance.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from stepscope.parsers.ranks import RankedRun
from stepscope.parsers.timeline import GPU_KINDS, Timeline
from . import Analysis, AnalysisOptions, analyze
from .activity import busy_union, covered_time, derive_activity
from .categories import categorize
from .model import Finding, ranked
from .number_format import format_value
from .rank_collectives import Collectives, match_collectives

STRAGGLER_SHARE = 0.6  # slowest in at least this share of aligned steps
STRAGGLER_MIN_EXCESS_PCT = 5.0  # and its non-waiting time exceeds the others' median by this much
COMM_BOUND_PCT = 50.0  # a step spending at least this share of its time in exposed communication
IMBALANCE_PCT = 10.0  # median over steps of (max - min) non-waiting time / median step time

RANK_STEP_COLUMNS = (
    "step",
    "rank",
    "kind",
    "start_ns",
    "end_ns",
    "dur_ns",
    "idle_ns",
    "comm_ns",
    "exposed_comm_ns",
    "wait_ns",
    "work_ns",
)


def communication_mask(names: pd.Series) -> np.ndarray:
    """Which events are collectives, by name: the anatomy's `communication` category (analysis/categories.py),
    the one rule for NCCL/RCCL kernels, custom all-reduce kernels and torch.distributed's c10d::/gloo host ops."""
    if not len(names):
        return np.zeros(0, dtype=bool)
    _, category = categorize(names)
    return np.asarray(category == "communication", dtype=bool)


@dataclass(frozen=True)
class RankRun:
    ranks: tuple[int, ...]
    analyses: tuple[Analysis, ...]
    rank_steps: pd.DataFrame  # RANK_STEP_COLUMNS: one row per (aligned step, rank)
    steps: pd.DataFrame  # one row per aligned step: slowest_rank, skew_ns, step_ns (slowest rank), comm/exposed
    totals: pd.DataFrame  # one row per rank over its whole trace: rank, span_ns, comm_ns, exposed_comm_ns, collectives
    findings: tuple[Finding, ...]
    warnings: tuple[str, ...]
    alignment: str  # "request+index" | "position"
    same_clock: bool
    clock_note: str
    collectives: Collectives | None = None  # each collective across the ranks, the clock check (rank_collectives)


def collective_ops(timeline: Timeline) -> pd.DataFrame:
    """The collectives of one rank (start_ns, end_ns, lane, name), outermost only, sorted by start.

    On a trace with GPU work: collective kernels. On a CPU-only trace: collective host ops (cpu_op), keeping the
    outermost of nested ones (the caller's c10d:: op, which includes its wait, over gloo's inner work).
    """
    ev = timeline.events
    on_gpu = bool(ev["kind"].isin(GPU_KINDS).any())
    pool = ev[ev["kind"].isin(GPU_KINDS)] if on_gpu else ev[ev["kind"] == "cpu_op"]
    comm = pool[communication_mask(pool["name"])]
    lane = comm["stream"] if on_gpu else comm["tid"]
    frame = pd.DataFrame(
        {
            "start_ns": comm["ts"].to_numpy(),
            "end_ns": (comm["ts"] + comm["dur"]).to_numpy(),
            "lane": lane.to_numpy(),
            "name": comm["name"].astype(str).to_numpy(),  # its kind (analysis.rank_collectives)
        }
    ).sort_values(["lane", "start_ns", "end_ns"], ascending=[True, True, False], kind="stable")
    prev_end = frame.groupby("lane", sort=False)["end_ns"].cummax().groupby(frame["lane"]).shift(1)
    outer = ~(prev_end >= frame["end_ns"]).to_numpy()
    return frame[outer].sort_values("start_ns", kind="stable").reset_index(drop=True)


def _compute_blocks(timeline: Timeline) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint intervals when this rank computes: its device work (leaf host ops on a CPU) that is not a collective."""
    act = derive_activity(timeline)
    names = pd.Series(pd.Categorical(act.work_name)) if len(act.work_start) else pd.Series([], dtype=object)
    keep = ~communication_mask(names) if len(names) else np.zeros(0, dtype=bool)
    return busy_union(act.work_start[keep], act.work_end[keep])


def _overlap_ns(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], lo, hi) -> np.ndarray:
    """|A ∩ B| inside each window, from |A| + |B| - |A ∪ B| (A and B each disjoint)."""
    union = busy_union(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]))
    return covered_time(*a, lo, hi) + covered_time(*b, lo, hi) - covered_time(*union, lo, hi)


def _align(analyses: list[Analysis]) -> tuple[list[np.ndarray], str, list[str]]:
    """Per rank, the row of its steps frame for each aligned step."""
    warnings: list[str] = []
    counts = [len(a.steps) for a in analyses]
    if len(set(counts)) > 1:
        warnings.append(
            f"ranks found different numbers of steps ({', '.join(map(str, counts))}): only steps present on every rank"
            " are compared"
        )
    labelled = all(len(a.steps) and (a.steps["label"] != "").all() for a in analyses)
    if labelled:
        keys = [list(zip(a.steps["request"], a.steps["index"], strict=False)) for a in analyses]
        common = sorted(set(keys[0]).intersection(*map(set, keys[1:])))
        positions = [{key: i for i, key in enumerate(k)} for k in keys]  # loops over steps, not events
        rows = [np.array([pos[c] for c in common], dtype=np.int64) for pos in positions]
        return rows, "request+index", warnings
    n = min(counts) if counts else 0
    return [np.arange(n, dtype=np.int64) for _ in analyses], "position", warnings


def _collective_waits(
    colls: list[pd.DataFrame], windows: list[tuple[np.ndarray, np.ndarray]], same_clock: bool
) -> tuple[list[np.ndarray], list[str]]:
    """Per rank and aligned step, time spent waiting at collectives for the slowest peer to arrive.

    The k-th collective of a step on one rank is matched with the k-th of the same step on every other rank
    (the ranks of one run issue the same collectives in the same order). A step whose collective counts
    differ between ranks gets no waiting figure (NaN).
    """
    parts = []
    n_steps = len(windows[0][0]) if windows else 0
    for r, (c, (lo, hi)) in enumerate(zip(colls, windows, strict=False)):
        step = np.searchsorted(lo, c["start_ns"].to_numpy(), side="right") - 1
        ok = step >= 0
        ok[ok] = c["start_ns"].to_numpy()[ok] < hi[step[ok]]
        f = pd.DataFrame(
            {
                "rank": r,
                "step": step[ok],
                "start": c["start_ns"].to_numpy()[ok],
                "dur": (c["end_ns"] - c["start_ns"]).to_numpy()[ok],
            }
        )
        f["k"] = f.groupby("step").cumcount()
        parts.append(f)
    allc = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["rank", "step", "start", "dur", "k"])
    waits = [np.zeros(n_steps) for _ in colls]
    warnings: list[str] = []
    if allc.empty:
        return waits, warnings
    per = (
        allc.groupby(["step", "rank"])
        .size()
        .unstack(fill_value=0)
        .reindex(index=range(n_steps), columns=range(len(colls)), fill_value=0)
    )
    consistent = per.nunique(axis=1) == 1
    if not consistent.all():
        warnings.append(
            f"{int((~consistent).sum())} aligned step(s) have different collective counts across ranks: no waiting"
            " figure for them"
        )
    g = allc.groupby(["step", "k"])
    if same_clock:
        wait = (g["start"].transform("max") - allc["start"]).clip(lower=0)
        wait = np.minimum(wait, allc["dur"])  # cannot wait longer than the collective lasted
    else:
        wait = allc["dur"] - g["dur"].transform("min")
    allc["wait"] = wait.astype(float)
    summed = allc.groupby(["rank", "step"])["wait"].sum()
    for r in range(len(colls)):
        w = summed.xs(r, level="rank") if r in summed.index.get_level_values(0) else pd.Series(dtype=float)
        arr = w.reindex(range(n_steps), fill_value=0.0).to_numpy(dtype=float, copy=True)
        arr[~consistent.to_numpy()] = np.nan
        waits[r] = arr
    return waits, warnings


def analyze_ranks(
    run: RankedRun, options: AnalysisOptions | None = None, analyses: list[Analysis] | None = None
) -> RankRun:
    """Compare the ranks of a run step by step. `analyses`: each rank's Analysis in the run's order, as the front
    door made them (with the model's additions); analysed here with `options` when not given."""
    if analyses is None:
        analyses = [analyze(t, options) for t in run.timelines]
    ranks = tuple(f.rank for f in run.files)
    rows, alignment, warnings = _align(analyses)
    warnings = [*run.warnings, *warnings]
    windows, per_rank, colls = [], [], []
    for a, t, idx in zip(analyses, run.timelines, rows, strict=False):
        s = a.steps.iloc[idx]
        lo, hi = s["start_ns"].to_numpy(np.int64), s["end_ns"].to_numpy(np.int64)
        windows.append((lo, hi))
        colls.append(collective_ops(t))
    waits, wait_warnings = _collective_waits(colls, windows, run.same_clock)
    warnings += wait_warnings
    blocks = [_compute_blocks(t) for t in run.timelines]  # once per rank: the steps and the totals both use them
    for r, (a, idx, (lo, hi), c) in enumerate(zip(analyses, rows, windows, colls, strict=False)):
        comm = busy_union(c["start_ns"].to_numpy(), c["end_ns"].to_numpy())
        comm_ns = covered_time(*comm, lo, hi)
        exposed = comm_ns - _overlap_ns(comm, blocks[r], lo, hi)
        per_rank.append(
            pd.DataFrame(
                {
                    "step": np.arange(len(lo)),
                    "rank": ranks[r],
                    "kind": a.steps["kind"].to_numpy()[idx],
                    "start_ns": lo,
                    "end_ns": hi,
                    "dur_ns": hi - lo,
                    "idle_ns": a.steps["gpu_idle_ns"].to_numpy()[idx],  # device idle (no op running, on a CPU)
                    "comm_ns": comm_ns,
                    "exposed_comm_ns": exposed,
                    "wait_ns": waits[r],
                    "work_ns": (hi - lo) - np.nan_to_num(waits[r]),
                }
            )
        )
    totals = pd.DataFrame(
        [_totals(rank, t, c, b) for rank, t, c, b in zip(ranks, run.timelines, colls, blocks, strict=False)]
    )
    rank_steps = pd.concat(per_rank, ignore_index=True) if per_rank else pd.DataFrame(columns=RANK_STEP_COLUMNS)
    steps = _per_step(rank_steps, run.same_clock)
    findings = _findings(rank_steps, steps, ranks)
    if steps.empty and len(ranks) >= 2:
        findings.append(_not_judged(analyses, ranks))
    return RankRun(
        ranks,
        tuple(analyses),
        rank_steps,
        steps,
        totals,
        ranked(findings),
        tuple(warnings),
        alignment,
        run.same_clock,
        run.clock_note,
        match_collectives(ranks, colls, run.same_clock),
    )


def _totals(rank: int, timeline: Timeline, colls: pd.DataFrame, blocks: tuple[np.ndarray, np.ndarray]) -> dict:
    """Communication over a rank's whole trace: the figures a trace without generation steps (training) still has.
    `blocks`: the rank's _compute_blocks."""
    ev = timeline.events
    lo = np.array([int(ev["ts"].min()) if len(ev) else 0])
    hi = np.array([int((ev["ts"] + ev["dur"]).max()) if len(ev) else 0])
    comm = busy_union(colls["start_ns"].to_numpy(), colls["end_ns"].to_numpy())
    comm_ns = int(covered_time(*comm, lo, hi)[0])
    exposed = comm_ns - int(_overlap_ns(comm, blocks, lo, hi)[0])
    return {
        "rank": rank,
        "span_ns": int(hi[0] - lo[0]),
        "comm_ns": comm_ns,
        "exposed_comm_ns": exposed,
        "collectives": len(colls),
    }


def _per_step(rs: pd.DataFrame, same_clock: bool) -> pd.DataFrame:
    if rs.empty:
        return pd.DataFrame(
            columns=["step", "kind", "slowest_rank", "step_ns", "skew_ns", "comm_ns", "exposed_comm_ns", "wait_ns"]
        )
    g = rs.groupby("step", sort=True)
    slowest = rs.loc[g["work_ns"].idxmax(), ["step", "rank"]].set_index("step")["rank"]
    skew = (g["end_ns"].max() - g["end_ns"].min()) if same_clock else (g["dur_ns"].max() - g["dur_ns"].min())
    return pd.DataFrame(
        {
            "step": g.size().index,
            "kind": g["kind"].first().to_numpy(),
            "slowest_rank": slowest.to_numpy(),
            "step_ns": g["dur_ns"].max().to_numpy(),  # the run moves at its slowest rank
            "skew_ns": skew.to_numpy(),
            "comm_ns": g["comm_ns"].mean().to_numpy(),  # mean over ranks
            "exposed_comm_ns": g["exposed_comm_ns"].mean().to_numpy(),
            "wait_ns": g["wait_ns"].mean().to_numpy(),
        }
    )


def _not_judged(analyses: tuple[Analysis, ...] | list[Analysis], ranks: tuple[int, ...]) -> Finding:
    """Why no straggler, communication or imbalance verdict can be given: no step lines up across the ranks."""
    counts = ", ".join(f"rank {r}: {len(a.steps)}" for r, a in zip(ranks, analyses, strict=False))
    return Finding(
        "ranks-not-judged",
        "info",
        "Could not judge stragglers, communication or imbalance: no step aligns across the ranks",
        f"Steps found per rank ({counts}): without steps present on every rank there is nothing to compare step by "
        "step, so no absence of a straggler is claimed. The communication shares are over each rank's whole trace.",
        {"ranks": float(len(ranks))},
    )


def _findings(rs: pd.DataFrame, steps: pd.DataFrame, ranks: tuple[int, ...]) -> list[Finding]:
    out: list[Finding] = []
    if steps.empty or len(ranks) < 2:
        return out
    share = steps["slowest_rank"].value_counts(normalize=True)
    top, top_share = int(share.index[0]), float(share.iloc[0])
    work = rs.pivot(index="step", columns="rank", values="work_ns")
    others = work.drop(columns=top).median(axis=1)
    excess_pct = float(np.nanmedian(100.0 * (work[top] - others) / work[top].where(work[top] > 0)))
    waited_by_others = float(rs.loc[rs["rank"] != top, "wait_ns"].median() / 1e3)
    own_wait = float(rs.loc[rs["rank"] == top, "wait_ns"].median() / 1e3)
    if top_share >= STRAGGLER_SHARE and excess_pct >= STRAGGLER_MIN_EXCESS_PCT:
        out.append(
            Finding(
                id="straggler-rank",
                severity="warn" if top_share >= 0.8 else "info",
                title=f"Rank {top} is the straggler",
                detail=(
                    f"Rank {top} does the most non-waiting work in {top_share:.0%} of {len(steps)} aligned steps, "
                    f"{excess_pct:.1f}% more than the other ranks' median; the others wait a median "
                    f"{format_value(waited_by_others, 'us')} per step at collectives, rank {top} "
                    f"{format_value(own_wait, 'us')}."
                ),
                evidence={
                    "rank": top,
                    "slowest_share": top_share,
                    "excess_pct": excess_pct,
                    "others_wait_us": waited_by_others,
                    "own_wait_us": own_wait,
                },
            )
        )
    bound = steps["exposed_comm_ns"] >= COMM_BOUND_PCT / 100.0 * steps["step_ns"]
    if bound.any():
        out.append(
            Finding(
                id="communication-bound-steps",
                severity="warn" if bound.mean() >= 0.5 else "info",
                title=f"{int(bound.sum())} of {len(steps)} steps are communication-bound",
                detail=(
                    f"In {int(bound.sum())} steps at least {COMM_BOUND_PCT:.0f}% of the step is communication that no "
                    f"compute overlaps (median exposed communication "
                    f"{format_value(float(steps.loc[bound, 'exposed_comm_ns'].median()) / 1e3, 'us')})."
                ),
                evidence={"steps": int(bound.sum()), "share": float(bound.mean())},
            )
        )
    spread = (work.max(axis=1) - work.min(axis=1)) / steps.set_index("step")["step_ns"].where(lambda s: s > 0)
    imbalance_pct = float(np.nanmedian(100.0 * spread)) if spread.notna().any() else 0.0
    if imbalance_pct >= IMBALANCE_PCT:
        out.append(
            Finding(
                id="rank-imbalance",
                severity="warn" if imbalance_pct >= 25 else "info",
                title=f"Ranks are imbalanced by {imbalance_pct:.0f}% of a step",
                detail=(
                    f"The median step has a {imbalance_pct:.1f}% gap between the rank with the most and the least "
                    "non-waiting time: the faster ranks idle at collectives for the slower."
                ),
                evidence={"imbalance_pct": imbalance_pct},
            )
        )
    return out
