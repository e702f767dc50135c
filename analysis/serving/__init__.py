"""Served runs: many requests batched continuously, followed from step to step and turned into requests.

The way through, in order:

    find_steps (the forwards) -> observe (what each step's trace says: counts, observations.py)   [in step finding]
    -> follow (the API server's front end added; the ledger's agreed counts and kinds; requests numbered first come,
       first served: ledger.py, identities.py)                                                        [before measuring]
    -> request_table (one row per request: queueing, TTFT, ITL, end to end; request_list.py)          [after measuring]

Evidence, most trusted first: the engine's step annotations; the API server's trace beside the worker's; the packed
batch's per-sequence metadata (record_shapes); the worker's python frames; then structure: how long the host waited
before the first step (an engine idle when the profile began), the host work that prepared each step (the batch
changed or not), the size of each step's matrix products (a prompt chunk or not); then nothing is guessed: a step the
evidence cannot decide is "unknown", a count it cannot decide is null, each with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ..model import Segmentation
from .front_end import FrontEnd
from .identities import Followed, follow
from .ledger import UNKNOWN, Batches, resolve
from .phases import follow_phases, phase_counts

COMPOSITION = ("tokens", "prefill_tokens", "decode_sequences")  # a step's split, as an annotation states it
REQUEST_PAUSE = 4.0  # a pause this many times the typical one between steps ends a run of steps that tile


@dataclass(frozen=True)
class Served:
    """A served run as the ledger followed it: per step the agreed counts, the requests followed, and the count of
    requests (None with its reason when the trace cannot tell)."""

    counts: pd.DataFrame  # P, D, J, F, C, kind per step (analysis.serving.ledger)
    followed: Followed
    front_end: FrontEnd | None
    requests: int | None
    reason: str
    evidence: tuple[str, ...]


def follow_served(
    bounds: pd.DataFrame, segmentation: Segmentation, front_end: FrontEnd | None
) -> tuple[pd.DataFrame, Segmentation, Served | None]:
    """Steps of a served run (bounds.attrs["serving"], set by step finding) with kinds, requests and tiling from the
    ledger; other traces pass through unchanged (None)."""
    obs = bounds.attrs.get("serving")
    if obs is None or not len(bounds):
        return bounds, segmentation, None
    obs = obs.copy()
    start, host_end = bounds["start_ns"].to_numpy(), bounds["host_end_ns"].to_numpy()
    batches = _batches(front_end)
    known_tokens = obs["N"].to_numpy()[obs["N"].to_numpy() != UNKNOWN]
    budget = int(known_tokens.max()) if len(known_tokens) else None
    opaque = (obs[["S", "P", "J"]].to_numpy() == UNKNOWN).all(axis=1) if batches is None else np.zeros(len(obs), bool)
    first_empty = bounds["kind"].iloc[0] == "empty"
    empty = bounds["kind"].to_numpy(dtype=object) == "empty"
    dropped = _unchecked_changes(obs, empty)
    if opaque.any():
        resolved = None
        counts = _phase_counts(obs, _local_counts(obs, first_empty), empty)
        reason = f"{int(opaque.sum())} step(s) whose batch the trace does not state (no annotation, shapes or frames)"
    else:
        resolved = resolve(obs, budget, batches, start)
        if not resolved.followed and batches is not None:  # the front end's batches did not fit: without them
            resolved = resolve(obs, budget) if not _opaque(obs) else resolved
        counts = resolved.counts if resolved.followed else _local_counts(obs, first_empty)
        reason = "" if resolved.followed else resolved.reason
    if resolved is not None and resolved.followed:
        followed = follow(counts)
    else:
        followed = Followed(step_request=np.full(len(bounds), UNKNOWN, np.int64), complete=False)
    kinds = _kinds(bounds, counts)
    recomputing = _recomputing(bounds)
    requests, why = _request_count(followed, counts, obs, front_end, reason, recomputing)
    bounds = _with_followed(bounds, kinds, counts, followed, obs, start, host_end, recomputing)
    evidence = _evidence(obs, front_end, followed)
    warnings = [*_warnings(kinds, why), *dropped]
    seg = replace(
        segmentation,
        warnings=(*segmentation.warnings, *warnings),
        evidence=(*segmentation.evidence, *evidence),
        confidence=min(segmentation.confidence, 0.95 if not (kinds == "unknown").any() else 0.6),
    )
    return bounds, seg, Served(counts, followed, front_end, requests, why, tuple(evidence))


def _batches(front_end: FrontEnd | None) -> Batches | None:
    if front_end is None or not len(front_end.batches):
        return None
    b = front_end.batches
    return Batches(b["ts_ns"].to_numpy(), b["outputs"].to_numpy(), b["finished"].to_numpy())


def _opaque(obs: pd.DataFrame) -> bool:
    return bool((obs[["S", "P", "J"]].to_numpy() == UNKNOWN).all(axis=1).any())


def _unchecked_changes(obs: pd.DataFrame, empty: np.ndarray) -> list[str]:
    """Host-work changes read where no step states its sequences (observations.batch_changes could not check them
    against the sequence count): kept only when some reading of the run's phases allows them all (a misread signal
    would soon contradict every reading), else dropped from `obs`, with the warning returned."""
    if not obs.attrs.get("changes_unchecked", False):
        return []
    phases = follow_phases(obs, empty)
    if phases.followed:
        return []
    obs["changed"] = UNKNOWN
    obs.attrs["changes_unchecked"] = False
    return [
        "the host work that prepared each step fell in two groups, but no reading of the run's phases allows them "
        f"as requests joining or leaving ({phases.reason}): not used"
    ]


def _phase_counts(obs: pd.DataFrame, local: pd.DataFrame, empty: np.ndarray) -> pd.DataFrame:
    """The local counts, with the kinds every reading of the run's phases agrees on where they leave a step unknown
    (analysis.serving.phases; the local kinds bind every reading). No reading at all: the local counts alone."""
    local_kinds = local["kind"].to_numpy(dtype=object)
    phases = follow_phases(obs, empty | (local_kinds == "empty"), local_kinds)
    fill = (local_kinds == "unknown") & (phases.kinds != "unknown")
    if not phases.followed or not fill.any():
        return local
    out = local.copy()
    by_phase = phase_counts(phases.kinds)
    for column in ("P", "D", "J", "F", "C", "kind"):
        out.loc[fill, column] = by_phase.loc[fill, column]
    return out


def _local_counts(obs: pd.DataFrame, first_empty: bool) -> pd.DataFrame:
    """What each step says alone, without following the batch: P and D where annotated; a forward of N positions
    over N sequences decodes, unless it holds more sequences than the step before (a request joined, and a prompt
    may be one position long: vLLM serves one-token prompts, tests/data/captures/vllm/interference_tiny_prompts);
    one sequence of several positions prefills (at least two positions per prompt chunk); nothing scheduled is
    empty; the first step of an engine idle when the profile began prefills (its sequences all join in it;
    `first_empty`: step finding found the first step empty)."""
    s, n, p, d = (obs[c].to_numpy() for c in ("S", "N", "P", "D"))
    joined = np.append(False, (s[1:] > s[:-1]) & (s[:-1] != UNKNOWN))
    kind = np.full(len(obs), "unknown", dtype=object)
    annotated = (p != UNKNOWN) & (d != UNKNOWN)
    kind[annotated & (p > 0) & (d > 0)] = "mixed"
    kind[annotated & (p > 0) & (d == 0)] = "prefill"
    kind[annotated & (p == 0) & (d > 0)] = "decode"
    kind[annotated & (p == 0) & (d == 0)] = "empty"
    shaped = ~annotated & (s != UNKNOWN) & (n != UNKNOWN)
    kind[shaped & (s > 0) & (n == s) & ~joined] = "decode"
    kind[shaped & (s == 1) & (n > 1)] = "prefill"
    kind[shaped & (s == 0)] = "empty"
    if kind[0] == "unknown" and obs.attrs.get("idle_before", False) and not first_empty:  # nothing ran before it
        kind[0] = "prefill"
    decodes = np.where(kind == "decode", np.where(d != UNKNOWN, d, s), np.where(kind == "prefill", 0, d))
    prefills = np.where(kind == "prefill", np.where(p != UNKNOWN, p, s), np.where(kind == "decode", 0, p))
    frame = pd.DataFrame({"P": prefills, "D": decodes})
    for column in ("J", "F", "C"):
        frame[column] = UNKNOWN
    frame.loc[kind == "empty", ["P", "D"]] = 0
    frame["kind"] = kind
    return frame


def _kinds(bounds: pd.DataFrame, counts: pd.DataFrame) -> np.ndarray:
    """The ledger's kinds; a verify or draft an annotation wrote where the ledger leaves the step unknown, when the run
    is speculative (most steps that decode score several positions per sequence: a few such steps in a plain run are
    preempted requests recomputing their cache, which vLLM's annotation writes the same way)."""
    kind = counts["kind"].to_numpy(dtype=object).copy()
    written = bounds["kind"].to_numpy(dtype=object)
    labelled = bounds["label"].astype(str).str.len().to_numpy() > 0
    speculative = np.isin(written, ("verify", "draft"))
    decoding = speculative | np.isin(written, ("decode", "mixed"))
    if decoding.any() and speculative.sum() >= 0.5 * decoding.sum():  # the ledger counts a verify as a decode
        keep = labelled & speculative & np.isin(kind, ("unknown", "decode"))
        kind[keep] = written[keep]
    return kind


def _recomputing(bounds: pd.DataFrame) -> np.ndarray:
    """Per step, whether its annotation writes a preempted request recomputing its cache: vLLM counts a request with
    output as generation, so a step whose generation sequences score more positions than there are of them, in a run
    that is not speculative (analysis.serving.observations.annotated_counts; tests/data/captures/vllm/preempt_small).
    The annotation's split of such a step is not prompt positions against decoding sequences."""
    floats = [bounds[c].astype("Float64").to_numpy(dtype=float, na_value=np.nan) for c in COMPOSITION]
    tokens, prefill, decoding = floats
    several = (tokens - prefill > decoding) & (bounds["label"].astype(str).str.len().to_numpy() > 0)
    written = bounds["kind"].to_numpy(dtype=object)
    decoding_steps = (decoding > 0) | np.isin(written, ("verify", "draft"))
    if several.sum() >= 0.5 * max(decoding_steps.sum(), 1):  # a speculative run: its verifies score several
        return np.zeros(len(bounds), dtype=bool)
    return several


def _request_count(
    followed: Followed,
    counts: pd.DataFrame,
    obs: pd.DataFrame,
    front_end: FrontEnd | None,
    reason: str,
    recomputing: np.ndarray,
) -> tuple[int | None, str]:
    """(requests, why not known): the front end's count of requests handed to the engine (plus any already running
    when the trace began), else the first step's sequences and every later step's joins, when all are known and no
    preempted request rejoined (its recomputation reads as a join: the counts do not tell it from a new request)."""
    before = sum(followed.before_trace)
    if front_end is not None:
        return int(front_end.requests + before), ""
    if recomputing.any():
        at = int(np.flatnonzero(recomputing)[0])
        return None, (
            f"requests unknown: a preempted request recomputes its cache at step {at} (the engine's annotation says "
            "so), and the steps' counts do not tell it from a new request joining; the API server's trace would"
        )
    first = obs["S"].iloc[0] if obs["S"].iloc[0] != UNKNOWN else counts["P"].iloc[0] + counts["D"].iloc[0]
    joins = counts["J"].to_numpy()[1:]
    known_first = obs["S"].iloc[0] != UNKNOWN or UNKNOWN not in (counts["P"].iloc[0], counts["D"].iloc[0])
    if not reason and known_first and (joins != UNKNOWN).all():
        return int(first + joins.sum()), ""
    if reason:
        return None, f"requests unknown: {reason}"
    at = int(np.flatnonzero(joins == UNKNOWN)[0]) + 1 if (joins == UNKNOWN).any() else 0
    return None, (
        f"requests unknown: the steps' counts do not tell a request joining from a prompt chunk continuing "
        f"(or a finish plus a join from no change) at step {at}; the API server's trace, or the worker's python "
        "frames (with_stack), would"
    )


def _with_followed(
    bounds: pd.DataFrame,
    kinds: np.ndarray,
    counts: pd.DataFrame,
    followed: Followed,
    obs: pd.DataFrame,
    start: np.ndarray,
    host_end: np.ndarray,
    recomputing: np.ndarray,
) -> pd.DataFrame:
    out = bounds.copy()
    n = len(out)
    out["kind"] = kinds
    request = followed.step_request if len(followed.step_request) == n else np.full(n, UNKNOWN, np.int64)
    out["request"] = request.astype(np.int64)
    out["opens"] = np.maximum(counts["J"].to_numpy(), 0).astype(np.int64)
    s, tokens = obs["S"].to_numpy(), obs["N"].to_numpy()
    p, d = counts["P"].to_numpy(), counts["D"].to_numpy()
    sequences = np.where(s != UNKNOWN, s, np.where((p != UNKNOWN) & (d != UNKNOWN), p + d, UNKNOWN))
    prefill = np.where((d != UNKNOWN) & (tokens != UNKNOWN), tokens - np.maximum(d, 0), UNKNOWN)
    unknown = kinds == "unknown"
    # what step finding read stays (an annotation states it); the ledger's counts fill what it left unknown; a step
    # of unknown kind states no split between prompt positions and decoding sequences
    out["batch"] = _filled(out["batch"], sequences, False)
    out["tokens"] = _filled(out["tokens"], tokens, False)
    # a recomputing step's annotation counts its prompt positions as generation: the ledger's split instead
    out["prefill_tokens"] = _filled(out["prefill_tokens"].mask(recomputing), prefill, unknown)
    out["decode_sequences"] = _filled(out["decode_sequences"].mask(recomputing), d, unknown)
    chain = _chains(kinds, counts, start, host_end)
    out["chain"] = chain
    out["index"] = out.groupby("chain").cumcount().to_numpy().astype(np.int64)
    out.attrs = {k: v for k, v in bounds.attrs.items() if k != "serving"}
    return out


def _filled(column: pd.Series, values: np.ndarray, blank: np.ndarray | bool) -> pd.Series:
    """The column where it has a value, else `values` (UNKNOWN: <NA>); <NA> where `blank`."""
    current = column.astype("Float64").to_numpy(dtype=float, na_value=np.nan)
    merged = np.where(np.isnan(current), np.where(values == UNKNOWN, np.nan, values), current)
    merged = np.where(blank, np.nan, merged)
    return pd.Series(pd.array(merged, dtype="Float64").round().astype("Int64"), index=column.index)


def _chains(kinds: np.ndarray, counts: pd.DataFrame, start: np.ndarray, host_end: np.ndarray) -> np.ndarray:
    """Runs of steps that tile the time line (each ends where the next starts): broken where the batch is known to
    empty (nothing decoding or prefilling after a step), at an empty step, and, where the counts do not say whether
    the batch emptied, at a pause much longer than usual before a step that does not decode."""
    n = len(kinds)
    if n < 2:
        return np.zeros(n, dtype=np.int64)
    pause = start[1:] - host_end[:-1]
    typical = max(float(np.median(pause)), 1.0)
    d, c, p = counts["D"].to_numpy(), counts["C"].to_numpy(), counts["P"].to_numpy()
    known = (d != UNKNOWN) & (c != UNKNOWN) & (p != UNKNOWN)
    emptied = known & (d + c == 0) & (p - c == 0)
    # a pause ends a run only where the counts do not say, and not before a step that decodes: its decoders ran in
    # the step before (vLLM schedules every running request each step), so the batch did not empty in the pause (a
    # request joining takes the scheduler a long pause: a real capture, tests/data/captures/vllm/interference_chunks)
    paused = ~known[:-1] & (d[1:] <= 0) & (pause > REQUEST_PAUSE * typical)
    breaks = paused | emptied[:-1] | (kinds[1:] == "empty") | (kinds[:-1] == "empty")
    return np.concatenate([[0], np.cumsum(breaks)]).astype(np.int64)


def _evidence(obs: pd.DataFrame, front_end: FrontEnd | None, followed: Followed) -> list[str]:
    lines = []
    stated = {
        "S": "sequences per step from the attention's per-sequence metadata or the annotation",
        "P": "prefilling and decoding sequences per step from the engine's annotations",
        "J": "requests joining and finishing from the worker's python frames (vLLM's per-request state)",
        "changed": "requests joining or leaving from the host work that prepared each step (two groups of host-op "
        + (
            "counts, which some reading of the run's phases allows: no step states its sequences)"
            if obs.attrs.get("changes_unchecked", False)
            else "counts, every change of the sequence count in the upper one)"
        ),
    }
    for column, line in stated.items():
        known = int((obs[column].to_numpy() != UNKNOWN).sum())
        if known:
            lines.append(f"{line} ({known} of {len(obs)} steps)")
    if obs.attrs.get("idle_before", False):
        lines.append(
            "the engine idle when the profile began (no request running before its first step): the host waited "
            "before its first step longer than twice its usual step spacing or its longest wait during the run"
        )
    if front_end is not None:
        lines.append(front_end.evidence + "; each step's outputs and finishes from the batch it owns")
    lines.append(
        "sequences followed from step to step (analysis.serving.ledger): a step's kind or count is given only where "
        "every reading of the counts agrees; requests numbered first come, first served"
        + (f", followed up to step {followed.stopped_at}" if followed.stopped_at >= 0 else "")
    )
    return lines


def _warnings(kinds: np.ndarray, why: str) -> list[str]:
    out = []
    unknown = int((kinds == "unknown").sum())
    if unknown:
        out.append(
            f"{unknown} step(s) of unknown kind: the trace does not decide whether they prefill, decode or both "
            "(record_shapes, the engine's annotations or the API server's trace would)"
        )
    if why:
        out.append(why)
    return out
