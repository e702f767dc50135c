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

from analysis.names import name_matches
from analysis.step_finding.frames import Found, Views, boundary_frame, requests_opened_by

SPAN_KINDS = ("python", "cpu_op", "annotation")
# The host taking a token between forwards: sampling on the host, a sync, a blocking device-to-host copy.
HANDOFF = re.compile(
    r"^aten::(argmax|multinomial)$|Synchronize|^(cuda|hip)Memcpy(WithStream)?$|^cuMemcpyDtoH|MemcpyDtoH"
)
# Names that only rank candidates of equal standing; never the way in.
FORWARD_HINT = re.compile(r"execute_model|ForCausalLM|Torch-Compiled Region|CompiledFunction|ProfilerStep#|forward")
MIN_FORWARDS = 2
MIN_HANDOFF_SHARE = 0.9  # of gaps between consecutive forwards that hold a handoff
MIN_COVERAGE = 0.5  # share of the process's work inside the forward spans
PREFILL_FACTOR = 2.0  # a forward this many times the typical (decode) forward's size is a prefill


def host_forwards(views: Views) -> Found | None:
    ev = views.events
    spans_mask = ev["kind"].isin(SPAN_KINDS).to_numpy() & (ev["dur"].to_numpy() > 0)
    if not spans_mask.any():
        return None
    gpu = ev["kind"].isin(("kernel", "memcpy", "memset")).to_numpy()
    gpu_corr = np.unique(ev["correlation"].to_numpy()[gpu & (ev["correlation"].to_numpy() >= 0)])
    calls = views.launch_calls
    is_launch = np.isin(calls["correlation"].to_numpy(), gpu_corr) | calls["name"].isin(_GRAPH_NAMES).to_numpy()
    launches = calls[is_launch]
    handoffs = ev[name_matches(ev["name"], HANDOFF)]
    spans_all = ev[spans_mask]
    best: tuple | None = None
    candidates = 0
    for pid in np.unique(spans_all["pid"].to_numpy()):  # one pass per process (a rank), not per event
        work = launches[launches["pid"] == pid]
        on_device = len(work) > 0
        if not on_device:
            work = views.ops[views.ops["pid"] == pid]
        if len(work) < MIN_FORWARDS:
            continue
        found = _forward_spans(
            spans_all[spans_all["pid"].to_numpy() == pid],
            np.sort(work["ts"].to_numpy()),
            np.sort(handoffs.loc[handoffs["pid"] == pid, "ts"].to_numpy()),
        )
        if found is None:
            continue
        candidates += 1
        if best is None or found[1] > best[1][1]:
            best = (pid, found, on_device)
    if best is None:
        return None
    pid, (name, n_work, coverage, spans), on_device = best
    return _label(views, pid, name, n_work, coverage, spans, on_device, candidates)


_GRAPH_NAMES = ("cudaGraphLaunch", "hipGraphLaunch", "cuGraphLaunch")


def _forward_spans(spans: pd.DataFrame, work: np.ndarray, handoffs: np.ndarray):
    """(name, forwards holding work, share of work covered, outermost spans) of the best candidate, or None."""
    codes = spans["name"].cat.codes.to_numpy() if isinstance(spans["name"].dtype, pd.CategoricalDtype) else (
        pd.factorize(spans["name"])[0]
    )
    counts = np.bincount(codes[codes >= 0])
    repeated = (codes >= 0) & (counts[np.maximum(codes, 0)] >= MIN_FORWARDS)
    if not repeated.any():
        return None
    frame = pd.DataFrame(
        {"code": codes[repeated], "ts": spans["ts"].to_numpy()[repeated], "end": spans["ts"].to_numpy()[repeated]
         + spans["dur"].to_numpy()[repeated]}
    ).sort_values(["code", "ts"], kind="stable")
    # outermost occurrences of each name: drop any that starts inside an earlier one of the same name
    previous_end = frame.groupby("code", sort=False)["end"].cummax().groupby(frame["code"], sort=False).shift(1)
    frame = frame[previous_end.isna().to_numpy() | (frame["ts"].to_numpy() >= previous_end.to_numpy())]
    first = np.searchsorted(work, frame["ts"].to_numpy(), side="left")
    after = np.searchsorted(work, frame["end"].to_numpy(), side="left")
    frame = frame.assign(work=after - first, first=first, after=after)
    holding = frame[frame["work"].to_numpy() > 0]
    if holding.empty:
        return None
    # between the last work of one forward and the first work of the next, the host takes the token
    same = np.append(holding["code"].to_numpy()[1:] == holding["code"].to_numpy()[:-1], False)
    last_work = work[holding["after"].to_numpy() - 1]
    next_first = work[np.minimum(np.append(holding["first"].to_numpy()[1:], 0), len(work) - 1)]
    between = np.searchsorted(handoffs, next_first, side="left") - np.searchsorted(handoffs, last_work, side="right")
    per_name = pd.DataFrame(
        {
            "code": holding["code"].to_numpy(),
            "work": holding["work"].to_numpy(),
            "gap": same,
            "handoff": same & (between > 0),
            "dur": holding["end"].to_numpy() - holding["ts"].to_numpy(),
        }
    ).groupby("code", sort=False).agg(
        n=("work", "size"),
        covered=("work", "sum"),
        gaps=("gap", "sum"),
        handoffs=("handoff", "sum"),
        dur=("dur", "mean"),
    )
    separated = per_name["handoffs"] >= MIN_HANDOFF_SHARE * per_name["gaps"]
    per_name = per_name[(per_name["n"] >= MIN_FORWARDS) & separated]
    if per_name.empty:
        return None
    per_name["coverage"] = per_name["covered"] / len(work)
    per_name = per_name[per_name["coverage"] >= MIN_COVERAGE]
    if per_name.empty:
        return None
    names = spans["name"].cat.categories if isinstance(spans["name"].dtype, pd.CategoricalDtype) else (
        pd.factorize(spans["name"])[1]
    )
    labels = np.asarray(names)[per_name.index.to_numpy()].astype(str)
    per_name = per_name.assign(
        label=labels,
        hint=name_matches(pd.Series(labels, dtype=object), FORWARD_HINT),
        coverage_pct=np.round(100 * per_name["coverage"]).astype(int),
    )
    # most forwards; then most of the work; then a known forward name; then the outermost (longest)
    ranked = per_name.sort_values(["n", "coverage_pct", "hint", "dur"], ascending=False, kind="stable")
    chosen, code = ranked.iloc[0], ranked.index[0]
    own = frame[frame["code"].to_numpy() == code]
    first_holding = own["ts"].to_numpy()[own["work"].to_numpy() > 0][0]
    own = own[own["ts"].to_numpy() >= first_holding]  # spans before the first forward are set-up, not steps
    return str(chosen["label"]), int(chosen["n"]), float(chosen["coverage"]), own


def _label(views: Views, pid, name: str, n_work: int, coverage: float, spans: pd.DataFrame, on_device: bool,
           processes: int) -> Found:
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
    if tokens is not None:
        per_seq = np.where(batch > 0, tokens // np.maximum(batch, 1), 0)
        kind[per_seq > 1] = "prefill"
        evidence.append("kinds and tokens from the input shapes of the aten::embedding inside each forward")
        confidence = 0.85
    else:
        size, source, confidence = _forward_sizes(views, ev, start, end, on_device)
        ref = np.percentile(size[holds], 25) if holds.any() else 0
        big = holds & (size > PREFILL_FACTOR * ref) if ref > 0 else np.zeros(len(start), dtype=bool)
        if big.any():
            kind[big] = "prefill"
            evidence.append(
                f"kinds from {source}: {int(big.sum())} forward(s) over {PREFILL_FACTOR:g}x the typical forward's "
                "taken as prefill (no input shapes recorded)"
            )
        else:
            first_of = np.zeros(len(start), dtype=bool)
            first_of[np.flatnonzero(holds)[:1]] = True
            kind[first_of] = "prefill"
            confidence = 0.5
            evidence.append(f"kinds by position: {source} does not set any forward apart; the first taken as prefill")
    kind[~holds] = "empty"
    if tokens is None:
        tokens = batch = None
    request, index = requests_opened_by(kind == "prefill")
    steps = boundary_frame(start, end, kind=kind, request=request, index=index, tokens=tokens, batch=batch,
                           label=name[:200])
    if processes > 1:
        steps.attrs["process"] = int(pid)  # analyze() measures this process and the devices it launched on
    return views.result(steps, "host-forwards", confidence, evidence=evidence)


def _shapes_inside(emb: pd.DataFrame, start: np.ndarray, end: np.ndarray):
    """(tokens, batch) per forward from the first token-embedding lookup inside it, or (None, None) when the
    lookups carry no shapes. A forward with no lookup (compiled, graph-replayed) decodes one token per
    sequence of the forward before it."""
    from analysis.step_finding.embedding import token_shape

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
    return (end - start).astype(np.float64), "host time per forward", 0.6
