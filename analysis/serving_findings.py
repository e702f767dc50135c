"""Findings of a served run (issue 41): what the scheduler's choices cost the requests, each priced in time.

    prefill-decode-interference  a decode token's wait in steps that also carry a prompt chunk, against decode-only
                                 steps: what it cost the decoding requests, and what a chunk half as big would give
    head-of-line-blocking        requests that arrived while a long prompt's chunks took the whole token budget, and
                                 waited for its prefill to end
    queued-with-room             requests that waited while steps ran below the batch and the token budget the run
                                 reached: something other than the batch held them (KV cache space, the front end)
    batch-never-fills            no request ever waited for a place: the load, not the engine, sets the batch, and a
                                 step's time says what a fuller one would give

They read the steps (kind, counts, times) and the request table (arrivals from the API server's trace beside the
worker's); where those do not say (no arrivals, counts unknown) the finding is not given: nothing is guessed. A
trace does not hold the engine's limits (max_num_seqs, the token budget), so "room" is judged against what the run
itself reached: its largest batch and the most positions a step carried. A request may reach the scheduler a step
after its arrival (the API server hands it over while a step runs), so the first step after an arrival is never
counted as a wait.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .model import Finding
from .number_format import format_value
from .serving.ledger import UNKNOWN

COSTLY_RATIO = 1.5  # a decode token waiting this many times longer in mixed steps than in decode-only ones
LONG_PREFILL_STEPS = 3  # a prompt chunked over at least this many steps is a long prefill
MIN_WAIT_STEPS = 2  # a request waiting at least this many steps (after the first) is a finding's evidence
MIN_DECODE_STEPS = 8  # steps that decode, before the batch's size says anything
FULLER = 2  # batch-never-fills prices a batch this many times the median one
MIN_GAIN = 0.2  # ... and is given when that batch would save at least this share of the decode steps' time


@dataclass(frozen=True)
class _Run:
    """The step arrays the findings read (times in ns, counts as floats with NaN where unknown)."""

    kind: np.ndarray
    start: np.ndarray
    end: np.ndarray
    next_start: np.ndarray  # the next step's start (this one's end for the last): a step's place in the run
    sequences: np.ndarray
    tokens: np.ndarray
    decoders: np.ndarray
    prefill: np.ndarray

    @classmethod
    def of(cls, steps: pd.DataFrame) -> _Run:
        def floats(column: str) -> np.ndarray:
            return pd.to_numeric(steps[column], errors="coerce").to_numpy(dtype=float, na_value=np.nan)

        start, end = steps["start_ns"].to_numpy(np.int64), steps["end_ns"].to_numpy(np.int64)
        next_start = np.append(start[1:], end[-1:]) if len(start) else start
        return cls(
            steps["kind"].to_numpy(dtype=object),
            start,
            end,
            np.maximum(next_start, end),
            floats("batch"),
            floats("tokens"),
            floats("decode_sequences"),
            floats("prefill_tokens"),
        )

    @property
    def spacing_ms(self) -> np.ndarray:
        return (self.next_start - self.start) / 1e6

    @property
    def budget(self) -> float:
        """The most positions a step carried: the token budget as far as the run shows it."""
        known = self.tokens[np.isfinite(self.tokens)]
        return float(known.max()) if len(known) else np.nan


def serving_findings(steps: pd.DataFrame, rows: pd.DataFrame, itl: np.ndarray, outliers: np.ndarray) -> list[Finding]:
    """The four findings above that the run shows; `rows`: the request table (analysis.serving.request_list),
    `itl`: each step's wait for its decoding sequences (ns, -1 where none), `outliers`: ITL outliers left out."""
    if len(steps) < 2:
        return []
    run = _Run.of(steps)
    found = [interference(run, np.asarray(itl), np.asarray(outliers, dtype=bool))]
    arrived = rows[(rows["arrival_ns"].to_numpy() >= 0)] if len(rows) else rows
    if len(arrived):
        waits = _waits(run, arrived)
        found += [head_of_line(run, arrived, waits), queued_with_room(run, arrived, waits)]
        found.append(never_fills(run, arrived, waits))
    return [f for f in found if f is not None]


# --- prefill-decode interference ----------------------------------------------------------------------------------


def interference(run: _Run, itl: np.ndarray, outliers: np.ndarray) -> Finding | None:
    """A decode token's wait (its step's ITL) in mixed steps against decode-only steps, medians; priced as the time
    above a decode-only step, in the run and summed over the decoding sequences that waited it."""
    wait = np.where(itl > 0, itl / 1e6, np.nan)
    pure = (run.kind == "decode") & ~outliers & np.isfinite(wait)
    mixed = (run.kind == "mixed") & np.isfinite(wait) & (run.decoders > 0)
    if pure.sum() < 3 or mixed.sum() < 2:
        return None
    base, mixed_ms = float(np.median(wait[pure])), float(np.median(wait[mixed]))
    if base <= 0 or mixed_ms < COSTLY_RATIO * base:
        return None
    extra = np.clip(wait[mixed] - base, 0.0, None)
    request_ms = float((extra * run.decoders[mixed]).sum())
    chunk = _median(run.prefill[mixed])
    per_position = _slope(
        np.concatenate([np.zeros(pure.sum()), run.prefill[mixed]]), np.concatenate([wait[pure], wait[mixed]])
    )
    worst = int(np.flatnonzero(mixed)[int(np.argmax(extra))])
    evidence = {
        "decode_token_ms": base,
        "mixed_token_ms": mixed_ms,
        "ratio": mixed_ms / base,
        "mixed_steps": int(mixed.sum()),
        "decoding_requests_ms": request_ms,
        "step": worst,
    }
    advice = ""
    if chunk is not None and per_position is not None:
        half = base + per_position * chunk / 2
        evidence.update(chunk_positions=chunk, ms_per_prompt_position=per_position, half_chunk_token_ms=half)
        advice = (
            f" Each prompt position adds about {_ms(per_position)} to a step (the steps' own waits against their "
            f"prompt positions), so a chunk half as big ({chunk / 2:.0f} positions: a smaller token budget, vLLM's "
            f"--max-num-batched-tokens) would make such a token wait about {_ms(half)}: the decoding requests' "
            "slowest tokens come sooner, over twice as many mixed steps (the prompt's work stays)."
        )
    decoders = _median(run.decoders[mixed]) or 0
    return _priced(
        Finding(
            "prefill-decode-interference",
            "warn" if mixed_ms >= 2 * base else "info",
            f"Prompt chunks slow decoding: a decode token waits {mixed_ms / base:.1f}x as long in a mixed step",
            f"A decode token waited {_ms(mixed_ms)} in the {int(mixed.sum())} steps that also carried a prompt chunk "
            f"(median {chunk or 0:.0f} prompt positions) against {_ms(base)} in decode-only steps (medians): "
            f"{_ms(float(extra.sum()))} more in the run, {_ms(request_ms)} summed over the decoding requests "
            f"({decoders:.0f} a mixed step, median).{advice} Prefill on workers of its own (disaggregated prefill) "
            "takes it off the decode steps.",
            evidence,
            cost_us=float(extra.sum()) * 1e3,
            at_ns=(int(run.start[max(worst - 1, 0)]), int(run.end[worst])),
        ),
        float(extra.sum()) * 1e3,  # the decoding requests' wait above a decode-only step: what separating them wins
    )


# --- waits: which steps ran while a request waited ---------------------------------------------------------------


@dataclass(frozen=True)
class _Wait:
    request: int
    arrival_ns: int
    first_step: int  # -1: never scheduled in the trace
    steps: np.ndarray  # the steps that started after its arrival and before its first step, the first left out


def _waits(run: _Run, rows: pd.DataFrame) -> list[_Wait]:
    out = []
    n = len(run.start)
    for request, arrival, first in zip(
        rows["request"].to_numpy(), rows["arrival_ns"].to_numpy(), rows["first_step"].to_numpy(), strict=True
    ):
        until = int(first) if first >= 0 else n
        after = np.flatnonzero(run.start[:until] >= arrival)
        out.append(_Wait(int(request), int(arrival), int(first) if first >= 0 else UNKNOWN, after[1:]))
    return out


# --- head-of-line blocking ---------------------------------------------------------------------------------------


def head_of_line(run: _Run, rows: pd.DataFrame, waits: list[_Wait]) -> Finding | None:
    """Requests that waited while a long prompt's chunks (one request prefilling over LONG_PREFILL_STEPS steps or
    more) took the whole token budget: vLLM schedules running requests first, so those steps left nothing for them."""
    full = run.tokens >= run.budget
    best = None
    for blocker in _long_prefills(rows):
        rid, first, last = blocker
        chunk_steps = np.arange(first, last + 1)
        behind = {}
        for w in waits:
            if w.request == rid:
                continue
            held = w.steps[np.isin(w.steps, chunk_steps) & full[w.steps]]
            if len(held):
                behind[w.request] = float(run.spacing_ms[held].sum())
        total = sum(behind.values())
        if behind and (best is None or total > best[1]):
            best = (blocker, total, behind)
    typical = float(np.median(run.spacing_ms))
    if best is None or best[1] < MIN_WAIT_STEPS * typical:
        return None
    (rid, first, last), total, behind = best
    saving = sum(max(ms - typical, 0.0) for ms in behind.values())
    prompt = rows.loc[rows["request"] == rid, "prompt_tokens"]
    prompt_text = f"{int(prompt.iloc[0])}-position prompt" if len(prompt) and prompt.iloc[0] > 0 else "prompt"
    most = max(behind, key=behind.get)
    arrival = next(w for w in waits if w.request == most)
    end = run.start[arrival.first_step] if arrival.first_step >= 0 else run.end[last]
    who = ", ".join(f"request {r} {_ms(ms)}" for r, ms in sorted(behind.items())[:6])
    return _priced(
        Finding(
            "head-of-line-blocking",
            "warn",
            f"{len(behind)} request(s) waited behind a long prompt's prefill, {_ms(total)} in all",
            f"Request {rid}'s {prompt_text} ran over {last - first + 1} steps (steps {first} to {last}), each carrying "
            f"the whole token budget the run shows ({run.budget:.0f} positions); {len(behind)} request(s) arrived "
            f"during it and were scheduled only after it ({who}). vLLM schedules running requests first, so a long "
            "prompt's chunks take the budget before a waiting request gets any. vLLM's --long-prefill-token-threshold "
            "caps a long prompt's chunk so that short prompts join beside it; a smaller token budget shortens each "
            "step they wait.",
            {"blocker": float(rid), "prefill_steps": float(last - first + 1), "blocked_requests": float(len(behind))},
            cost_us=total * 1e3,
            at_ns=(int(arrival.arrival_ns), int(max(end, arrival.arrival_ns + 1))),
        ),
        saving * 1e3,  # scheduled at once, each would still wait about one step
    )


def _long_prefills(rows: pd.DataFrame) -> list[tuple[int, int, int]]:
    """(request, first step, step of its first token) of each request whose prompt ran over several steps."""
    first = rows["first_step"].to_numpy()
    token = rows["first_token_step"].to_numpy() if "first_token_step" in rows else np.full(len(rows), UNKNOWN)
    long = (first >= 0) & (token >= 0) & (token - first + 1 >= LONG_PREFILL_STEPS)
    return [(int(r), int(f), int(t)) for r, f, t in zip(rows["request"][long], first[long], token[long], strict=True)]


# --- queueing while the batch had room ---------------------------------------------------------------------------


def queued_with_room(run: _Run, rows: pd.DataFrame, waits: list[_Wait]) -> Finding | None:
    """Requests that waited while steps ran below the run's largest batch and below its token budget."""
    room = _room(run)
    held = {w.request: w.steps[room[w.steps]] for w in waits}
    long = {r: s for r, s in held.items() if len(s) >= MIN_WAIT_STEPS}
    if not long:
        return None
    waited = {r: float(run.spacing_ms[s].sum()) for r, s in held.items() if len(s)}
    total = sum(waited.values())
    typical = float(np.median(run.spacing_ms))
    if total < MIN_WAIT_STEPS * typical:
        return None
    most = max(long, key=lambda r: waited[r])
    wait = next(w for w in waits if w.request == most)
    end = run.start[wait.first_step] if wait.first_step >= 0 else run.end[-1]
    most_seqs, steps_with_room = np.nanmax(run.sequences), sorted({int(t) for s in held.values() for t in s})
    who = ", ".join(f"request {r} {_ms(ms)}" for r, ms in sorted(waited.items())[:6])
    return _priced(
        Finding(
            "queued-with-room",
            "warn",
            f"{len(waited)} request(s) queued {_ms(total)} while the batch had room",
            f"{len(waited)} request(s) had arrived and waited through {len(steps_with_room)} step(s) that ran below "
            f"the largest batch of this run ({most_seqs:.0f} sequences) and below its token budget ({run.budget:.0f} "
            f"positions), not counting the first step after each arrival ({who}). The batch did not hold them: the "
            "scheduler waited for something else. KV cache space (vLLM admits a request only when its blocks fit: "
            "--gpu-memory-utilization, --max-model-len, a smaller KV dtype), or the API server handing requests over "
            "late (its trace beside the worker's shows its own time).",
            {
                "requests": float(len(waited)),
                "steps_with_room": float(len(steps_with_room)),
                "step": float(steps_with_room[0]),
            },
            cost_us=total * 1e3,
            at_ns=(int(wait.arrival_ns), int(max(end, wait.arrival_ns + 1))),
        ),
        total * 1e3,  # admitted at once, they would not have waited those steps
    )


def _room(run: _Run) -> np.ndarray:
    """Steps below the largest batch the run reached and below its token budget (unknown counts: no room)."""
    if not np.isfinite(run.sequences).any() or not np.isfinite(run.budget):
        return np.zeros(len(run.start), dtype=bool)
    most = np.nanmax(run.sequences)
    with np.errstate(invalid="ignore"):
        return (run.sequences < most) & (run.tokens < run.budget)


# --- a batch that never fills ------------------------------------------------------------------------------------


def never_fills(run: _Run, rows: pd.DataFrame, waits: list[_Wait]) -> Finding | None:
    """No request waited for a place (each scheduled within two steps of its arrival: the first step after it may
    have been scheduled before the request reached the engine), so the batch was as big as the load made it; a step's
    time against its positions prices a batch FULLER times as big."""
    if any(len(w.steps) >= MIN_WAIT_STEPS or w.first_step < 0 for w in waits) or len(waits) < 2:
        return None
    decoding = np.isin(run.kind, ("decode", "mixed")) & np.isfinite(run.decoders) & (run.decoders > 0)
    if decoding.sum() < MIN_DECODE_STEPS:
        return None
    known = np.isfinite(run.tokens) & (run.kind != "empty")
    spacing = run.spacing_ms
    fit = _line(run.tokens[known], spacing[known])
    if fit is None:
        return None
    intercept, per_position = fit
    batch, most = float(np.median(run.decoders[decoding])), float(np.max(run.decoders[decoding]))
    decode_ms, decode_tokens = float(spacing[decoding].sum()), float(run.decoders[decoding].sum())
    fuller_step = intercept + per_position * FULLER * batch
    fuller_ms = decode_tokens * fuller_step / (FULLER * batch)
    saving = decode_ms - fuller_ms
    if fuller_step <= 0 or saving < MIN_GAIN * decode_ms:
        return None
    rate, fuller_rate = decode_tokens / decode_ms * 1e3, FULLER * batch / fuller_step * 1e3
    return _priced(
        Finding(
            "batch-never-fills",
            "info",
            f"The batch never fills: {batch:.0f} sequence(s) a decode step, and none waited for a place",
            f"Every request was scheduled within two steps of its arrival ({len(waits)} requests), and "
            f"the steps that decode carried {batch:.0f} sequence(s) (median; at most {most:.0f}). "
            f"A step's time grows about {_ms(per_position)} a position over {_ms(intercept)} (the steps' own times "
            f"against their positions), so a batch {FULLER}x as big ({FULLER * batch:.0f} sequences) would take "
            f"about {_ms(fuller_step)} a step: {format_value(rate, 'tok/s')} would become about "
            f"{format_value(fuller_rate, 'tok/s')}. The load sets the batch here, not the engine: more requests in "
            "flight (a client's concurrency) use the room; for latency alone this is the engine's best case.",
            {"decode_sequences": batch, "ms_per_position": per_position, "fuller_step_ms": fuller_step},
            cost_us=saving * 1e3,
            at_ns=(int(run.start[decoding][0]), int(run.end[decoding][-1])),
        ),
        saving * 1e3,  # the decode steps' time, less what the same tokens take at a batch FULLER times as big
    )


# --- small helpers -----------------------------------------------------------------------------------------------


def _line(x: np.ndarray, y: np.ndarray) -> tuple[float, float] | None:
    """(intercept, slope) of a least-squares line, slope at least 0; None without two distinct x."""
    ok = np.isfinite(x) & np.isfinite(y)
    if len(np.unique(x[ok])) < 2:
        return None
    slope = max(float(np.polyfit(x[ok], y[ok], 1)[0]), 0.0)
    return float(np.median(y[ok] - slope * x[ok])), slope


def _slope(x: np.ndarray, y: np.ndarray) -> float | None:
    fit = _line(x, y)
    return None if fit is None else fit[1]


def _median(values: np.ndarray) -> float | None:
    values = values[np.isfinite(values)]
    return float(np.median(values)) if len(values) else None


def _ms(value: float) -> str:
    return format_value(value, "ms")


def _priced(finding: Finding, saving_us: float) -> Finding:
    """The finding with what fixing it could save (issue 44's saving_us, where the Finding has it)."""
    if hasattr(finding, "saving_us"):
        from dataclasses import replace

        return replace(finding, saving_us=max(float(saving_us), 0.0))
    return finding
