"""Steps from compiled forwards: `Torch-Compiled Region` calls with the host taking a token between them.

A fully compiled forward (`model.forward = torch.compile(model.forward)`) runs no eager aten::embedding, and on a CPU
trace its work is one compiled call among many small ops of the generate loop's glue: the host's op count cannot
find it (host-forwards needs the spans to hold most of the work). The compiled regions can. Regions with no token
handoff between them (argmax / multinomial, a sync, a device-to-host copy) are pieces of one forward (graph
breaks); the forward's range is widened to the widest host span that brackets exactly one forward each and holds
no handoff (`nn.Module: ...ForCausalLM_0` with with_modules, the python frame of the model call with with_stack).
Kinds by position: each request's first forward is its prefill (a compiled region records no shapes).
"""

from __future__ import annotations

import re

import numpy as np

from ..event_rows import kind_mask
from ..names import name_matches
from .frames import Found, Views, boundary_frame, requests_opened_by
from .host_forwards import HANDOFF, REQUEST_PAUSE, SPAN_KINDS, _first_of_requests, _inside_earlier, _name_codes
from .request_spans import requests_by_enclosing_span

COMPILED_REGION = re.compile(r"^Torch-Compiled Region")
MIN_FORWARDS = 2


def compiled_forwards(views: Views) -> Found | None:
    ev = views.events
    ts, dur = ev["ts"].to_numpy(), ev["dur"].to_numpy()
    region = kind_mask(ev, ("cpu_op", "annotation")) & (dur > 0) & name_matches(ev["name"], COMPILED_REGION)
    rows = np.flatnonzero(region)
    if len(rows) < MIN_FORWARDS:
        return None
    tid = ev["tid"].to_numpy()[rows]
    threads, counts = np.unique(tid, return_counts=True)
    rows = rows[tid == threads[np.argmax(counts)]]  # the thread that runs the model
    pid = int(ev["pid"].to_numpy()[rows[0]])
    start, end = ts[rows], ts[rows] + dur[rows]
    outer = start >= np.append(np.iinfo(np.int64).min, np.maximum.accumulate(end)[:-1])
    start, end = start[outer], end[outer]
    handoffs = ts[name_matches(ev["name"], HANDOFF) & (ev["pid"].to_numpy() == pid)]
    handoffs.sort()
    between = np.searchsorted(handoffs, start[1:]) - np.searchsorted(handoffs, end[:-1], side="left")
    opens_forward = np.append(True, between > 0)
    group = np.cumsum(opens_forward) - 1
    if group[-1] + 1 < MIN_FORWARDS:
        return None
    f_start = start[opens_forward]
    f_end = np.maximum.reduceat(end, np.flatnonzero(opens_forward))
    regions_per_forward = np.bincount(group)
    bracket = _bracket(ev, pid, f_start, f_end, handoffs)
    evidence = [
        f"{len(f_start)} forwards: compiled regions ({int(regions_per_forward.max())} at most per forward) with the "
        "host taking a token between forwards"
    ]
    if bracket is not None:
        f_start, f_end, name = bracket
        evidence.append(f"each forward's range: the host span {name[:100]!r} around it")
    grouped = requests_by_enclosing_span(views, f_start, f_end)
    if grouped is not None:
        first, line = grouped
        evidence += ["kinds by position: each request's first forward is its prefill", line]
    else:
        first = _first_of_requests(f_start, f_end, np.ones(len(f_start), dtype=bool))
        evidence.append(
            f"kinds by position: the first forward, and any after a pause over {REQUEST_PAUSE:g}x the typical "
            "pause between forwards, taken as a request's prefill"
        )
    request, index = requests_opened_by(first)
    kind = np.where(first, "prefill", "decode").astype(object)
    steps = boundary_frame(f_start, f_end, kind=kind, request=request, index=index, label="Torch-Compiled Region")
    note = "compiled forwards record no input shapes: prefill/decode told apart by position"
    return views.result(steps, "compiled-regions", 0.6, note, evidence=evidence)


def _bracket(ev, pid: int, f_start: np.ndarray, f_end: np.ndarray, handoffs: np.ndarray):
    """(starts, ends, name) of the widest host span name whose outermost occurrences each hold exactly one forward,
    cover every forward and hold no token handoff; None when there is none."""
    dur = ev["dur"].to_numpy()
    rows = np.flatnonzero(kind_mask(ev, SPAN_KINDS) & (dur > 0) & (ev["pid"].to_numpy() == pid))
    rows = rows[~name_matches(ev["name"], COMPILED_REGION, rows)]
    if not len(rows):
        return None
    codes, names = _name_codes(ev["name"])
    code, ts = codes[rows], ev["ts"].to_numpy()[rows]
    stop = ts + dur[rows]
    lo = np.searchsorted(f_start, ts, side="left")
    hi = np.searchsorted(f_start, stop, side="left")
    one = (hi - lo == 1) & (f_end[np.maximum(hi - 1, 0)] <= stop)
    none_handed = np.searchsorted(handoffs, stop) == np.searchsorted(handoffs, ts)
    keep = np.flatnonzero(one & none_handed & (code >= 0))
    if not len(keep):
        return None
    code, ts, stop, lo = code[keep], ts[keep], stop[keep], lo[keep]
    order = np.lexsort((ts, code))
    code, ts, stop, lo = code[order], ts[order], stop[order], lo[order]
    outer = ~_inside_earlier(code, ts, stop)
    code, ts, stop, lo = code[outer], ts[outer], stop[outer], lo[outer]
    m = len(names)
    held = np.bincount(code, minlength=m)
    distinct = np.zeros(m)
    first_of_code = np.append(True, code[1:] != code[:-1])
    # each forward held once: the forwards a name's spans hold are all different (lo strictly rises within a name)
    rises = np.append(True, (lo[1:] > lo[:-1]) | first_of_code[1:])
    np.add.at(distinct, code, rises)
    width = np.bincount(code, weights=(stop - ts).astype(np.float64), minlength=m)
    ok = np.flatnonzero((held == len(f_start)) & (distinct == len(f_start)))
    if not len(ok):
        return None
    chosen = ok[np.argmax(width[ok])]
    mine = code == chosen
    return ts[mine], stop[mine], str(names[chosen])
