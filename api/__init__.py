"""The notebook API: a few functions over the same code the CLI and the app run (see stepscope/__init__.py)."""

from __future__ import annotations

if "." not in __name__:  # imported by its bare folder name in a checkout: be the stepscope. module
    from stepscope._checkout import alias_this

    alias_this(__name__)

import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pandas as pd

from ..analysis import Analysis, AnalysisOptions
from ..analysis import analyze as _analyze
from ..analysis.compare import Comparison
from ..analysis.compare import compare as _compare
from ..parsers import Timeline


@dataclass(frozen=True)
class Trace:
    """One trace read and analysed: the Timeline (every event), the Analysis, and a name for tables."""

    name: str
    timeline: Timeline
    analysis: Analysis

    @cached_property
    def report(self) -> dict:
        """The analyze --json object (DESIGN.md's contract)."""
        from ..analysis.report import contract

        return contract(self.timeline, self.analysis)

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

    def html_report(self, path: str | os.PathLike, vs: Trace | None = None) -> Path:
        """Write the self-contained HTML report (plotly.js inside, opens offline); returns its path."""
        from ..exporters.report_html import ReportTrace, build_report, write_report

        traces = [ReportTrace(t.name, t.timeline, t.analysis, t.report) for t in (self, vs) if t is not None]
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
        from ..analysis.gate import evaluate_gates, parse_gates

        return evaluate_gates(parse_gates(exprs), self.a.analysis.summary, self.b.analysis.summary)


def _name(path: Path) -> str:
    stem = path.name.split(".")[0]
    return path.resolve().parent.name if stem == "trace" else stem


def load(
    path: str | os.PathLike,
    *,
    gap_threshold_us: float = 1.0,
    step_regex: str | None = None,
    name: str | None = None,
    cache: bool = True,
) -> Trace:
    """Read any trace Stepscope reads (Kineto JSON, Perfetto, nsys SQLite) and analyse it.

    Read through the on-disk cache (STEPSCOPE_CACHE_DIR) like the command line and the app, so a notebook
    reopening a big trace maps it instead of parsing it; `cache=False` reads the file afresh.
    Raises stepscope.parsers.TraceError with a one-line reason for a file it cannot read."""
    from ..trace_cache.timelines import load_trace_cached

    path = Path(path)
    timeline = load_trace_cached(path, use_cache=cache)
    return Trace(
        name or _name(path), timeline, analyze(timeline, gap_threshold_us=gap_threshold_us, step_regex=step_regex)
    )


def analyze(timeline: Timeline, *, gap_threshold_us: float = 1.0, step_regex: str | None = None) -> Analysis:
    """Steps, gaps, summary and findings of a Timeline (stepscope.parsers.load_trace gives one)."""
    options = AnalysisOptions(gap_threshold_ns=int(gap_threshold_us * 1000), step_regex=step_regex)
    return _analyze(timeline, options)


def compare(a: Trace, b: Trace) -> TraceComparison:
    """Trace b against baseline a, with the Compare page's metrics and sentence."""
    return TraceComparison(_compare(a.analysis, b.analysis, a.name, b.name), a, b)


def frames(trace: Trace) -> dict[str, pd.DataFrame]:
    """Every table as a DataFrame: events (the timeline), steps, gaps, top_kernels, findings."""
    findings = pd.DataFrame(
        [{"id": f.id, "severity": f.severity, "title": f.title, "detail": f.detail} for f in trace.analysis.findings],
        columns=["id", "severity", "title", "detail"],
    )
    return {
        "events": trace.timeline.events,
        "steps": trace.steps,
        "gaps": trace.gaps,
        "top_kernels": trace.analysis.top_kernels,
        "findings": findings,
    }
