"""Each collective across the ranks of a run: who arrived when, who waited for whom, and whether the clocks agree.

Why: a collective ends on every rank at about the same moment (it completes when the last rank's data is in), so
its ends tell whether the ranks' clocks agree, and once they do its starts tell who was late. For every collective
matched across the ranks this module gives each rank's arrival (its start), the wait that rank spent for the last
one (the last arrival minus its own, at most its own time in the collective), which rank caused it, the arrival
skew (last minus first arrival) and the transfer time (the last arriver's own time in it: what no arrival order
can save). Per collective kind (all-reduce, all-gather, send/recv ...) and per rank the same, summed.

Matching: the k-th collective of a kind on every rank, when every rank has as many of that kind and their ends
agree after one steady shift per rank (the clock check: that shift is the offset between two clocks); else each of
the first rank's collectives with the one of its kind on every other rank that ends within a tolerance of it
(point-to-point transfers between two of these ranks, in a world with more ranks than the files here). What
matches nothing is counted, not guessed. Where nothing matches, the clock stays unchecked and says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

END_TOLERANCE_US = 20.0  # ends this close (or END_TOLERANCE_SHARE of the shorter collective) are one collective's
END_TOLERANCE_SHARE = 0.02
_KINDS = (  # (kind, pattern on the lowercase name without separators)
    ("all-reduce", re.compile(r"allreduce|multimemallreduce|crossdevicereduce|customallreduce")),
    ("all-gather", re.compile(r"allgather")),
    ("reduce-scatter", re.compile(r"reducescatter")),
    ("all-to-all", re.compile(r"alltoall")),
    ("broadcast", re.compile(r"broadcast")),
    ("send/recv", re.compile(r"sendrecv|send|recv")),
    ("reduce", re.compile(r"reduce")),
    ("barrier", re.compile(r"barrier")),
)
MATCH_COLUMNS = ("collective", "kind", "rank", "start_ns", "end_ns", "arrival_ns", "wait_ns", "last")


@dataclass(frozen=True)
class Collectives:
    """The collectives matched across ranks (`rows`: MATCH_COLUMNS, one per collective and rank; arrival_ns on the
    first rank's clock), one row per collective (`per_collective`), and the clock check."""

    rows: pd.DataFrame
    per_collective: pd.DataFrame  # collective, kind, first_arrival_ns, last_arrival_ns, last_rank, skew_ns,
    # transfer_ns, wait_ns (the waits it caused, summed over the other ranks), start_ns, end_ns (first rank's clock)
    offsets_ns: dict[int, float] = field(default_factory=dict)  # rank -> its clock minus the first rank's
    matched_by: str | None = None  # "order" | "ends" | None
    clock_checked: bool = False
    clock_note: str = ""
    unmatched: int = 0  # collectives on some rank that matched none on every other


def collective_kind(name: str) -> str:
    text = re.sub(r"[^a-z0-9]", "", str(name).lower())
    return next((kind for kind, pattern in _KINDS if pattern.search(text)), "other")


def match_collectives(ranks: tuple[int, ...], colls: list[pd.DataFrame], same_clock: bool) -> Collectives:
    """`colls`: each rank's collectives (analysis.ranks.collective_ops: start_ns, end_ns, name), in `ranks`' order."""
    if len(colls) < 2 or any(c.empty for c in colls):
        note = "not checked: a rank here has no collective to compare the clocks with"
        return _empty(note + (" (one host and overlapping times: one clock assumed)" if same_clock else ""))
    framed = [c.assign(kind=[collective_kind(n) for n in c["name"]]) for c in colls]
    total = sum(len(c) for c in framed)
    groups, offsets, ends_matched = _groups(framed)
    if not groups:
        assumed = "one host and overlapping times: one clock assumed" if same_clock else "clocks not compared"
        return _empty(f"not checked: no collective ends together on every rank here ({assumed})", total)
    checked = ends_matched > 0 or bool(offsets)
    rows = _rows(ranks, framed, groups, offsets)
    spread = _end_spread_us(rows)
    note = (
        _clock_note(len(groups), ends_matched, offsets, spread, ranks)
        if checked
        else _unchecked_note(spread, same_clock)
    )
    matched_by = "ends" if ends_matched == len(groups) else "order" if not ends_matched else "order and ends"
    by_rank = {ranks[r]: float(v) for r, v in offsets.items()}
    return Collectives(rows, _per_collective(rows), by_rank, matched_by, checked, note, total - len(rows))


def _groups(framed: list[pd.DataFrame]) -> tuple[list[list[int]], dict[int, float], int]:
    """(groups of row positions, one per rank; the clock offsets; how many groups were matched by their ends).
    Send/recv pairs by their ends (each rank's peers differ: the k-th on one rank is not the k-th on another); the
    other kinds by order, or by their ends too when the ranks issued different numbers of them."""
    p2p = [c[c["kind"] == "send/recv"] for c in framed]
    rest = [c[c["kind"] != "send/recv"] for c in framed]
    by_order, offsets = _by_order(rest) if all(len(c) for c in rest) else ([], {})
    if by_order is None:  # different collectives on different ranks: pair them by their ends
        by_order, offsets, p2p = [], {}, framed
    by_ends = _by_ends(p2p) if all(len(c) for c in p2p) else []
    to_rows = [
        *([[int(rest[r].index[g[r]]) for r in range(len(framed))] for g in by_order]),
        *([[int(p2p[r].index[g[r]]) for r in range(len(framed))] for g in by_ends]),
    ]
    return to_rows, offsets, len(by_ends)


def _unchecked_note(spread: dict, same_clock: bool) -> str:
    from .number_format import format_value

    assumed = "one clock assumed (one host, overlapping times)" if same_clock else "compared as they are"
    return (
        f"not checked: the same collectives' ends differ by {format_value(spread['p50'], 'us')} (median) across the "
        f"ranks (a CPU backend's host ops return before the transfer ends), so they cannot check the clocks; {assumed}"
    )


def _empty(note: str, unmatched: int = 0) -> Collectives:
    return Collectives(pd.DataFrame(columns=list(MATCH_COLUMNS)), pd.DataFrame(), {}, None, False, note, unmatched)


def _tolerance_ns(dur_a: np.ndarray, dur_b: np.ndarray) -> np.ndarray:
    return np.maximum(END_TOLERANCE_US * 1e3, END_TOLERANCE_SHARE * np.minimum(dur_a, dur_b))


def _by_order(colls: list[pd.DataFrame]) -> tuple[list[list[int]] | None, dict[int, float]]:
    """The k-th of each kind on every rank, when every rank has as many of each kind (None otherwise); the clock
    offsets when their ends agree after one shift per rank ({} when they do not: the clocks stay unchecked)."""
    kinds = [c.groupby("kind").size().to_dict() for c in colls]
    if any(k != kinds[0] for k in kinds[1:]):
        return None, {}
    keyed = [
        pd.Series(np.arange(len(c)), index=pd.MultiIndex.from_arrays([c["kind"], c.groupby("kind").cumcount()]))
        for c in colls
    ]
    order = keyed[0].index
    rows = [k.reindex(order).to_numpy() for k in keyed]
    groups = [[int(rows[r][i]) for r in range(len(colls))] for i in range(len(order))]
    first = colls[0]
    first_end = first["end_ns"].to_numpy()[rows[0]]
    first_dur = first_end - first["start_ns"].to_numpy()[rows[0]]
    offsets = {0: 0.0}
    for r in range(1, len(colls)):
        end = colls[r]["end_ns"].to_numpy()[rows[r]]
        offset = float(np.median(end - first_end))
        tol = _tolerance_ns(end - colls[r]["start_ns"].to_numpy()[rows[r]], first_dur)
        if np.mean(np.abs(end - first_end - offset) <= tol) < 0.9:  # the ends do not move together
            return groups, {}
        offsets[r] = offset
    return groups, offsets


def _by_ends(colls: list[pd.DataFrame]) -> list[list[int]]:
    """Each of the first rank's collectives with the one of its kind on every other rank ending nearest to it, when
    within the tolerance."""
    first = colls[0]
    groups = []
    for i, (kind, end, start) in enumerate(zip(first["kind"], first["end_ns"], first["start_ns"], strict=True)):
        group = [i]
        for other in colls[1:]:
            same = np.flatnonzero(other["kind"].to_numpy() == kind)
            if not len(same):
                break
            ends = other["end_ns"].to_numpy()[same]
            j = int(same[np.argmin(np.abs(ends - end))])
            dur = float(other["end_ns"].iloc[j] - other["start_ns"].iloc[j])
            if abs(float(other["end_ns"].iloc[j]) - end) > _tolerance_ns(np.array([dur]), np.array([end - start]))[0]:
                break
            group.append(j)
        if len(group) == len(colls):
            groups.append(group)
    return groups


def _rows(ranks, colls: list[pd.DataFrame], groups: list[list[int]], offsets: dict[int, float]) -> pd.DataFrame:
    parts = []
    for r, c in enumerate(colls):
        idx = np.array([g[r] for g in groups], dtype=np.int64)
        start = c["start_ns"].to_numpy()[idx]
        parts.append(
            pd.DataFrame(
                {
                    "collective": np.arange(len(groups)),
                    "kind": c["kind"].to_numpy()[idx],
                    "rank": ranks[r],
                    "start_ns": start,
                    "end_ns": c["end_ns"].to_numpy()[idx],
                    "arrival_ns": start - offsets.get(r, 0.0),
                }
            )
        )
    rows = pd.concat(parts, ignore_index=True)
    g = rows.groupby("collective")["arrival_ns"]
    last = g.transform("max")
    rows["wait_ns"] = np.minimum(last - rows["arrival_ns"], rows["end_ns"] - rows["start_ns"]).clip(lower=0)
    rows["last"] = rows["arrival_ns"] == last
    return rows[list(MATCH_COLUMNS)].sort_values(["collective", "rank"], kind="stable").reset_index(drop=True)


def _per_collective(rows: pd.DataFrame) -> pd.DataFrame:
    g = rows.groupby("collective", sort=True)
    last_rows = rows[rows["last"]].drop_duplicates("collective").set_index("collective")
    first_rank = rows.drop_duplicates("collective").set_index("collective")
    return pd.DataFrame(
        {
            "collective": g.size().index,
            "kind": g["kind"].first().to_numpy(),
            "first_arrival_ns": g["arrival_ns"].min().to_numpy(),
            "last_arrival_ns": g["arrival_ns"].max().to_numpy(),
            "last_rank": last_rows["rank"].to_numpy(),
            "skew_ns": (g["arrival_ns"].max() - g["arrival_ns"].min()).to_numpy(),
            "transfer_ns": (last_rows["end_ns"] - last_rows["start_ns"]).to_numpy(),
            "wait_ns": g["wait_ns"].sum().to_numpy(),
            "start_ns": first_rank["start_ns"].to_numpy(),
            "end_ns": first_rank["end_ns"].to_numpy(),
        }
    )


def _end_spread_us(rows: pd.DataFrame) -> dict:
    """How far apart one collective's ends are across ranks, after the clock offsets (p50, p90, us)."""
    shifted = rows["end_ns"] - (rows["start_ns"] - rows["arrival_ns"])
    spread = shifted.groupby(rows["collective"]).agg(lambda s: s.max() - s.min()) / 1e3
    return {"p50": float(np.percentile(spread, 50)), "p90": float(np.percentile(spread, 90))}


def _clock_note(n: int, ends_matched: int, offsets: dict[int, float], spread: dict, ranks) -> str:
    from .number_format import format_value

    within = format_value(spread["p90"], "us")
    moved = {ranks[r]: o for r, o in offsets.items() if abs(o) > 1e3 * max(spread["p90"], END_TOLERANCE_US)}
    if moved:
        shifts = ", ".join(f"rank {r} by {format_value(o / 1e3, 'us')}" for r, o in moved.items())
        return (
            f"checked: the ends of {n} collectives agree within {within} (p90) once the clocks are shifted "
            f"({shifts}): arrivals compared on the first rank's clock"
        )
    how = "the same collectives in the same order"
    if ends_matched:
        how = "paired by their ends" if ends_matched == n else f"{ends_matched} of them paired by their ends"
    return f"checked: the ends of {n} collectives ({how}) agree within {within} (p90): one clock"


def summary(result: Collectives) -> dict:
    """The ranks JSON's `run.collectives` (DESIGN.md): the clock check, and arrival skew, transfer and waits per
    collective kind and per rank (us)."""
    rows, per = result.rows, result.per_collective
    out = {
        "matched": len(per),
        "unmatched": int(result.unmatched),
        "matched_by": result.matched_by,
        "clock_checked": result.clock_checked,
        "clock_note": result.clock_note,
        "clock_offset_us": {str(r): o / 1e3 for r, o in result.offsets_ns.items()},
        "by_kind": [],
        "by_rank": [],
    }
    if per.empty:
        return out
    for kind, part in per.groupby("kind", sort=True):
        waits = rows[rows["kind"] == kind].groupby("rank")["wait_ns"].sum() / 1e3
        out["by_kind"].append(
            {
                "kind": kind,
                "count": len(part),
                "arrival_skew_us": _pcts(part["skew_ns"] / 1e3),
                "transfer_us": _pcts(part["transfer_ns"] / 1e3),
                "wait_us_by_rank": {str(r): float(w) for r, w in waits.items()},
            }
        )
    caused = per.groupby("last_rank")["wait_ns"].sum() / 1e3
    for rank, part in rows.groupby("rank", sort=True):
        out["by_rank"].append(
            {
                "rank": int(rank),
                "wait_us": float(part["wait_ns"].sum() / 1e3),
                "caused_wait_us": float(caused.get(rank, 0.0)),
                "last_arrivals": int((per["last_rank"] == rank).sum()),
            }
        )
    return out


def _pcts(values: pd.Series) -> dict:
    return {"p50": float(np.percentile(values, 50)), "p90": float(np.percentile(values, 90))}


def iterations(result: Collectives) -> pd.DataFrame:
    """Collective-to-collective iterations on the first rank's clock: from one matched collective's first arrival
    to the next one's end (start_ns, end_ns, skew_ns of the first), in time order."""
    per = result.per_collective
    if len(per) < 2:
        return pd.DataFrame(columns=["start_ns", "end_ns", "skew_ns"])
    per = per.sort_values("first_arrival_ns")
    ends = per["end_ns"].to_numpy()
    return pd.DataFrame(
        {
            "start_ns": per["first_arrival_ns"].to_numpy()[:-1],
            "end_ns": np.maximum(ends[1:], ends[:-1]),
            "skew_ns": per["skew_ns"].to_numpy()[:-1],
        }
    )


def iteration_windows(rank_steps: pd.DataFrame, result: Collectives | None) -> pd.DataFrame:
    """The windows the Ranks page steps through, on the first rank's clock: each aligned step (its earliest start to
    its latest end over the ranks), else each collective-to-collective iteration. Columns start_ns, end_ns, label,
    skew_ns (the step's end skew, or the first collective's arrival skew)."""
    offsets = result.offsets_ns if result is not None else {}
    if len(rank_steps):
        shift = rank_steps["rank"].map(lambda r: offsets.get(int(r), 0.0)).astype(float)
        frame = rank_steps.assign(lo=rank_steps["start_ns"] - shift, hi=rank_steps["end_ns"] - shift)
        g = frame.groupby("step", sort=True)
        return pd.DataFrame(
            {
                "start_ns": g["lo"].min().to_numpy(),
                "end_ns": g["hi"].max().to_numpy(),
                "label": [f"step {s} ({k})" for s, k in zip(g.size().index, g["kind"].first(), strict=True)],
                "skew_ns": (g["hi"].max() - g["hi"].min()).to_numpy(),
            }
        )
    found = iterations(result) if result is not None else pd.DataFrame()
    if found.empty:
        return pd.DataFrame(columns=["start_ns", "end_ns", "label", "skew_ns"])
    margin = 0.02 * (found["end_ns"] - found["start_ns"])  # the first collective's start stays inside
    return found.assign(
        start_ns=found["start_ns"] - margin,
        end_ns=found["end_ns"] + margin,
        label=[f"collective {i} to {i + 1}" for i in range(len(found))],
    )


def collectives_in(result: Collectives, lo: float, hi: float) -> pd.DataFrame:
    """The matched collectives that start in [lo, hi) (first rank's clock), one row each: kind, each rank's arrival
    (ns after lo), the last to arrive, the arrival skew, the wait it caused (summed over the others), the transfer."""
    per = result.per_collective
    if per.empty:
        return pd.DataFrame()
    inside = per[(per["first_arrival_ns"] < hi) & (per["last_arrival_ns"] >= lo)]
    rows = result.rows[result.rows["collective"].isin(inside["collective"])]
    arrivals = rows.pivot(index="collective", columns="rank", values="arrival_ns") - lo
    arrivals.columns = [f"rank {r} arrives (ns)" for r in arrivals.columns]
    table = inside.set_index("collective")[["kind", "last_rank", "skew_ns", "wait_ns", "transfer_ns"]]
    return table.join(arrivals).reset_index()
