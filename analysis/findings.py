"""Findings that say what to change, each carrying the numbers it rests on."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .composition import COSTLY_RATIO, batching_cost
from .model import Finding
from .options import AnalysisOptions
from .summary import Summary


def make_findings(
    steps: pd.DataFrame, gaps: pd.DataFrame, summary: Summary, outliers: np.ndarray, options: AnalysisOptions
) -> list[Finding]:
    out: list[Finding] = []
    decode = steps[(steps["kind"] == "decode").to_numpy() & ~outliers] if len(steps) else steps
    if len(decode):
        out += _host_bound(decode, gaps, summary, options)
        out += _sync_every_step(decode, summary)
        out += _launch_overhead(decode, summary)
    if outliers.any():
        out.append(_outliers(steps, outliers, summary))
    if len(steps):
        out += _dominance(summary)
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
            f"A mixed step takes {cost['mixed_step_ms']:.2f} ms against {cost['decode_step_ms']:.2f} ms for a "
            f"decode-only step (medians): {who} wait {cost['wait_ms']:.2f} ms longer for their token each time. A "
            "smaller prefill chunk (token budget per step) spreads the cost; separate prefill and decode workers "
            "remove it.",
            {k: float(v) for k, v in cost.items() if v is not None},
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
            f"{spec['accepted_tokens_per_step']:g} accepted per step (median), so a verify cycle of {step_ms:.2f} ms "
            f"emits a token every {per_token:.2f} ms."
        )
        title = f"Speculative decoding: {per_token:.2f} ms per emitted token"
    else:
        lo, hi = spec["itl_ms_range"]["min"], spec["itl_ms_range"]["max"]
        detail = (
            f"{spec['verify_steps']} verify steps score {spec['draft_tokens_per_verify']:g} draft token(s) each; the "
            f"trace does not show how many were accepted, so a verify cycle of {step_ms:.2f} ms means {lo:.2f} to "
            f"{hi:.2f} ms per emitted token."
        )
        title = f"Speculative decoding: {lo:.2f}-{hi:.2f} ms per emitted token (acceptance unknown)"
    if spec["draft_steps"]:
        detail += f" {spec['draft_steps']} draft-model forwards run between them."
    return [Finding("speculative-decoding", "info", title, detail, {"verify_step_ms": step_ms})]


def _host_bound(decode: pd.DataFrame, gaps: pd.DataFrame, summary: Summary, options: AnalysisOptions) -> list[Finding]:
    span = (decode["end_ns"] - decode["start_ns"]).to_numpy().astype(float)
    idle_share = float(np.median(decode["gpu_idle_ns"].to_numpy() / np.maximum(span, 1)))
    if idle_share <= options.host_bound_idle_share:
        return []
    step_us, idle_us = float(np.median(span) / 1e3), float(decode["gpu_idle_ns"].median() / 1e3)
    if not summary.on_gpu:
        return [
            Finding(
                "host-overhead",
                "warn",
                f"No op runs for {idle_share:.0%} of each decode step",
                f"Median decode step {step_us:.0f} us, of which {idle_us:.0f} us has no host op running: Python and "
                "dispatch overhead between ops. torch.compile (inductor) fuses ops and removes most of it.",
                {"idle_share": idle_share, "step_us": step_us, "idle_us": idle_us},
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
            f"Capturing the decode step as a CUDA graph (or torch.compile mode='reduce-overhead') could save about "
            f"{launch_us:.0f} us per token ({launch_us / step_us:.0%} of the step)."
        )
    elif sync_us >= other_us:
        advice = "Most of it is spent waiting on synchronisation: keep sampling and stop checks on the GPU."
    else:
        advice = "Most of it has no launch or sync behind it: look at the host work between kernels."
    return [
        Finding(
            "host-bound-decode",
            "critical" if idle_share > 0.5 else "warn",
            f"Decode is host-bound: the GPU is idle {idle_share:.0%} of each decode step",
            f"Median decode step {step_us:.0f} us with {idle_us:.0f} us of GPU idle time: {launch_us:.0f} us waiting "
            f"for the next launch, {sync_us:.0f} us on syncs, {other_us:.0f} us other (medians). {advice}",
            {
                "idle_share": idle_share,
                "step_us": step_us,
                "idle_us": idle_us,
                "graph_saving_us": launch_us,
                "sync_idle_us": sync_us,
                "other_idle_us": other_us,
            },
        )
    ]


def _sync_every_step(decode: pd.DataFrame, summary: Summary) -> list[Finding]:
    if not summary.on_gpu:
        return []
    with_sync = int(((decode["d2h_copies"] > 0) | (decode["syncs"] > 0)).sum())
    if with_sync < max(1, 0.9 * len(decode)):
        return []
    return [
        Finding(
            "sync-every-step",
            "warn",
            "A device-to-host copy or synchronize in every decode step",
            f"{with_sync} of {len(decode)} decode steps copy to the host or synchronize (median "
            f"{summary.d2h_per_decode_step:.0f} D2H copies, {summary.syncs_per_decode_step:.0f} sync calls per "
            "step): sampling or stop checks leave the GPU and the host waits each token. Keep sampling and stop "
            "checks on the GPU and read tokens back asynchronously.",
            {"steps_with_sync": with_sync, "decode_steps": len(decode)},
        )
    ]


def _launch_overhead(decode: pd.DataFrame, summary: Summary) -> list[Finding]:
    launches = float(decode["launches"].median())
    mean_call_us = summary.launch_call_mean_us
    if not launches or not mean_call_us:
        return []
    step_us = float((decode["end_ns"] - decode["start_ns"]).median() / 1e3)
    cost_us = launches * mean_call_us
    share = cost_us / step_us if step_us else 0.0
    return [
        Finding(
            "launch-overhead",
            "warn" if share > 0.2 else "info",
            f"Launch calls take {share:.0%} of each decode step",
            f"{launches:.0f} launches per decode step x {mean_call_us:.1f} us mean launch call = {cost_us:.0f} us of "
            f"host time per {step_us:.0f} us step. "
            + (
                "One graph launch per step would remove nearly all of it."
                if launches > 10 and not decode["graph_launches"].median()
                else ""
            ),
            {"launches": launches, "launch_call_us": mean_call_us, "cost_us": cost_us, "share": share},
        )
    ]


def _outliers(steps: pd.DataFrame, outliers: np.ndarray, summary: Summary) -> Finding:
    rows = steps[outliers]
    first = rows.iloc[0]
    return Finding(
        "itl-outliers",
        "info",
        f"{len(rows)} slow decode step(s) left out of the ITL figures",
        f"Steps slower than the outlier limit (first: request {first['request']}, index {first['index']}, "
        f"{(first['end_ns'] - first['start_ns']) / 1e3:.0f} us vs a median of "
        f"{summary.decode_step_us or 0:.0f} us): "
        "warm-up, compilation or a stall. They still appear in the step table and timeline.",
        {"outliers": len(rows)},
    )


def _dominance(summary: Summary) -> list[Finding]:
    pre, dec = summary.prefill_ms_total, summary.decode_ms_total
    total = pre + dec
    if total <= 0:
        return []
    if dec >= pre:
        return [
            Finding(
                "decode-dominated",
                "info",
                f"Decode-dominated: decode is {dec / total:.0%} of generation time",
                f"Prefill {pre:.1f} ms, decode {dec:.1f} ms. ITL drives the user's experience here: cut per-token "
                "overhead (launches, syncs) and memory traffic per step.",
                {"prefill_ms": pre, "decode_ms": dec},
            )
        ]
    return [
        Finding(
            "prefill-dominated",
            "info",
            f"Prefill-dominated: prefill is {pre / total:.0%} of generation time",
            f"Prefill {pre:.1f} ms, decode {dec:.1f} ms. TTFT drives the experience here: prefill is usually compute "
            "bound, so look at GEMM efficiency, attention kernels and prompt caching.",
            {"prefill_ms": pre, "decode_ms": dec},
        )
    ]
