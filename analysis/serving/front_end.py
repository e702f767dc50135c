"""A serving run's front end: the API server's own trace, read for its requests and the outputs it handed out.

vLLM profiles its API server process too (`<host>_<pid>.async_llm.<id>.pt.trace.json.gz`, python frames only:
with_stack is on by default). The frames that matter, from vLLM V1's AsyncLLM (FRAMES below, matched on file and
function, never on line numbers, which move between versions):

- each request handed to the engine: `OutputProcessor.add_request` (a plain method: one frame per request);
- when it arrived: the fresh call of the API handler that made it (`create_completion`, `create_chat_completion`,
  ...): a coroutine's frames are its call and each resume, the call being the one at the function's first line,
  the lowest line number seen; handlers and engine requests are paired in order (FCFS), and a pairing that is not
  one to one or not causal falls back to the engine-side time;
- each batch of engine outputs: `OutputProcessor.process_outputs`, holding one `make_request_output` per request
  that got a token and one `_finish_request` per request that finished.

Python frames hold no request ids: the front end gives counts and times, the worker's steps say which step made
which output (analysis.serving.ledger pairs them by time).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from stepscope.parsers.timeline import Timeline
from ..event_rows import kind_mask, take_rows
from ..names import name_matches

# (role, file, function): the frames read; the file is matched at the end of the frame's path
FRAMES = (
    ("request", r"v1/engine/output_processor\.py", "add_request"),
    ("outputs", r"v1/engine/output_processor\.py", "process_outputs"),
    ("output", r"v1/engine/output_processor\.py", "make_request_output"),
    ("finish", r"v1/engine/output_processor\.py", "_finish_request"),
    ("handler", r"entrypoints/.+\.py", r"create_(?:chat_)?completion|create_responses"),
)
_FRAME = re.compile(r"^(?P<file>.+?\.py)\((?P<line>\d+)\): (?P<func>[A-Za-z_][A-Za-z0-9_]*)$")


@dataclass(frozen=True)
class FrontEnd:
    """What the API server's trace says of the run (times in ns on its clock, which is the workers' on one host)."""

    files: tuple[str, ...]
    arrival_ns: np.ndarray  # per request handed to the engine, in order: when the API handler received it
    arrival_from: str  # "API handler" | "engine request" (the handler pairing failed)
    batches: pd.DataFrame  # one row per output batch: ts_ns, outputs (requests given a token), finished
    evidence: str
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def requests(self) -> int:
        return len(self.arrival_ns)


def read_front_end(timeline: Timeline, files: tuple[str, ...]) -> FrontEnd | None:
    """The front end's requests and output batches, None when the trace holds no request frames (profiled without
    stacks, or not a vLLM API server)."""
    frames = _frames(timeline)
    request = frames.get("request")
    if request is None or not len(request):
        return None
    arrival, source, note = _arrivals(request["ts"].to_numpy(), frames.get("handler"))
    batches = _batches(frames)
    evidence = (
        f"front end ({', '.join(files)}): {len(request)} request(s) handed to the engine "
        f"(OutputProcessor.add_request frames), arrivals from the {source}, {len(batches)} output batch(es)"
    )
    return FrontEnd(files, arrival, source, batches, evidence, (note,) if note else ())


def _frames(timeline: Timeline) -> dict[str, pd.DataFrame]:
    """Per role, the calls of its frames (ts, dur, file, func), sorted by time: a coroutine's frames are its call and
    its resumes, the call at the function's first line (the lowest line seen for that file and function)."""
    ev = timeline.events
    rows = kind_mask(ev, ["python"])
    if not rows.any():
        return {}
    out = {}
    for role, file, func in FRAMES:
        hit = rows & name_matches(ev["name"], re.compile(rf"(?:^|/){file}\(\d+\): (?:{func})$"))
        if not hit.any():
            continue
        frame = take_rows(ev, hit, ("ts", "dur", "name"))
        parts = frame["name"].astype(str).str.extract(_FRAME)
        frame = frame.assign(file=parts["file"].to_numpy(), func=parts["func"].to_numpy())
        frame = frame.assign(line=pd.to_numeric(parts["line"]).to_numpy())
        first = frame.groupby(["file", "func"])["line"].transform("min")
        out[role] = frame[frame["line"] == first].sort_values("ts", kind="stable").reset_index(drop=True)
    return out


def _arrivals(engine_ts: np.ndarray, handlers: pd.DataFrame | None) -> tuple[np.ndarray, str, str]:
    """Each engine request's arrival: the calls of the outermost API handler that made as many calls as the engine
    got requests, paired in order, when each comes before its engine request; else the engine-side times."""
    engine_ts = np.sort(engine_ts)
    if handlers is None or not len(handlers):
        return engine_ts, "engine requests", ""
    groups = [g["ts"].to_numpy() for _, g in handlers.groupby(["file", "func"], sort=False)]
    paired = [np.sort(ts) for ts in groups if len(ts) == len(engine_ts) and (np.sort(ts) <= engine_ts).all()]
    if not paired:
        note = (
            f"no API handler's calls pair one to one with the {len(engine_ts)} engine request(s): arrivals are the "
            "times the requests reached the engine"
        )
        return engine_ts, "engine requests", note
    return min(paired, key=lambda ts: float(ts[0])), "API handler calls", ""


def _batches(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per output batch (process_outputs call): its start, the request outputs and finishes inside it."""
    batch = frames.get("outputs")
    if batch is None or not len(batch):
        return pd.DataFrame({"ts_ns": np.zeros(0, np.int64), "outputs": np.zeros(0, np.int64), "finished": []})
    start = batch["ts"].to_numpy()
    end = start + batch["dur"].to_numpy()
    return pd.DataFrame(
        {
            "ts_ns": start,
            "end_ns": end,
            "outputs": _inside(frames.get("output"), start, end),
            "finished": _inside(frames.get("finish"), start, end),
        }
    )


def _inside(frames: pd.DataFrame | None, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """How many of the frames start inside each [start, end) (batches do not overlap: one output loop)."""
    if frames is None or not len(frames):
        return np.zeros(len(start), dtype=np.int64)
    ts = frames["ts"].to_numpy()
    return (np.searchsorted(ts, end, side="left") - np.searchsorted(ts, start, side="left")).astype(np.int64)


@dataclass(frozen=True)
class FrontEndFiles:
    """A serving folder's API server files: their names, what they said (or why not), and what was read of them."""

    files: tuple[str, ...]
    evidence: str
    front_end: FrontEnd | None


def front_end_files(names: list[str], timelines: list[Timeline]) -> FrontEndFiles | None:
    """The API server's files of a serving folder, read for their requests; None when the folder has none."""
    if not names:
        return None
    found = [f for f in (read_front_end(t, (n,)) for n, t in zip(names, timelines, strict=True)) if f is not None]
    if not found:
        note = (
            f"{', '.join(names)}: the API server's trace holds no request frames (profiled without stacks): "
            "requests from the worker's trace alone"
        )
        return FrontEndFiles(tuple(names), note, None)
    best = max(found, key=lambda f: f.requests)  # one API server per capture; several: the one that saw requests
    return FrontEndFiles(tuple(names), best.evidence, best)
