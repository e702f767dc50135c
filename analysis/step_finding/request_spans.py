"""Which forwards start a request, from the host span that holds one request's forwards (with_stack captures).

A generate() call, a pipeline's __call__, a serving loop's per-request function: some span encloses all the forwards
of one request and repeats once per request. It is found from the call tree, not from its name: among the spans
that hold forwards, the name whose outermost occurrences put every forward inside exactly one of them and split them
into the most groups, one group at least holding two forwards (a span around each forward alone is the forward,
not a request). Each group's first forward opens a request. Pauses between forwards, the fallback, depend on the
machine being quiet; this does not.
"""

from __future__ import annotations

import numpy as np

from ..event_rows import kind_mask
from .frames import Views

SPAN_KINDS = ("python",)


def requests_by_enclosing_span(views: Views, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, str] | None:
    """(which forwards open a request, the evidence line), or None when no span groups the forwards."""
    from .host_forwards import _inside_earlier, _name_codes

    ev = views.events
    if len(start) < 2:
        return None
    rows = np.flatnonzero(kind_mask(ev, SPAN_KINDS) & (ev["dur"].to_numpy() > 0))
    if not len(rows):
        return None
    codes, names = _name_codes(ev["name"])
    ts = ev["ts"].to_numpy()[rows]
    stop = ts + ev["dur"].to_numpy()[rows]
    code = codes[rows]
    lo = np.searchsorted(start, ts, side="left")  # forwards starting inside the span and ending by its end
    hi = np.searchsorted(start, stop, side="left")
    held = hi - lo
    whole = held > 0
    whole[whole] = end[np.maximum(hi[whole] - 1, 0)] <= stop[whole]
    keep = np.flatnonzero(whole)
    if not len(keep):
        return None
    code, ts, stop, lo, held = code[keep], ts[keep], stop[keep], lo[keep], held[keep]
    order = np.lexsort((ts, code))
    code, ts, stop, lo, held = code[order], ts[order], stop[order], lo[order], held[order]
    outer = ~_inside_earlier(code, ts, stop)
    code, ts, stop, lo, held = code[outer], ts[outer], stop[outer], lo[outer], held[outer]
    m = len(names)
    covered = np.bincount(code, weights=held, minlength=m)
    groups = np.bincount(code, minlength=m)
    total = np.bincount(code, weights=(stop - ts).astype(np.float64), minlength=m)
    biggest = np.zeros(m)
    np.maximum.at(biggest, code, held)
    ok = np.flatnonzero((covered == len(start)) & (biggest >= 2))
    if not len(ok):
        return None
    # the finest split that still holds every forward; of equal splits the innermost (tightest) span
    chosen = ok[np.lexsort((total[ok], -groups[ok]))[0]]
    opens = np.zeros(len(start), dtype=bool)
    opens[lo[code == chosen]] = True
    name = str(names[chosen])
    evidence = (
        f"requests from the host span that holds each request's forwards: {name[:100]!r}, {int(groups[chosen])} "
        f"occurrence(s) holding all {len(start)} forwards"
    )
    return opens, evidence
