"""Last-resort strategies that read only device-side repetition: graph replays, a repeating kernel sequence.

They come after everything that reads the host's structure, because a graph replay or a kernel
pattern may be one piece of a forward rather than the whole of it; their confidence says so.
"""

from __future__ import annotations

import numpy as np

from ..kernel_pattern import repeating_pattern
from .frames import Found, Views, boundary_frame


def graph_replays(views: Views) -> Found | None:
    graphs = views.graph_launches
    if len(graphs) < 2:
        return None
    steps = boundary_frame(
        graphs["ts"].to_numpy(),
        (graphs["ts"] + graphs["dur"]).to_numpy(),
        label=graphs["name"].astype(str).to_numpy(),
    )
    note = "steps inferred from graph replays: each replay taken as one decode step"
    return views.result(steps, "graph-replays", 0.4, note, evidence=[f"{len(graphs)} graph launches, one step each"])


def kernel_pattern(views: Views) -> Found | None:
    """Steps from a regularly repeating kernel sequence on the busiest GPU, placed at their launch calls."""
    ev = views.events
    kernels = ev[ev["kind"] == "kernel"]
    if kernels.empty:
        return None
    kernels = kernels[kernels["device"] == kernels["device"].value_counts().index[0]].sort_values("ts", kind="stable")
    pattern = repeating_pattern(kernels["name"].reset_index(drop=True))
    if pattern is None:
        return None
    opening = kernels.iloc[pattern.positions]
    calls = views.launch_calls
    calls = calls[calls["correlation"] >= 0]
    launch_ts = dict(zip(calls["correlation"].to_numpy(), calls["ts"].to_numpy(), strict=False))
    starts = np.array([launch_ts.get(c, t) for c, t in zip(opening["correlation"], opening["ts"], strict=True)])
    # a prefill runs the same kernels as a decode step in eager mode, only longer (more tokens)
    first_kernels = pattern.positions[1] - pattern.positions[0]
    spans = np.diff(opening["ts"].to_numpy())
    kind = np.full(len(starts), "decode", dtype=object)
    if first_kernels > 1.5 * pattern.kernels_per_step or spans[0] > 1.5 * np.median(spans[1:]):
        kind[0] = "prefill"
    note = (
        f"steps inferred from a repeating kernel sequence: every {pattern.kernels_per_step} kernels, "
        f"opening with {pattern.name[:80]!r}; prefill/decode told apart by length only"
    )
    evidence = [f"kernel {pattern.name[:80]!r} repeats every {pattern.kernels_per_step} kernels"]
    return views.result(boundary_frame(starts, starts, kind=kind), "kernel-pattern", 0.3, note, evidence=evidence)


def nothing(views: Views) -> Found:
    note = "nothing in the trace looks like token generation"
    from .empty_reasons import empty_reasons
    from .frames import empty_frame

    return views.result(empty_frame(), "none", 0.5, note, *empty_reasons(views), evidence=[note])
