"""Steps from the host's own structure: the outermost span that repeats once per model forward.

Serving engines and generate() loops leave no step annotations, but with_stack / with_modules
captures (and compiled regions, ProfilerStep ranges) hold a host span around each forward: an
engine's execute_model, `nn.Module: ...ForCausalLM`, a `Torch-Compiled Region`. It is found from
the call tree, not from its name:

- the work of a forward is its launch calls (or, on a CPU-only trace, its aten ops);
- a candidate is a span name whose outermost occurrences hold work, at least two of them;
- consecutive forwards are separated by the host taking the token (a sync, a device-to-host copy,
  argmax/multinomial) between the last work of one and the first work of the next: the pieces
  of one forward (layers, piecewise CUDA graphs) have no such handoff between them;
- no stretch of work outside the spans is as large as half a forward (a span only around the compiled
  decodes misses the eager prefill);
- of those, the one repeating most often among those holding most of the work is the forward
  (a span per request or per engine loop repeats less); known names only break ties.

Graph replays stay with the forward whose span launched them. Kinds come from the token-embedding
shapes inside each forward where recorded, else from its launch grids, its kernel time, or its host
time, relative to the typical (decode) forward; the evidence says which decided.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..event_rows import isin_ints, kind_mask, name_mask
from ..names import match_text, name_matches
from .frames import Found, Views, boundary_frame, requests_opened_by
from .request_spans import requests_by_enclosing_span

SPAN_KINDS = ("python", "cpu_op", "annotation")
ATEN_OP = re.compile(r"^aten::")
# The host taking a token between forwards: sampling on the host, a sync, a blocking device-to-host copy.
HANDOFF = re.compile(
    r"^aten::(argmax|multinomial)$|Synchronize|^(cuda|hip)Memcpy(WithStream)?$|^cuMemcpyDtoH|MemcpyDtoH"
)
# Names that only rank candidates of equal standing; never the way in.
FORWARD_HINT = re.compile(r"execute_model|ForCausalLM|Torch-Compiled Region|CompiledFunction|ProfilerStep#|forward")
MIN_FORWARDS = 2
MIN_HANDOFF_SHARE = 0.9  # of gaps between consecutive forwards that hold a handoff
MAX_OUTSIDE_SHARE = 0.5  # of a forward's typical work: more than this outside any span is a forward missed
MIN_COVERAGE = 0.5  # share of the process's work inside the forward spans
REQUEST_PAUSE = 4.0  # without any size evidence, a pause this many times the typical spacing opens a request
PREFILL_FACTOR = 2.0  # a forward this many times the typical (decode) forward's size is a prefill


def host_forwards(views: Views) -> Found | None:
    ev = views.events
    ts, dur, pid_all = ev["ts"].to_numpy(), ev["dur"].to_numpy(), ev["pid"].to_numpy()
    # an aten op is never a forward's outermost span: leaving them out keeps CPU-only traces cheap
    candidate = kind_mask(ev, SPAN_KINDS) & (dur > 0) & ~name_matches(ev["name"], ATEN_OP)
    span_rows = np.flatnonzero(candidate)
    if len(span_rows) < MIN_FORWARDS:
        return None
    codes, names = _name_codes(ev["name"])
    corr = ev["correlation"].to_numpy()
    gpu = kind_mask(ev, ("kernel", "memcpy", "memset"))
    calls = kind_mask(ev, ("runtime", "driver"))
    launch = calls & (isin_ints(corr, corr[gpu & (corr >= 0)]) | name_mask(ev, _GRAPH_NAMES))
    host_op = kind_mask(ev, ["cpu_op"])
    handoff = name_matches(ev["name"], HANDOFF)
    best: tuple | None = None
    processes = 0
    for pid in np.unique(pid_all[span_rows]):  # one pass per process (a rank), not per event
        own = pid_all == pid
        on_device = bool((launch & own).any())
        work = ts[(launch if on_device else host_op) & own]  # the frame is sorted by ts: so are these
        if len(work) < MIN_FORWARDS:
            continue
        rows = span_rows[own[span_rows]]
        found = _forward_spans(codes[rows], ts[rows], ts[rows] + dur[rows], work, ts[handoff & own], names)
        if found is None:
            continue
        processes += 1
        if best is None or found[1] > best[1][1]:
            best = (pid, found, on_device)
    if best is None:
        return None
    pid, (name, n_work, coverage, spans), on_device = best
    return _label(views, pid, name, n_work, coverage, spans, on_device, processes)


_GRAPH_NAMES = ("cudaGraphLaunch", "hipGraphLaunch", "cuGraphLaunch")


def _name_codes(names: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(names.dtype, pd.CategoricalDtype):
        return names.cat.codes.to_numpy().astype(np.int64), np.asarray(names.cat.categories, dtype=object)
    codes, uniques = pd.factorize(names)
    return codes.astype(np.int64), np.asarray(uniques, dtype=object)


def _forward_spans(code, start, end, work: np.ndarray, handoffs: np.ndarray, names: np.ndarray):
    """(name, forwards holding work, share of work covered, outermost spans) of the best candidate, or None.

    All names are scored at once: spans sorted by (name, start), per-name sums by bincount. The work each span
    holds is found first, in the spans' own order (time order, as the frame is sorted: a sorted search runs in
    cache), and only names whose spans hold the share of work a forward needs, nested ones counted too, are
    sorted and scored: in a trace with python stacks that is a few dozen of hundreds of names, under a tenth of
    the spans.
    """
    first = np.searchsorted(work, start, side="left")
    after = np.searchsorted(work, end, side="left")
    named = np.maximum(code, 0)
    counts = np.bincount(named, minlength=len(names))
    at_most = np.bincount(named, weights=after - first, minlength=len(names))  # covered, were every span outermost
    keep = (code >= 0) & (counts[named] >= MIN_FORWARDS) & (at_most[named] / len(work) >= MIN_COVERAGE)
    code, start, end, first, after = code[keep], start[keep], end[keep], first[keep], after[keep]
    if not len(code):
        return None
    order = np.lexsort((start, code))
    code, start, end, first, after = code[order], start[order], end[order], first[order], after[order]
    # outermost occurrences of each name: drop any that starts inside an earlier one of the same name
    outer = ~_inside_earlier(code, start, end)
    code, start, end, first, after = code[outer], start[outer], end[outer], first[outer], after[outer]
    held = after - first
    h = np.flatnonzero(held > 0)
    if len(h) < MIN_FORWARDS:
        return None
    hc = code[h]
    # between the last work of one forward and the first work of the next, the host takes the token
    same = np.append(hc[1:] == hc[:-1], False)
    last_work = work[after[h] - 1]
    next_first = work[np.append(first[h][1:], 0)]
    between = np.searchsorted(handoffs, next_first, side="left") - np.searchsorted(handoffs, last_work, side="right")
    m = len(names)
    n = np.bincount(hc, minlength=m)
    covered = np.bincount(hc, weights=held[h], minlength=m)
    gaps = np.bincount(hc, weights=same, minlength=m)
    separated = np.bincount(hc, weights=same & (between > 0), minlength=m)
    total_dur = np.bincount(hc, weights=(end - start)[h], minlength=m)
    coverage = covered / len(work)
    # every forward must be inside a span: no stretch of work between (or before, after) them as big as one
    opens = np.append(True, ~same[:-1])  # each name's first holding span (spans are sorted by name)
    gap_work = np.where(same, np.append(first[h][1:], 0) - after[h], 0)
    gap_work[opens] = np.maximum(gap_work[opens], first[h][opens])  # work before the first
    gap_work[~same] = np.maximum(gap_work[~same], len(work) - after[h][~same])  # work after the last
    outside = np.zeros(m)
    outside[hc[opens]] = np.maximum.reduceat(gap_work, np.flatnonzero(opens))
    typical = np.zeros(m)
    typical[n > 0] = covered[n > 0] / n[n > 0]
    whole = outside < MAX_OUTSIDE_SHARE * typical
    ok = (n >= MIN_FORWARDS) & (separated >= MIN_HANDOFF_SHARE * gaps) & (coverage >= MIN_COVERAGE) & whole
    ok = np.flatnonzero(ok)
    if not len(ok):
        return None
    # most forwards; then most of the work; then a known forward name; then the outermost (longest)
    ranked = sorted(
        ok,
        key=lambda c: (
            n[c],
            round(100 * coverage[c]),
            bool(FORWARD_HINT.search(match_text(names[c]))),
            total_dur[c] / n[c],
        ),
        reverse=True,
    )  # a few candidate names, not events
    chosen = ranked[0]
    mine = code == chosen
    first_holding = start[mine & (held > 0)][0]
    mine &= start >= first_holding  # spans before the first forward are set-up, not steps
    spans = pd.DataFrame({"ts": start[mine], "end": end[mine], "work": held[mine]})
    return str(names[chosen]), int(n[chosen]), float(coverage[chosen]), spans


def _inside_earlier(code: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """For spans sorted by (code, start): whether each starts before an earlier span of its code has ended."""
    group = np.cumsum(np.append(True, code[1:] != code[:-1])) - 1
    base = int(min(start.min(), end.min()))
    width = int(end.max()) - base + 1
    if width * (int(group[-1]) + 1) >= 1 << 62:  # compress times to ranks so the offsets cannot overflow
        _, inverse = np.unique(np.concatenate([start, end]), return_inverse=True)
        start, end, base, width = inverse[: len(start)], inverse[len(start) :], 0, len(start) * 2 + 1
    # one running max over all names: each name's times are offset above every earlier name's
    offset = group.astype(np.int64) * width - base
    running = np.maximum.accumulate(end + offset)
    previous = np.append(np.iinfo(np.int64).min, running[:-1])
    return start + offset < previous


def _label(
    views: Views, pid, name: str, n_work: int, coverage: float, spans: pd.DataFrame, on_device: bool, processes: int
) -> Found:
    ev = views.events
    start, end, work = spans["ts"].to_numpy(), spans["end"].to_numpy(), spans["work"].to_numpy()
    holds = work > 0
    what = "launches" if on_device else "host ops"
    evidence = [
        f"{n_work} forwards: outermost host span {name[:100]!r}, repeating once per forward and holding "
        f"{100 * coverage:.0f}% of process {int(pid)}'s {what}, the host taking the token between forwards"
    ]
    if processes > 1:
        pname = views.timeline.meta.process_names.get(int(pid), "")
        evidence.append(
            f"{processes} processes (ranks) have forwards: process {int(pid)} {pname[:60]!r} has the most; "
            "its steps, launches and devices are measured"
        )
    if (~holds).any():
        evidence.append(f"{int((~holds).sum())} forward span(s) with no {what}: empty steps")

    tokens, batch = _shapes_inside(views.embeddings, start, end)
    kind = np.full(len(start), "decode", dtype=object)
    notes = []
    if tokens is not None:
        per_seq = np.where(batch > 0, tokens // np.maximum(batch, 1), 0)
        kind[per_seq > 1] = "prefill"
        evidence.append("kinds and tokens from the input shapes of the aten::embedding inside each forward")
        confidence = 0.85
    else:
        size, source, confidence = _forward_sizes(views, ev, start, end, on_device)
        ref = np.percentile(size[holds], 25) if size is not None and holds.any() else 0
        big = holds & (size > PREFILL_FACTOR * ref) if ref > 0 else np.zeros(len(start), dtype=bool)
        if big.any():
            kind[big] = "prefill"
            notes.append(f"no input shapes recorded (record_shapes off): prefill/decode told apart by {source}")
            evidence.append(
                f"kinds from {source}: {int(big.sum())} forward(s) over {PREFILL_FACTOR:g}x the typical forward's "
                "taken as prefill (no input shapes recorded)"
            )
        else:
            grouped = requests_by_enclosing_span(views, start, end)
            confidence = 0.5
            notes.append("no input shapes recorded and no size evidence: prefill/decode told apart by position")
            if grouped is not None:
                kind[grouped[0] & holds] = "prefill"
                evidence.append(f"kinds by position ({source}): each request's first forward is its prefill")
                evidence.append(grouped[1])
            else:
                kind[_first_of_requests(start, end, holds)] = "prefill"
                evidence.append(
                    f"kinds by position ({source}): the first forward, and any after a pause over "
                    f"{REQUEST_PAUSE:g}x the typical pause between forwards, taken as a request's prefill"
                )
    kind[~holds] = "empty"
    if tokens is None:
        tokens = batch = None
    request, index = requests_opened_by(kind == "prefill")
    steps = boundary_frame(
        start, end, kind=kind, request=request, index=index, tokens=tokens, batch=batch, label=name[:200]
    )
    if processes > 1:
        steps.attrs["process"] = int(pid)  # analyze() measures this process and the devices it launched on
    return views.result(steps, "host-forwards", confidence, *notes, evidence=evidence)


def _first_of_requests(start: np.ndarray, end: np.ndarray, holds: np.ndarray) -> np.ndarray:
    """Forwards that open a request when nothing says which are prefills: the first, and any after a long pause
    (the host time between one forward's end and the next one's start; forward lengths vary too much)."""
    idx = np.flatnonzero(holds)
    opens = np.zeros(len(start), dtype=bool)
    if not len(idx):
        return opens
    opens[idx[0]] = True
    if len(idx) > 2:
        pauses = start[idx[1:]] - end[idx[:-1]]
        opens[idx[1:]] = pauses > REQUEST_PAUSE * max(np.median(pauses), 1)
    return opens


def _shapes_inside(emb: pd.DataFrame, start: np.ndarray, end: np.ndarray):
    """(tokens, batch) per forward from the first token-embedding lookup inside it, or (None, None) when the
    lookups carry no shapes. A forward with no lookup (compiled, graph-replayed) decodes one token per
    sequence of the forward before it."""
    from .embedding import token_shape

    if emb.empty:
        return None, None
    emb_ts = emb["ts"].to_numpy()
    pos = np.searchsorted(emb_ts, start, side="left")
    inside = (pos < len(emb)) & (emb_ts[np.minimum(pos, len(emb) - 1)] < end)
    if not inside.any():
        return None, None
    dims = emb["_dims"].to_numpy()
    shapes = [token_shape(dims[p]) for p in pos[inside]]  # one per forward, not per event
    if any(s[1] is None for s in shapes):
        return None, None
    batch = pd.Series(np.nan, index=range(len(start)))
    per_seq = np.ones(len(start))
    batch[inside] = [s[0] for s in shapes]
    per_seq[inside] = [s[1] for s in shapes]
    batch = batch.ffill().bfill().to_numpy()
    return (batch * per_seq).astype(np.int64), batch.astype(np.int64)


def _forward_sizes(views: Views, ev: pd.DataFrame, start: np.ndarray, end: np.ndarray, on_device: bool):
    """How big each forward is, from the best evidence the trace has: (sizes, what they are, confidence)."""
    calls = views.launch_calls
    kernels = ev[ev["kind"] == "kernel"]
    if on_device and len(calls) and len(kernels):
        order = np.argsort(calls["correlation"].to_numpy(), kind="stable")
        call_corr = calls["correlation"].to_numpy()[order]
        call_ts = calls["ts"].to_numpy()[order]
        k_corr = kernels["correlation"].to_numpy()
        pos = np.minimum(np.searchsorted(call_corr, k_corr), len(order) - 1)
        ok = (call_corr[pos] == k_corr) & (k_corr >= 0)
        launch_ts = call_ts[pos]
        owner = np.searchsorted(start, launch_ts, side="right") - 1
        ok &= owner >= 0
        ok[ok] = launch_ts[ok] < end[owner[ok]]
        if "grid" in kernels and (kernels["grid"].to_numpy()[ok] > 0).any():
            grid = kernels["grid"].to_numpy().astype(np.float64)
            return np.bincount(owner[ok], weights=grid[ok], minlength=len(start)), "kernel launch grids", 0.75
        if ok.any():
            dur = kernels["dur"].to_numpy().astype(np.float64)
            return np.bincount(owner[ok], weights=dur[ok], minlength=len(start)), "kernel time per forward", 0.7
    # host time alone is too noisy to size a forward (a CPU trace, the profiler's own overhead): say so
    return None, "no device work to size the forwards", 0.5
