"""What analysis hands to the CLI and the app: plain frames and small records, no behaviour."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pandas as pd

from .summary import Summary

if TYPE_CHECKING:  # analysis.anatomy and analysis.roofline import this module
    from .anatomy import Anatomy
    from .model_proposal import ModelProposal
    from .roofline.compare import RooflineReport
    from .serving.request_list import RequestTable

STEP_COLUMNS = (
    "kind",  # prefill | decode | mixed | verify | draft | empty (DESIGN.md)
    "request",
    "index",
    "start_ns",
    "end_ns",
    "tokens",  # new token positions in the step over the whole batch (batch x per sequence), <NA> when unknown
    "batch",  # sequences in the step, <NA> when unknown
    "kernels",
    "launches",
    "launch_host_ns",  # host time spent inside launch calls
    "gpu_busy_ns",
    "gpu_idle_ns",
    "d2h_copies",
    "syncs",
    "label",  # the annotation or marker the step came from, "" when inferred
    "prefill_tokens",  # of the tokens, those of sequences still prefilling, <NA> when unknown
    "decode_sequences",  # sequences past their prompt, scoring one token each (more in a verify), <NA> when unknown
    "model",  # "draft": a draft model's forward (speculative decoding); "" otherwise
    "opens",  # requests that join in this step
    "accepted",  # in a verify step: draft tokens the target kept per sequence, <NA> when the trace does not show it
)
GAP_COLUMNS = ("start_ns", "end_ns", "dur_ns", "device", "placement", "step", "cause")
# placement: within step | between steps | outside generation; cause: launch | sync | other (analysis.gaps)


@dataclass(frozen=True)
class Segmentation:
    method: str  # the strategy that found the steps: "stepscope-markers", "host-forwards", ..., "none"
    confidence: float
    warnings: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()  # what decided the steps and their kinds, one line each


@dataclass(frozen=True)
class Finding:
    id: str
    severity: str  # info | warn | critical
    title: str
    detail: str
    evidence: dict[str, float] = field(default_factory=dict)
    # the time in the trace this finding accounts for (summed over the steps it concerns), None where it has no
    # time of its own (a comparison of phases, a roofline ratio); the JSON adds it as cost_us and cost_pct
    cost_us: float | None = None
    # the time range (ns, the trace's clock) its evidence lies in, where the finding knows it exactly (one call);
    # analysis.findings.finding_range finds the step for the others
    at_ns: tuple[int, int] | None = None
    # the time fixing it could recover at most (us): idle time a fix removes, time above a floor; None for a finding
    # that describes the run (a phase's share, a dominant category) rather than says what to change. Findings are
    # ranked by it (ranked() below); the JSON adds it as saving_us (DESIGN.md, 2026-12-04)
    saving_us: float | None = None

    @property
    def context(self) -> bool:
        """A descriptive finding (information, nothing to win): shown as a line of context, not as a finding."""
        return self.severity == "info" and self.saving_us is None


def _finite(value: float | None) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


SEVERITY_RANK = {"critical": 0, "warn": 1, "info": 2}


def ranked(findings) -> tuple[Finding, ...]:
    """The order every output lists findings in: critical, then warn, then info; within each the largest saving
    first, findings without one after (the costliest first among those); ties keep the order they were made in."""

    def key(f: Finding) -> tuple:
        saving, cost = _finite(f.saving_us), _finite(f.cost_us)
        return (SEVERITY_RANK.get(f.severity, 3), saving is None, -(saving or 0.0), -(cost or 0.0))

    return tuple(sorted(findings, key=key))


@dataclass(frozen=True)
class TraceFacts:
    """What ran, as far as the trace says (analysis.trace_facts): Compare warns when two traces differ in them."""

    device: str | None = None
    device_source: str | None = None  # deviceProperties | run.json | the identification's evidence
    engine: str | None = None  # vLLM | SGLang | HF transformers | Stepscope collector
    engine_source: str | None = None  # what decided it
    world_size: int = 1  # ranks of the torch.distributed job (Kineto's distributedInfo), 1 when not said


@dataclass(frozen=True)
class Analysis:
    # STEP_COLUMNS + token_ns, graph_launches, gpu_lead_ns, gpu_tail_ns (idle before the first device work and after
    # the last), lead_host_ns (the lead's part before the first launch call), itl_ns, outlier (left out of ITL)
    steps: pd.DataFrame
    gaps: pd.DataFrame  # GAP_COLUMNS, ordered by start
    summary: Summary  # headline figures; analysis.report picks the CLI contract's keys from it
    findings: tuple[Finding, ...]
    segmentation: Segmentation
    top_kernels: pd.DataFrame  # phase, short (readable name), name, count, total_ns, share_pct
    busy_intervals: dict[int, tuple] = field(default_factory=dict)  # device -> (starts_ns, ends_ns) arrays
    time_origin_ns: int = 0  # ts of the trace's first event, for relative plots
    anatomy: Anatomy | None = None  # inside each step: categories, layers, per-category roofline (analysis.anatomy)
    facts: TraceFacts = field(default_factory=TraceFacts)  # device and engine (analysis.trace_facts)
    roofline: RooflineReport | None = None  # expected vs measured per phase, when a model and device are known
    model_proposal: ModelProposal | None = None  # the model shape the trace shows (a guess: no figure reads it)
    requests: RequestTable | None = None  # the requests: how many (None: unknown, with why) and one row each

    def __post_init__(self) -> None:
        # every Analysis holds its findings ranked (also after dataclasses.replace adds some): the JSON, the app and
        # the reports list them in one order
        object.__setattr__(self, "findings", ranked(self.findings))
