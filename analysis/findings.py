"""Findings that say what to change, each carrying the numbers it rests on."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .composition import COSTLY_RATIO, batching_cost
from .model import Finding
from .number_format import format_value
from .options import AnalysisOptions
from .step_figures import main_steps
from .summary import Summary

# A finding is given only when it pays its way (DESIGN.md's finding table)
SYNC_SHARE_SHOWN = 0.01  # GPU idle behind syncs below this share of the steps is no finding
LAUNCH_SHARE_SHOWN = 0.05  # launch calls below this share of a step are no finding (they cost nothing to speak of)
LEAD_SHARE_SHOWN = 0.10  # a lead below this share of the step is no finding
LEAD_MIN_US = 100.0  # nor one below this


def make_findings(
    steps: pd.DataFrame, gaps: pd.DataFrame, summary: Summary, outliers: np.ndarray, options: AnalysisOptions
) -> list[Finding]:
    """Findings on the main kind's steps (decode when there is decode, else mixed, verify, prefill:
    analysis.step_figures), each priced by the time it accounts for (Finding.cost_us)."""
    out: list[Finding] = []
    kind, main = main_steps(steps, outliers) if len(steps) else (None, steps)
    if kind is not None and len(main):
        lead = gpu_lead(main, kind, summary.on_gpu)
        out += _host_bound(main, gaps, summary, options, kind, without_lead=bool(lead))
        out += lead
        out += _sync_every_step(main, gaps, summary, kind)
        out += _launch_overhead(main, summary, kind)
    if outliers.any():
        out.append(_outliers(steps, outliers, summary))
    if len(steps):
        out += _dominance(summary, steps)
        out += _batching_cost(steps)
        out += _speculative_itl(summary)
    return out


def _batching_cost(steps: pd.DataFrame) -> list[Finding]:
    """What co-scheduled prefill chunks cost the decoding sequences (analysis.composition.batching_cost)."""
    cost = batching_cost(steps)
    if cost is None or cost["ratio"] is None or cost["ratio"] < COSTLY_RATIO:
        return []
    waiting = cost["decoding_sequences"]
    who = f"the {waiting:.0f} decoding sequences" if waiting is not None else "the decoding sequences"
    return [
        Finding(
            "batching-cost",
            "warn" if cost["ratio"] >= 2 else "info",
            f"{cost['mixed_steps']} of {cost['steps']} steps carry a prefill chunk; they take {cost['ratio']:.1f}x a "
            "decode-only step",
            f"A mixed step takes {_t(cost['mixed_step_ms'] * 1e3)} against {_t(cost['decode_step_ms'] * 1e3)} for a "
            f"decode-only step (medians): {who} wait {_t(cost['wait_ms'] * 1e3)} longer for their token each time. A "
            "smaller prefill chunk (token budget per step) spreads the cost; separate prefill and decode workers "
            "remove it.",
            {k: float(v) for k, v in cost.items() if v is not None},
            cost_us=float(cost["wait_ms"]) * 1e3 * int(cost["mixed_steps"]),  # the mixed steps' time above decode
            saving_us=float(cost["wait_ms"]) * 1e3 * int(cost["mixed_steps"]),
        )
    ]


def _speculative_itl(summary: Summary) -> list[Finding]:
    """Speculative decoding: what a verify step costs and what it implies per emitted token."""
    spec = summary.speculative
    if not spec or not spec["verify_steps"] or spec["verify_step_ms"] is None:
        return []
    step_ms = spec["verify_step_ms"]["p50"]
    if spec["itl_ms_per_token"] is not None:
        per_token = spec["itl_ms_per_token"]["p50"]
        detail = (
            f"{spec['verify_steps']} verify steps score {spec['draft_tokens_per_verify']:g} draft token(s) each; "
            f"{spec['accepted_tokens_per_step']:g} accepted per step (median), so a verify cycle of "
            f"{_t(step_ms * 1e3)} emits a token every {_t(per_token * 1e3)}."
        )
        title = f"Speculative decoding: {_t(per_token * 1e3)} per emitted token"
    else:
        lo, hi = spec["itl_ms_range"]["min"], spec["itl_ms_range"]["max"]
        detail = (
            f"{spec['verify_steps']} verify steps score {spec['draft_tokens_per_verify']:g} draft token(s) each; the "
            f"trace does not show how many were accepted, so a verify cycle of {_t(step_ms * 1e3)} means "
            f"{_t(lo * 1e3)} to {_t(hi * 1e3)} per emitted token."
        )
        title = f"Speculative decoding: {_t(lo * 1e3)} to {_t(hi * 1e3)} per emitted token (acceptance unknown)"
    if spec["draft_steps"]:
        detail += f" {spec['draft_steps']} draft-model forwards run between them."
    return [Finding("speculative-decoding", "info", title, detail, {"verify_step_ms": step_ms})]


def _host_bound(
    decode: pd.DataFrame,
    gaps: pd.DataFrame,
    summary: Summary,
    options: AnalysisOptions,
    kind: str = "decode",
    without_lead: bool = False,
) -> list[Finding]:
    """Idle time of the steps; `without_lead`: the lead before their first device work left out (a gpu-lead
    finding prices it)."""
    span = (decode["end_ns"] - decode["start_ns"]).to_numpy().astype(float)
    lead = decode.get("gpu_lead_ns", 0) if without_lead else 0
    idle = (decode["gpu_idle_ns"] - lead).to_numpy().astype(float)
    idle_share = float(np.median(idle / np.maximum(span, 1)))
    if idle_share <= options.host_bound_idle_share:
        return []
    step_us, idle_us = float(np.median(span) / 1e3), float(np.median(idle) / 1e3)
    cost_us = float(idle.sum() / 1e3)
    if not summary.on_gpu:
        return [
            Finding(
                "host-overhead",
                "warn",
                f"No op runs for {idle_share:.0%} of each {kind} step",
                f"Median {kind} step {_t(step_us)}, of which {_t(idle_us)} has no host op running: Python and "
                "dispatch overhead between ops. torch.compile (inductor) fuses ops and removes most of it.",
                {"idle_share": idle_share, "step_us": step_us, "idle_us": idle_us},
                cost_us=cost_us,
                saving_us=cost_us,
            )
        ]
    in_decode = gaps[gaps["step"].isin(decode.index)]
    by_cause = in_decode.pivot_table(index="step", columns="cause", values="dur_ns", aggfunc="sum", fill_value=0)
    by_cause = by_cause.reindex(index=decode.index, columns=["launch", "sync", "other"], fill_value=0)
    launch_us, sync_us, other_us = (float(by_cause[c].median() / 1e3) for c in ("launch", "sync", "other"))
    graphs = float(decode["graph_launches"].median())
    if launch_us >= max(sync_us, other_us) and graphs:
        advice = (
            f"The step already replays {graphs:.0f} graph(s): the idle time is the host reaching or issuing the "
            "launches (a slow first replay, host contention, or eager work between graph pieces)."
        )
    elif launch_us >= max(sync_us, other_us):
        advice = (
            f"Capturing the {kind} step as a CUDA graph (or torch.compile mode='reduce-overhead') could save about "
            f"{_t(launch_us)} per step ({launch_us / step_us:.0%} of it)."
        )
    elif sync_us >= other_us:
        advice = "Most of it is spent waiting on synchronisation: keep sampling and stop checks on the GPU."
    else:
        advice = "Most of it has no launch or sync behind it: look at the host work between kernels."
    return [
        Finding(
            f"host-bound-{kind}",
            "critical" if idle_share > 0.5 else "warn",
            f"{kind.capitalize()} is host-bound: the GPU is idle {idle_share:.0%} of each {kind} step",
            f"Median {kind} step {_t(step_us)} with {_t(idle_us)} of GPU idle time"
            + (" after its first kernel: " if without_lead else ": ")
            + f"{_t(launch_us)} waiting for the next launch, {_t(sync_us)} on syncs, {_t(other_us)} other "
            f"(medians). {advice}",
            {
                "idle_share": idle_share,
                "step_us": step_us,
                "idle_us": idle_us,
                "graph_saving_us": launch_us,
                "sync_idle_us": sync_us,
                "other_idle_us": other_us,
            },
            cost_us=cost_us,
            saving_us=cost_us,  # the idle time a fix removes
        )
    ]


def _sync_every_step(decode: pd.DataFrame, gaps: pd.DataFrame, summary: Summary, kind: str = "decode") -> list[Finding]:
    """Priced by the idle gaps the syncs cause in those steps (cause "sync")."""
    if not summary.on_gpu:
        return []
    with_sync = int(((decode["d2h_copies"] > 0) | (decode["syncs"] > 0)).sum())
    if with_sync < max(1, 0.9 * len(decode)):
        return []
    d2h, syncs = decode["d2h_copies"].median(), decode["syncs"].median()
    waited = gaps[gaps["step"].isin(decode.index) & (gaps["cause"] == "sync")]["dur_ns"] if len(gaps) else gaps
    cost_us = float(waited.sum() / 1e3) if len(waited) else 0.0
    span_us = float((decode["end_ns"] - decode["start_ns"]).sum() / 1e3)
    if cost_us < SYNC_SHARE_SHOWN * span_us:  # the host waits, but the GPU hardly idles for it: no time to win
        return []
    return [
        Finding(
            "sync-every-step",
            "warn",
            f"A device-to-host copy or synchronize in every {kind} step",
            f"{with_sync} of {len(decode)} {kind} steps copy to the host or synchronize (median "
            f"{d2h:.0f} D2H copies, {syncs:.0f} sync calls per step; {_t(cost_us)} of GPU idle time while "
            "the host waited in them): sampling or stop checks leave the GPU and the host waits each token. Keep "
            "sampling and stop checks on the GPU and read tokens back asynchronously.",
            {"steps_with_sync": with_sync, "decode_steps": len(decode)},
            cost_us=cost_us,
            saving_us=cost_us,  # the GPU's wait behind the syncs
        )
    ]


def _launch_overhead(decode: pd.DataFrame, summary: Summary, kind: str = "decode") -> list[Finding]:
    launches = float(decode["launches"].median())
    mean_call_us = summary.launch_call_mean_us
    if not launches or not mean_call_us:
        return []
    step_us = float((decode["end_ns"] - decode["start_ns"]).median() / 1e3)
    per_step_us = launches * mean_call_us
    share = per_step_us / step_us if step_us else 0.0
    if share < LAUNCH_SHARE_SHOWN:
        return []
    return [
        Finding(
            "launch-overhead",
            "warn" if share > 0.2 else "info",
            f"Launch calls take {share:.0%} of each {kind} step",
            f"{launches:.0f} launches per {kind} step x {_t(mean_call_us)} mean launch call = {_t(per_step_us)} "
            f"of host time per {_t(step_us)} step. "
            + (
                "One graph launch per step would remove nearly all of it."
                if launches > 10 and not decode["graph_launches"].median()
                else ""
            ),
            {"launches": launches, "launch_call_us": mean_call_us, "cost_us": per_step_us, "share": share},
            cost_us=per_step_us * len(decode),
            # host time spent launching is won back only where the GPU waited for it: at most the steps' idle time
            saving_us=min(per_step_us * len(decode), float(decode["gpu_idle_ns"].sum()) / 1e3),
        )
    ]


def gpu_lead(steps: pd.DataFrame, kind: str, on_gpu: bool = True) -> list[Finding]:
    """The device idle from a step's start to its first work (the lead), when it is a large part of the step:
    split into the host's time before its first launch call (preparing inputs) and the time from that launch to
    the first kernel (queued behind earlier work, a slow graph upload or a blocking call)."""
    if "gpu_lead_ns" not in steps or not len(steps):
        return []
    span = (steps["end_ns"] - steps["start_ns"]).to_numpy(dtype=float)
    lead = steps["gpu_lead_ns"].to_numpy(dtype=float)
    lead_us, step_us = float(np.median(lead) / 1e3), float(np.median(span) / 1e3)
    share = float(np.median(lead / np.maximum(span, 1)))
    if share < LEAD_SHARE_SHOWN or lead_us < LEAD_MIN_US:
        return []
    host = steps["lead_host_ns"].to_numpy(dtype=float) if "lead_host_ns" in steps else lead
    host_us = float(np.median(host) / 1e3)
    device = "The GPU" if on_gpu else "The first op"
    each = "each" if len(steps) > 1 else "the"
    if not on_gpu or host_us >= 0.5 * lead_us:
        cause = (
            f"{_t(host_us)} of it before the step's first launch call: host preparation (input preparation, "
            "scheduling, Python) that nothing overlaps. Overlap it with the previous step's GPU work "
            "(asynchronous scheduling) or move it off the critical path."
        )
    else:
        cause = (
            f"the host's first launch call comes {_t(host_us)} in, then the GPU waits {_t(lead_us - host_us)} "
            "more: the launch was queued behind work issued earlier (on the first step of a trace, work from "
            "before the profiler started is not recorded), a graph was uploaded on its first replay, or the launch "
            "blocked."
        )
    recorded = "work from before the profiler started" in cause
    first = " The first step of a trace may lead because of work the profiler did not record." if not recorded else ""
    first = first if each == "the" else ""
    return [
        Finding(
            f"gpu-lead-{kind}",
            "warn" if share >= 0.25 else "info",
            f"{device} starts {_t(lead_us)} after {each} {kind} step begins ({share:.0%} of it)",
            f"Median {kind} step {_t(step_us)}, of which the first {_t(lead_us)} has no device work: {cause}{first}",
            {"lead_us": lead_us, "lead_host_us": host_us, "step_us": step_us, "share": share},
            cost_us=float(lead.sum() / 1e3),
            saving_us=float(lead.sum() / 1e3),
        )
    ]


def _t(us: float | None) -> str:
    """A time in a finding's words as every output writes numbers (analysis.number_format): "25.8 ms", "412 us"."""
    return format_value(us, "us")


def _outliers(steps: pd.DataFrame, outliers: np.ndarray, summary: Summary) -> Finding:
    rows = steps[outliers]
    first = rows.iloc[0]
    above = float(((rows["end_ns"] - rows["start_ns"]).sum() / 1e3) - len(rows) * (summary.decode_step_us or 0))
    return Finding(
        "itl-outliers",
        "info",
        f"{len(rows)} slow decode step(s) left out of the ITL figures",
        f"Steps slower than the outlier limit (first: request {first['request']}, index {first['index']}, "
        f"{_t((first['end_ns'] - first['start_ns']) / 1e3)} vs a median of "
        f"{_t(summary.decode_step_us)}): "
        "warm-up, compilation or a stall. They still appear in the step table and timeline.",
        {"outliers": len(rows)},
        cost_us=above,
        saving_us=max(above, 0.0),  # their time above a median step: what warming up before the profile wins
    )


def _dominance(summary: Summary, steps: pd.DataFrame) -> list[Finding]:
    """Which phase sets the time, when both are in the trace (a trace of one phase is 100% that phase: no finding):
    a description of the run, not a fix (no saving). The phase after prefill is named by what the trace has: plain
    decode steps, or a speculative run's verify (and draft) steps when they take most of it."""
    pre, dec = summary.prefill_ms_total, summary.decode_ms_total
    total = pre + dec
    if total <= 0 or not (pre > 0 and dec > 0):
        return []
    evidence = {"prefill_ms": pre, "decode_ms": dec}
    if dec >= pre:
        kind = steps["kind"].to_numpy()
        span_ms = (steps["end_ns"] - steps["start_ns"]).to_numpy(dtype=float) / 1e6
        plain = float(span_ms[kind == "decode"].sum())
        verify = (kind == "verify").any()
        if not verify or plain >= dec - plain:
            return [
                Finding(
                    "decode-dominated",
                    "info",
                    f"Decode-dominated: decode is {dec / total:.0%} of generation time",
                    f"Prefill {_t(pre * 1e3)}, decode {_t(dec * 1e3)}. ITL drives the user's experience here: cut "
                    "per-token overhead (launches, syncs) and memory traffic per step.",
                    evidence,
                    cost_us=dec * 1e3,
                )
            ]
        return [
            Finding(
                "verify-dominated",
                "info",
                f"Verify-dominated: verify and draft steps are {dec / total:.0%} of generation time",
                f"Prefill {_t(pre * 1e3)}, speculative decoding {_t(dec * 1e3)} (verify and draft steps"
                + (f", {_t(plain * 1e3)} of plain decode steps among them" if plain else "")
                + "). The time per emitted token drives the user's experience here: it rests on the verify step's "
                "time, the draft model's and how many draft tokens are accepted.",
                evidence,
                cost_us=dec * 1e3,
            )
        ]
    return [
        Finding(
            "prefill-dominated",
            "info",
            f"Prefill-dominated: prefill is {pre / total:.0%} of generation time",
            f"Prefill {_t(pre * 1e3)}, decode {_t(dec * 1e3)}. TTFT drives the experience here: prefill is usually "
            "compute bound, so look at GEMM efficiency, attention kernels and prompt caching.",
            evidence,
            cost_us=pre * 1e3,
        )
    ]


# --- Where a finding's evidence lies: the app's "Zoom" and the report point there.

_ANATOMY_STEP = ("category-share", "category-dominant", "category-roofline")
_PHASE_OF = {"decode-dominated": "decode", "prefill-dominated": "prefill", "verify-dominated": "verify"}


def finding_range(
    finding: Finding, steps: pd.DataFrame, anatomy_step: int | None = None, gaps: pd.DataFrame | None = None
) -> tuple[int, int] | None:
    """The time range (ns) a finding points at: its own `at_ns` (one call), else the step its evidence names, else
    the step it reads (the anatomy's step for category findings; the typical step of the kind it names for step
    findings: the one of median span), the slowest outlier, or a phase's first to last step. None where a finding
    is about no place in the run (memory over the whole run, ranks). With `gaps` (issue 43: zoom to the evidence),
    a finding about idle time points at the longest gap of its cause in the typical step, not the whole step."""
    if finding.at_ns is not None:
        return finding.at_ns
    if not len(steps):
        return None
    step = finding.evidence.get("step")
    if step is not None and 0 <= int(step) < len(steps):
        return _step_range(steps, int(step))
    fid = finding.id
    if fid in _ANATOMY_STEP and anatomy_step is not None and 0 <= anatomy_step < len(steps):
        return _step_range(steps, anatomy_step)
    if fid in _PHASE_OF:
        rows = steps[steps["kind"] == _PHASE_OF[fid]]
        return (int(rows["start_ns"].min()), int(rows["end_ns"].max())) if len(rows) else None
    if fid == "itl-outliers" and "outlier" in steps:
        rows = steps[steps["outlier"].astype(bool)]
        if len(rows):
            return _step_range(steps, int((rows["end_ns"] - rows["start_ns"]).idxmax()))
    kind = _kind_named(fid, steps)
    if kind is None:
        return None
    rows = steps[steps["kind"] == kind]
    span = rows["end_ns"] - rows["start_ns"]
    typical = int((span - span.median()).abs().idxmin())
    if fid.startswith("gpu-lead-") and "gpu_lead_ns" in steps:  # the lead itself: the step's start to its first work
        start = int(steps["start_ns"].iloc[typical])
        return start, start + max(int(steps["gpu_lead_ns"].iloc[typical]), 1)
    key = "host-bound" if fid.startswith("host-bound") else fid
    gap = _longest_gap(gaps, typical, _GAP_CAUSE[key]) if key in _GAP_CAUSE else None
    return gap if gap is not None else _step_range(steps, typical)


# which gaps a finding about idle time points at: its cause (None: any cause)
_GAP_CAUSE = {"host-bound": None, "host-overhead": None, "sync-every-step": "sync", "launch-overhead": "launch"}


def _longest_gap(gaps: pd.DataFrame | None, step: int, cause: str | None) -> tuple[int, int] | None:
    """The longest gap (of `cause`, when given) in step `step`: the stall a Zoom outlines."""
    if gaps is None or not len(gaps) or "step" not in gaps:
        return None
    part = gaps[gaps["step"].to_numpy() == step]
    if cause is not None:
        part = part[part["cause"].astype(str).to_numpy() == cause]
    if not len(part):
        return None
    row = part.loc[part["dur_ns"].idxmax()]
    return int(row["start_ns"]), int(row["end_ns"])


def _step_range(steps: pd.DataFrame, row: int) -> tuple[int, int]:
    return int(steps["start_ns"].iloc[row]), int(steps["end_ns"].iloc[row])


def _kind_named(fid: str, steps: pd.DataFrame) -> str | None:
    """The step kind a finding id is about: its suffix (host-bound-decode, roofline-mixed), the verify steps of the
    speculative finding, the mixed steps of batching-cost, else the main kind (sync-every-step, launch-overhead)."""
    kinds = set(steps["kind"].astype(str))
    suffix = fid.rsplit("-", 1)[-1]
    if suffix in kinds:
        return suffix
    wanted = {"speculative-decoding": "verify", "batching-cost": "mixed"}.get(fid)
    if wanted in kinds:
        return wanted
    if fid in ("sync-every-step", "launch-overhead", "host-overhead"):
        kind, _ = main_steps(steps, np.zeros(len(steps), dtype=bool))
        return kind
    return None
