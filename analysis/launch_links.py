"""Follow a launch to its kernels and a kernel to its launch (issue 43), by the trace's own correlation ids.

Why here: a runtime call (cudaLaunchKernel, cudaMemcpyAsync, cudaGraphLaunch) and the device work it started carry
the same `correlation` (Kineto writes CUPTI's correlation id on both; a graph launch's id is on every kernel the
graph replays). The link is read, never guessed from time: an event without a correlation, or whose partner is not
in the trace, has no link, and the answer says so.

Correlation ids are unique per profiled process; a file holding several processes may repeat one, so the call
taken is the last one starting by the work's first start, and the work taken is the work starting after it.
Everything is a mask over the correlation column or a binary search on the sorted ts (one call per question, never
a loop over events).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from stepscope.parsers.timeline import GPU_KINDS, HOST_LAUNCH_KINDS, Timeline
from .activity import busy_union
from .event_rows import kind_mask
from .event_window import events_in_range
from .model import Analysis

LINK_COLUMNS = ("row", "start_ms", "dur_us", "name", "kind", "device", "stream")
HOST_SPAN_KINDS = ("cpu_op", "python", "annotation", "runtime", "driver", "sync")  # what may hold up a step's start
GRAPH_WORD = "graphlaunch"  # cudaGraphLaunch, hipGraphLaunch, cuGraphLaunch


@dataclass(frozen=True)
class Launch:
    """One launch call and the device work it started, linked by `correlation`. `call_row` and `work_rows` are
    positions in the timeline's events (call_row None where the trace has the work but not the call)."""

    correlation: int
    call_row: int | None
    work_rows: np.ndarray  # ts order
    call_name: str
    call_start_ns: int | None
    call_end_ns: int | None
    first_start_ns: int | None  # the work's first start and last end; None when the call started no work here
    last_end_ns: int | None
    busy_ns: int  # the time some of its work runs (overlapping work counted once)

    @property
    def graph(self) -> bool:
        """The call replays a CUDA (HIP) graph: its work is the graph's kernels."""
        return GRAPH_WORD in self.call_name.replace("_", "").casefold()

    @property
    def latency_ns(self) -> int | None:
        """From the call's start to its first work's start (the launch latency the hover and the link show)."""
        if self.call_start_ns is None or self.first_start_ns is None:
            return None
        return self.first_start_ns - self.call_start_ns

    @property
    def span_ns(self) -> int:
        return 0 if self.first_start_ns is None else int(self.last_end_ns - self.first_start_ns)


def launch_link(timeline: Timeline, row: int) -> Launch | None:
    """The launch that event `row` (a position in timeline.events) belongs to: the call itself, or the device work
    it started; None for an event that is neither, or that carries no correlation id."""
    events = timeline.events
    if not 0 <= int(row) < len(events):
        raise ValueError(f"no event {row}: the trace has {len(events):,} events")
    row = int(row)
    corr = int(events["correlation"].iat[row])
    is_call = bool(kind_mask(events.iloc[row : row + 1], HOST_LAUNCH_KINDS)[0])
    is_work = bool(kind_mask(events.iloc[row : row + 1], GPU_KINDS)[0])
    if corr < 0 or not (is_call or is_work):
        return None
    ts = events["ts"].to_numpy()
    same = events["correlation"].to_numpy() == corr
    calls = np.flatnonzero(same & kind_mask(events, HOST_LAUNCH_KINDS))
    work = np.flatnonzero(same & kind_mask(events, GPU_KINDS))
    if is_call:
        call = row
    else:
        before = calls[ts[calls] <= ts[row]]
        call = int(before[-1]) if len(before) else None
    if call is not None:  # the work of this call: from its start to the next call with the same id
        later = calls[ts[calls] > ts[call]]
        stop = ts[later[0]] if len(later) else np.iinfo(np.int64).max
        work = work[(ts[work] >= ts[call]) & (ts[work] < stop)]
    return _launch(events, corr, call, work)


def _launch(events: pd.DataFrame, corr: int, call: int | None, work: np.ndarray) -> Launch:
    ts = events["ts"].to_numpy()
    end = ts + events["dur"].to_numpy()
    blocks = busy_union(ts[work], end[work]) if len(work) else (np.empty(0), np.empty(0))
    return Launch(
        correlation=corr,
        call_row=call,
        work_rows=work,
        call_name=str(events["name"].iat[call]) if call is not None else "",
        call_start_ns=int(ts[call]) if call is not None else None,
        call_end_ns=int(end[call]) if call is not None else None,
        first_start_ns=int(ts[work].min()) if len(work) else None,
        last_end_ns=int(end[work].max()) if len(work) else None,
        busy_ns=int((blocks[1] - blocks[0]).sum()),
    )


def work_table(timeline: Timeline, launch: Launch, origin_ns: int) -> pd.DataFrame:
    """The launch's device work, one row each (LINK_COLUMNS): its row in the events, start (ms from the trace's
    start), duration, name, kind, device, stream; attrs: the call, the count, span, busy and latency."""
    events = timeline.events.iloc[launch.work_rows]
    frame = pd.DataFrame(
        {
            "row": launch.work_rows.astype(np.int64),
            "start_ms": (events["ts"].to_numpy() - origin_ns) / 1e6,
            "dur_us": events["dur"].to_numpy() / 1e3,
            "name": events["name"].astype(str).to_numpy(dtype=object),
            "kind": events["kind"].astype(str).to_numpy(dtype=object),
            "device": events["device"].to_numpy(dtype=np.int64),
            "stream": events["stream"].to_numpy(dtype=np.int64),
        },
        columns=list(LINK_COLUMNS),
    )
    frame.attrs.update(link_attrs(launch, origin_ns))
    return frame


def link_attrs(launch: Launch, origin_ns: int) -> dict:
    """What a link says in numbers: the call (row, name, start), the work's count, start, end, span, busy time and
    the launch latency (None where the trace lacks the call or the work)."""

    def ms(ns):
        return None if ns is None else (ns - origin_ns) / 1e6

    latency = launch.latency_ns
    return {
        "correlation": launch.correlation,
        "call_row": launch.call_row,
        "call_name": launch.call_name,
        "call_start_ms": ms(launch.call_start_ns),
        "call_end_ms": ms(launch.call_end_ns),
        "graph": launch.graph,
        "count": len(launch.work_rows),
        "start_ms": ms(launch.first_start_ns),
        "end_ms": ms(launch.last_end_ns),
        "span_us": launch.span_ns / 1e3,
        "busy_us": launch.busy_ns / 1e3,
        "latency_us": None if latency is None else latency / 1e3,
    }


def cover_line(launch: Launch, unit: str = "kernels") -> str:
    """ "covers 778 kernels, 10.2 ms": what a launch's work spans, as the app and the API say it."""
    from .number_format import format_value

    n = len(launch.work_rows)
    word = unit if n != 1 else unit.removesuffix("s")
    return f"covers {n:,} {word}, {format_value(launch.span_ns / 1e3, 'us')}"


@dataclass(frozen=True)
class Lead:
    """What comes before a step's first device work: the lead (idle), its first work and that work's launch, and
    the longest host span between the step's start and that launch call (None where none is recorded)."""

    step: int
    lead_ns: int
    first_row: int | None  # the step's first device work (a row of the events)
    launch: Launch | None
    host_row: int | None  # the longest host span in [step start, launch call) on the call's thread


def step_lead(timeline: Timeline, analysis: Analysis, work_rows: np.ndarray | None, work_step: np.ndarray, step: int):
    """The lead of step `step` (a row of analysis.steps). `work_rows`, `work_step`: each work item's row in the
    events and its owning step (analysis.event_window.WorkIndex's event_rows and step)."""
    steps = analysis.steps
    if not 0 <= int(step) < len(steps):
        raise ValueError(f"no step {step}: the trace has {len(steps)} steps")
    row = steps.iloc[int(step)]
    start = int(row["start_ns"])
    lead = int(row["gpu_lead_ns"]) if "gpu_lead_ns" in steps else 0
    owned = np.flatnonzero(work_step == int(step)) if work_rows is not None else np.empty(0, dtype=np.int64)
    if not len(owned) or not analysis.summary.on_gpu:
        return Lead(int(step), lead, None, None, None)
    first = int(work_rows[owned].min())  # rows are in ts order: the lowest row starts first
    launch = launch_link(timeline, first)
    host = None
    if launch is not None and launch.call_row is not None:
        host = _longest_host_span(timeline, start, launch.call_start_ns, launch.call_row)
    return Lead(int(step), lead, first, launch, host)


def _longest_host_span(timeline: Timeline, lo: int, hi: int, call_row: int) -> int | None:
    """The longest host event on the call's thread lying wholly in [lo, hi): what the host did before it launched
    (an enclosing op that also holds the launch is not before it)."""
    if hi <= lo:
        return None
    events = timeline.events
    first = int(np.searchsorted(events["ts"].to_numpy(), lo, side="left"))
    part = events_in_range(timeline, lo, hi)
    ends = part["ts"].to_numpy() + part["dur"].to_numpy()
    keep = (
        kind_mask(part, HOST_SPAN_KINDS)
        & (part["tid"].to_numpy() == events["tid"].iat[call_row])
        & (part["pid"].to_numpy() == events["pid"].iat[call_row])
        & (ends <= hi)
    )
    if not keep.any():
        return None
    dur = np.where(keep, part["dur"].to_numpy(), -1)
    return first + int(np.argmax(dur))


def lead_attrs(timeline: Timeline, lead: Lead, origin_ns: int) -> dict:
    """A step's lead in numbers and names (the API's gpu_lead, the app's lead line)."""
    events = timeline.events
    out = {"step": lead.step, "lead_us": lead.lead_ns / 1e3, "first_row": lead.first_row, "first_name": None}
    if lead.first_row is not None:
        out["first_name"] = str(events["name"].iat[lead.first_row])
        out["first_start_ms"] = (int(events["ts"].iat[lead.first_row]) - origin_ns) / 1e6
    launch = lead.launch
    out["launch"] = link_attrs(launch, origin_ns) if launch is not None else None
    out["host_row"] = lead.host_row
    out["host_name"] = str(events["name"].iat[lead.host_row]) if lead.host_row is not None else None
    if lead.host_row is not None:
        out["host_kind"] = str(events["kind"].iat[lead.host_row])
        out["host_start_ms"] = (int(events["ts"].iat[lead.host_row]) - origin_ns) / 1e6
        out["host_dur_us"] = int(events["dur"].iat[lead.host_row]) / 1e3
    return out
