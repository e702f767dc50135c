"""The notebook API: a few functions over the same code the CLI and the app run (see stepscope/__init__.py)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pandas as pd

from stepscope.analysis import Analysis, AnalysisOptions
from stepscope.analysis import analyze as _analyze
from stepscope.analysis.compare import Comparison
from stepscope.analysis.compare import compare as _compare
from stepscope.analysis.front_door import Opened, OpenedRun
from stepscope.parsers import Timeline


@dataclass(frozen=True)
class Trace:
    """One trace opened by the front door (the same answer as the CLI and the app): the Timeline (every event), the
    Analysis (with the model's additions) and the contract, with a name for tables."""

    opened: Opened

    @property
    def name(self) -> str:
        return self.opened.name

    @property
    def timeline(self) -> Timeline:
        return self.opened.timeline

    @property
    def analysis(self) -> Analysis:
        return self.opened.analysis

    @property
    def report(self) -> dict:
        """The analyze --json object (DESIGN.md's contract), equal to the CLI's."""
        return self.opened.report

    @property
    def summary(self) -> dict:
        return self.report["summary"]

    @property
    def steps(self) -> pd.DataFrame:
        return self.analysis.steps

    @property
    def gaps(self) -> pd.DataFrame:
        return self.analysis.gaps

    @property
    def findings(self) -> list:
        return list(self.analysis.findings)

    @property
    def notes(self) -> tuple[str, ...]:
        """What the command line prints on stderr: why no roofline, which model was used."""
        return self.opened.notes

    def window(
        self, start_ms: float | None = None, end_ms: float | None = None, *, steps: Iterable[int] | None = None
    ) -> pd.DataFrame:
        """What a window of the run holds, one row per kernel name (host op on a CPU trace): name, short_name,
        category, count, total_us, mean_us, share_pct; `.attrs` wall_us, busy_us, idle_us (as a step's), unit,
        kernels, categories. Either a time range (ms from the trace's start, the app's clock) or `steps` (rows of
        `.steps`: the work they own, clipped to their spans). The same computation as the app's Selection panel
        and `analyze --window` (analysis/event_window.py)."""
        from stepscope.analysis.event_window import ms_to_ns, range_window, steps_window

        if steps is not None:
            if start_ms is not None or end_ms is not None:
                raise ValueError("give a time range or steps, not both")
            return steps_window(self._work, steps)
        if start_ms is None or end_ms is None:
            raise ValueError("give start_ms and end_ms (ms from the trace's start), or steps=[...]")
        return range_window(self._work, ms_to_ns(self._work, start_ms), ms_to_ns(self._work, end_ms))

    def find(
        self, text: str, regex: bool = False, *, case_sensitive: bool = False, kinds: Iterable[str] | None = None
    ) -> pd.DataFrame:
        """Every event whose name holds `text` (case ignored unless `case_sensitive`), or matches it as an RE2
        regex with `regex=True`: one row each, start_ms, dur_us, name, kind, step (-1 outside steps). `kinds`:
        only events of these kinds ("kernel", "cpu_op", "runtime", ...). The app's Find box gives the same rows."""
        from stepscope.analysis.event_find import FindQuery, find_events

        query = FindQuery(text, regex, case_sensitive, tuple(kinds) if kinds is not None else None)
        return find_events(self.timeline, self._work, query)

    def launch_of(self, row: int) -> dict | None:
        """The launch call of the device work at `row` (a position in `.timeline.events`, find()'s `row`), linked by
        the trace's correlation id: the call's row, name and start, `latency_us` (call start to the work's start),
        and what the call started in all (count, span_us, busy_us; a graph launch: every kernel it replays). None
        when the event is neither a launch call nor device work, or carries no correlation id. The app's link and
        the Perfetto export's flow arrows are the same links (analysis/launch_links.py)."""
        from stepscope.analysis.launch_links import launch_link, link_attrs

        launch = launch_link(self.timeline, row)
        return None if launch is None else link_attrs(launch, self.analysis.time_origin_ns)

    def kernels_of(self, row: int) -> pd.DataFrame:
        """The device work the launch call at `row` started (or, for device work, its launch's), one row each:
        row, start_ms, dur_us, name, kind, device, stream; `.attrs` as launch_of's. Empty when there is no link."""
        from stepscope.analysis.launch_links import LINK_COLUMNS, launch_link, work_table

        launch = launch_link(self.timeline, row)
        if launch is None:
            return pd.DataFrame(columns=list(LINK_COLUMNS))
        return work_table(self.timeline, launch, self.analysis.time_origin_ns)

    def gpu_lead(self, step: int) -> dict:
        """What precedes step `step`'s first device work: lead_us (the GPU idle from the step's start), that work
        (first_row, first_name), its launch (launch_of's object) and the longest host span on the launching thread
        between the step's start and the launch call (host_row, host_name, host_start_ms, host_dur_us)."""
        from stepscope.analysis.launch_links import lead_attrs, step_lead

        lead = step_lead(self.timeline, self.analysis, self._work.event_rows, self._work.step, step)
        return lead_attrs(self.timeline, lead, self.analysis.time_origin_ns)

    @cached_property
    def _work(self):
        """The analysis' work items indexed for windows and finds (built on first use, kept with the trace)."""
        from stepscope.analysis.event_window import work_index

        return work_index(self.timeline, self.analysis)

    def html_report(self, path: str | os.PathLike, vs: Trace | None = None) -> Path:
        """Write the self-contained HTML report (plotly.js inside, opens offline); returns its path."""
        from stepscope.exporters.report_html import build_report, report_trace, write_report

        traces = [report_trace(t.opened) for t in (self, vs) if t is not None]
        write_report(build_report(*traces), path)
        return Path(path)


@dataclass(frozen=True)
class TraceComparison:
    """B against baseline A: `metrics` (delta = B - A, ratio = B / A), `sentence`, and gates as in the CLI."""

    comparison: Comparison
    a: Trace
    b: Trace

    @property
    def metrics(self) -> pd.DataFrame:
        return self.comparison.metrics

    @property
    def sentence(self) -> str:
        return self.comparison.sentence

    def gate(self, *exprs: str) -> list:
        """Check gates such as "itl_p50_ms<=1.05x"; each result has .ok and .line()."""
        from stepscope.analysis.gate import evaluate_gates, parse_gates

        return evaluate_gates(parse_gates(exprs), self.a.analysis.summary, self.b.analysis.summary)


def load(
    path: str | os.PathLike,
    *,
    gap_threshold_us: float = 1.0,
    step_regex: str | None = None,
    model: str | None = None,
    name: str | None = None,
    cache: bool = True,
    batch: int | None = None,
) -> Trace | Run:
    """Read any trace Stepscope reads (Kineto JSON, Perfetto, nsys SQLite) and analyse it, through the front door:
    the same answer as `stepscope analyze` (its report equals the CLI's JSON). A folder (or glob) is read as
    `analyze DIR` reads it: one trace (a serving engine's profile folder of one worker rank and its API server's
    trace: the worker's trace with the front end's requests) gives a Trace, several ranks a Run.

    Read through the on-disk cache (STEPSCOPE_CACHE_DIR) like the command line and the app, so a notebook
    reopening a big trace maps it instead of parsing it; `cache=False` reads the file afresh. `model`: a preset
    name, model folder or config.json for a trace without run.json (as the CLI's --model); `batch`: sequences per
    step for a trace that does not say (as --batch).
    Raises stepscope.parsers.TraceError (or ValueError for a bad option) with a one-line reason."""
    from stepscope.analysis.front_door import NO_CACHE, USE_CACHE, OpenedRun, is_run_source, open_folder, open_trace

    options = AnalysisOptions.from_us(gap_threshold_us, step_regex=step_regex, batch=batch)
    policy = USE_CACHE if cache else NO_CACHE
    if is_run_source(path):
        opened = open_folder(path, options, model=model, cache=policy, name=name)
        return Run(opened) if isinstance(opened, OpenedRun) else Trace(opened)
    return Trace(open_trace(_single(path), options, model=model, cache=policy, name=name))


def _single(path: str | os.PathLike) -> str:
    """The one trace a folder or glob of one trace holds, or the path itself."""
    from stepscope.analysis.front_door import single_trace_of

    return single_trace_of(path)


@dataclass(frozen=True)
class Run:
    """The ranks of one multi-rank run opened by the front door: each rank a Trace, and the run across them."""

    opened: OpenedRun

    @property
    def report(self) -> dict:
        """The `analyze DIR --json` object: {"ranks": [...], "run": {...}} (DESIGN.md), equal to the CLI's."""
        return self.opened.report

    @property
    def ranks(self) -> list[Trace]:
        return [Trace(rank) for rank in self.opened.ranks]

    @property
    def run(self) -> dict:
        return self.report["run"]


def load_run(
    source: str | os.PathLike,
    *,
    gap_threshold_us: float = 1.0,
    step_regex: str | None = None,
    model: str | None = None,
    cache: bool = True,
) -> Run:
    """Read every rank of a run (a folder or glob of rank traces) through the front door, as `stepscope analyze
    DIR` does. Raises TraceError naming the file that could not be read."""
    from stepscope.analysis.front_door import NO_CACHE, USE_CACHE, open_run

    options = AnalysisOptions.from_us(gap_threshold_us, step_regex=step_regex)
    return Run(open_run(source, options, model=model, cache=USE_CACHE if cache else NO_CACHE))


def analyze(timeline: Timeline, *, gap_threshold_us: float = 1.0, step_regex: str | None = None) -> Analysis:
    """Steps, gaps, summary and findings of a Timeline already in memory (no run.json, no model: load() adds
    those for a file)."""
    return _analyze(timeline, AnalysisOptions.from_us(gap_threshold_us, step_regex=step_regex))


def compare(a: Trace, b: Trace) -> TraceComparison:
    """Trace b against baseline a, with the Compare page's metrics and sentence."""
    return TraceComparison(_compare(a.analysis, b.analysis, a.name, b.name), a, b)


def frames(trace: Trace) -> dict[str, pd.DataFrame]:
    """Every table as a DataFrame: events (the timeline), steps, gaps, top_kernels, findings, and memory (the
    trace's memory events: time, device, bytes, allocated, reserved; empty without profile_memory)."""
    columns = ["id", "severity", "title", "detail", "cost_us", "saving_us"]  # in the page's order (issue 44)
    findings = pd.DataFrame([[getattr(f, c) for c in columns] for f in trace.analysis.findings], columns=columns)
    return {
        "events": trace.timeline.events,
        "steps": trace.steps,
        "gaps": trace.gaps,
        "top_kernels": trace.analysis.top_kernels,
        "findings": findings,
        "memory": trace.timeline.memory if trace.timeline.memory is not None else pd.DataFrame(),
    }
