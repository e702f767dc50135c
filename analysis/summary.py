"""Headline figures: TTFT, ITL, throughput, busy share and medians per decode step.

`Summary` is the typed record every output reads (the JSON contract, the app's cards, Compare, the
text report); which of its fields the CLI's JSON carries is marked on the field (`CONTRACT`), so a
new figure is one field here plus, when it is a metric, one entry in analysis/metrics.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np
import pandas as pd

from .activity import Activity, busy_union, covered_time
from .speculative import speculative_summary
from .step_figures import step_figures

CONTRACT = {"contract": True}  # field metadata: the field is a key of the CLI JSON's "summary" object


@dataclass(frozen=True)
class RooflineSummary:
    """Expected vs measured per phase (analysis.roofline); phase figures None where the trace has no such phase."""

    roofline_hardware: str
    roofline_memory_gbps: float
    roofline_tflops: float
    kv_bytes_per_token: int
    compute_bound_prompt_tokens: int | None
    decode_idle_share: float | None  # median share of a decode step with nothing running on the device
    prefill_expected_ms: float | None = None
    prefill_measured_ms: float | None = None
    prefill_roofline_pct: float | None = None
    prefill_bound: str | None = None  # memory | compute
    prefill_bytes: int | None = None
    prefill_flops: int | None = None
    decode_expected_ms: float | None = None
    decode_measured_ms: float | None = None
    decode_roofline_pct: float | None = None
    decode_bound: str | None = None
    decode_bytes: int | None = None
    decode_flops: int | None = None
    model: str | None = None  # the model shape's name the figures are for
    # against the GPU window (a step's first device work to its last) as well as its span; mixed steps (engine
    # annotations state their batch)
    prefill_window_pct: float | None = None
    decode_window_pct: float | None = None
    mixed_expected_ms: float | None = None
    mixed_measured_ms: float | None = None
    mixed_roofline_pct: float | None = None
    mixed_window_pct: float | None = None
    mixed_bound: str | None = None


@dataclass(frozen=True)
class MemorySummary:
    """Memory over the run, of the device that ran the model (analysis.memory); the model's figures are set by
    analysis.memory_model. Bytes unless named; both `*_per_token` figures are per decode step of the whole batch
    (one new position in every sequence). The JSON contract's `summary.memory` (DESIGN.md)."""

    device: str  # "cuda:0", "cpu": the GPU on GPU traces, the CPU on CPU-only traces
    events: int  # memory events of that device in the trace
    peak_allocated_bytes: int | None  # the largest total allocated the trace shows
    peak_reserved_bytes: int | None  # None where the device has no reserve (CPU) or the trace does not say
    kv_growth_bytes_per_token: float | None = None  # measured: robust slope of step-end allocations
    kv_growth_steps: int = 0  # decode steps the slope was measured over
    transient_bytes_per_decode_step: float | None = None  # median of a decode step's peak above what it keeps
    expected_kv_bytes_per_token: int | None = None  # 2 x layers x kv_heads x head_dim x dtype bytes x batch
    expected_weights_bytes: int | None = None  # parameters x dtype bytes
    kv_tokens_capacity: int | None = None  # tokens of KV (per sequence) that fit beside the weights
    device_memory_bytes: int | None = None  # the device's size: deviceProperties totalGlobalMem, or the GPU table
    resident_bytes: int | None = None  # allocated when the first step starts (weights and all, on a GPU)
    batch: int | None = None  # sequences per decode step the per-token figures are for
    kv_dtype_bytes: int | None = None  # bytes per element the expected KV assumes
    phases: dict[str, dict[str, int | None]] = field(default_factory=dict)  # kind -> peak allocated / reserved
    requests: list[dict[str, object]] = field(default_factory=list)  # allocated before and after each request
    devices: list[dict[str, object]] = field(default_factory=list)  # the other devices: peak allocated / reserved
    basis: str = ""  # how the KV growth was measured, and how sure it is
    notes: tuple[str, ...] = ()  # what was assumed (device chosen, totals counted, dtype, batch)


@dataclass(frozen=True)
class Summary:
    """One trace's headline figures. Defaults describe a trace with no steps (and make test records short)."""

    prefill_steps: int = field(default=0, metadata=CONTRACT)
    decode_steps: int = field(default=0, metadata=CONTRACT)
    ttft_ms: float | None = field(default=None, metadata=CONTRACT)  # median over requests
    itl_ms: dict[str, float] | None = field(default=None, metadata=CONTRACT)  # p50, p90, p99, mean, max
    decode_tokens_per_s: float | None = field(default=None, metadata=CONTRACT)
    gpu_busy_pct: float | None = field(default=None, metadata=CONTRACT)
    kernels_per_decode_step: float | None = field(default=None, metadata=CONTRACT)
    launches_per_decode_step: float | None = field(default=None, metadata=CONTRACT)
    gpu_idle_per_decode_step_us: float | None = field(default=None, metadata=CONTRACT)
    mixed_steps: int = field(default=0, metadata=CONTRACT)  # steps that decode some sequences and prefill others
    ttft_ms_by_request: dict[int, float] = field(default_factory=dict)
    itl_outliers: int = 0  # decode steps left out of the ITL figures
    decode_rate_from: str | None = None  # what decode_tokens_per_s was computed from
    decode_step_us: float | None = None
    launch_call_mean_us: float | None = None
    d2h_per_decode_step: float | None = None
    syncs_per_decode_step: float | None = None
    prefill_ms_total: float = 0.0
    decode_ms_total: float = 0.0  # decode steps, and a speculative run's verify and draft steps
    batch: int | None = None
    on_gpu: bool = True  # False: a CPU-only trace, host ops stand in for kernels
    roofline: RooflineSummary | None = None  # set by analysis.roofline.with_roofline
    memory: MemorySummary | None = None  # set by analysis.memory.with_memory; None without memory events
    verify_steps: int = field(default=0, metadata=CONTRACT)  # target forwards scoring draft tokens
    draft_steps: int = field(default=0, metadata=CONTRACT)  # a draft model's forwards
    speculative: dict | None = field(default=None, metadata=CONTRACT)  # analysis.speculative; None: none in the trace
    # Per-step figures of the main kind (analysis.step_figures): decode when there is decode, else mixed, verify,
    # prefill, ...; medians over those steps (ITL outliers left out), tokens/s as their tokens over their time.
    step_kind: str | None = field(default=None, metadata=CONTRACT)
    steps_of_kind: int = field(default=0, metadata=CONTRACT)
    step_ms: float | None = field(default=None, metadata=CONTRACT)
    tokens_per_step: float | None = field(default=None, metadata=CONTRACT)
    tokens_per_s: float | None = field(default=None, metadata=CONTRACT)
    kernels_per_step: float | None = field(default=None, metadata=CONTRACT)
    launches_per_step: float | None = field(default=None, metadata=CONTRACT)
    gpu_idle_per_step_us: float | None = field(default=None, metadata=CONTRACT)
    gpu_lead_per_step_us: float | None = field(default=None, metadata=CONTRACT)  # idle before the first device work
    gpu_tail_per_step_us: float | None = field(default=None, metadata=CONTRACT)  # idle after the last
    # requests (issue 38, analysis.request_figures): TTFT over requests, and the steps whose kind is unknown
    ttft_ms_dist: dict[str, float] | None = field(default=None, metadata=CONTRACT)  # p50, p90, p99, max
    unknown_steps: int = field(default=0, metadata=CONTRACT)
    # a served run's figures over the run (issue 41, analysis.request_figures): its requests (the top level's
    # `requests`), the tokens its steps gave and those over the time they cover; and, for any headline figure that
    # is null, why and what to record next time ({metric key: reason})
    served: bool = field(default=False, metadata=CONTRACT)  # requests followed step by step (analysis.serving)
    requests: int | None = field(default=None, metadata=CONTRACT)
    output_tokens: int | None = field(default=None, metadata=CONTRACT)
    run_tokens_per_s: float | None = field(default=None, metadata=CONTRACT)
    unknown_reasons: dict[str, str] = field(default_factory=dict, metadata=CONTRACT)
    # where the sequences per step of the main kind come from (analysis.step_figures.batch_source); None: the trace
    # does not say, and the per-token figures (tokens_per_step, tokens_per_s, decode_tokens_per_s) are null
    batch_source: str | None = field(default=None, metadata=CONTRACT)
    # the capture's time, whatever its steps (analysis.capture_figures): busy share, kernels/s, longest idle, top
    # kernel; the cards of a trace without steps
    capture: dict | None = field(default=None, metadata=CONTRACT)


def contract_fields() -> tuple[str, ...]:
    """The Summary fields the CLI JSON's "summary" object holds, in order (DESIGN.md)."""
    return tuple(f.name for f in fields(Summary) if f.metadata.get("contract"))


def inter_token_latency_ns(steps: pd.DataFrame) -> np.ndarray:
    """Per step: time from the previous token-emitting step's token to this one's, same request; -1 where none.
    A draft model's forwards emit no token of the request: they are skipped (their time counts for the verify
    step that follows)."""
    end = steps["token_ns"].to_numpy()
    req = steps["request"].to_numpy()
    itl = np.full(len(steps), -1, dtype=np.int64)
    emitting = np.flatnonzero(steps["kind"].to_numpy() != "draft") if len(steps) else np.zeros(0, np.int64)
    if len(emitting) > 1:
        this, before = emitting[1:], emitting[:-1]
        itl[this] = np.where(req[this] == req[before], end[this] - end[before], -1)
    return itl


def outlier_mask(steps: pd.DataFrame, itl: np.ndarray, factor: float) -> np.ndarray:
    """Decode steps whose ITL is more than `factor` times the median: warm-up, compile or stalls."""
    decode = (steps["kind"].to_numpy() == "decode") & (itl > 0)
    if decode.sum() < 3:
        return np.zeros(len(steps), dtype=bool)
    median = np.median(itl[decode])
    return decode & (itl > factor * median)


def summarize(
    steps: pd.DataFrame, act: Activity, busy: tuple[np.ndarray, np.ndarray], itl: np.ndarray, outliers: np.ndarray
) -> Summary:
    kind = steps["kind"].to_numpy() if len(steps) else np.array([], dtype=object)
    decode = kind == "decode"
    kept = decode & ~outliers
    itl_kept = itl[kept & (itl > 0)] / 1e6
    spans = (steps["end_ns"] - steps["start_ns"]).to_numpy() if len(steps) else np.array([])
    # sequences per step, NaN where the trace does not say: no token count rests on a guessed batch of 1
    batch = steps["batch"].astype("Float64").to_numpy(dtype=float, na_value=np.nan) if len(steps) else np.array([])

    itl_ms = None
    if len(itl_kept):
        itl_ms = {q: float(np.percentile(itl_kept, p)) for q, p in (("p50", 50), ("p90", 90), ("p99", 99))}
        itl_ms["mean"] = float(itl_kept.mean())
        itl_ms["max"] = float(itl_kept.max())
        known = kept & (itl > 0) & np.isfinite(batch)
        tokens_per_s = _rate(batch[known].sum(), itl[known].sum() / 1e9) if known.any() else None
        rate_from = "inter-token latency" if tokens_per_s is not None else None
    else:
        known = decode & np.isfinite(batch)
        tokens_per_s = _rate(batch[known].sum(), spans[known].sum() / 1e9) if known.any() else None
        rate_from = "decode step span" if tokens_per_s is not None else None
    speculative = speculative_summary(steps, itl)

    ttft = _ttft_ms_by_request(steps)

    busy_pct = busy_share_pct(steps, act, busy)
    d = steps[kept] if len(steps) else steps

    def median(col: str, scale: float = 1.0) -> float | None:
        return float(d[col].median() / scale) if len(d) else None

    return Summary(
        prefill_steps=int((kind == "prefill").sum()),
        decode_steps=int(decode.sum()),
        mixed_steps=int((kind == "mixed").sum()),
        verify_steps=int((kind == "verify").sum()),
        draft_steps=int((kind == "draft").sum()),
        speculative=speculative,
        ttft_ms=float(np.median(list(ttft.values()))) if ttft else None,
        ttft_ms_by_request=ttft,
        itl_ms=itl_ms,
        itl_outliers=int(outliers.sum()),
        decode_tokens_per_s=tokens_per_s,
        decode_rate_from=rate_from,
        gpu_busy_pct=busy_pct,
        kernels_per_decode_step=median("kernels"),
        launches_per_decode_step=median("launches"),
        gpu_idle_per_decode_step_us=median("gpu_idle_ns", 1e3),
        decode_step_us=float(np.median(spans[kept]) / 1e3) if kept.any() else None,
        launch_call_mean_us=_mean_launch_us(act),
        d2h_per_decode_step=median("d2h_copies"),
        syncs_per_decode_step=median("syncs"),
        prefill_ms_total=float(spans[kind == "prefill"].sum() / 1e6),
        decode_ms_total=float(spans[decode | np.isin(kind, ("verify", "draft"))].sum() / 1e6),  # after prefill
        batch=int(np.median(batch[decode & np.isfinite(batch)])) if (decode & np.isfinite(batch)).any() else None,
        on_gpu=bool(act.on_gpu),
        **_per_step(steps, outliers, speculative),
    )


def _per_step(steps: pd.DataFrame, outliers: np.ndarray, speculative: dict | None) -> dict:
    """The main kind's per-step figures (analysis.step_figures); a verify step's tokens/s counts the tokens it
    emitted (analysis.speculative: exact where the trace says what was accepted, else null and given as a range),
    not the draft positions it scored."""
    figures = step_figures(steps, outliers)
    if figures.get("step_kind") == "verify":
        figures["tokens_per_s"] = speculative.get("tokens_per_s") if speculative else None
    return figures


def busy_share_pct(steps: pd.DataFrame, act: Activity, busy: tuple[np.ndarray, np.ndarray]) -> float | None:
    """Busy share of the time the steps cover (their union: busy + idle of every step, DESIGN.md 2026-12-01);
    without steps, of the device's active window (its first work to its last)."""
    if len(steps):
        lo, hi = busy_union(steps["start_ns"].to_numpy(), steps["end_ns"].to_numpy())
    elif len(act.busy_start):
        lo, hi = np.array([int(act.busy_start.min())]), np.array([int(act.busy_end.max())])
    else:
        return None
    total = int((hi - lo).sum())
    if total <= 0:
        return None
    return 100.0 * int(covered_time(busy[0], busy[1], lo, hi).sum()) / total


def _rate(amount: float, seconds: float) -> float | None:
    """amount per second; None (not inf or nan) when the time is zero or either number is not finite."""
    if not (np.isfinite(amount) and np.isfinite(seconds)) or seconds <= 0 or amount < 0:
        return None
    return float(amount / seconds)


def _ttft_ms_by_request(steps: pd.DataFrame) -> dict[int, float]:
    """Per request, its first prefill's start to its token: one vectorised pass, whatever the request count."""
    prefill = np.flatnonzero((steps["kind"] == "prefill").to_numpy(dtype=bool))
    if len(prefill) == 0:
        return {}
    # each request's first prefill, in request order (np.unique: sorted values, first positions)
    _, first = np.unique(steps["request"].to_numpy()[prefill], return_index=True)
    first = steps.iloc[prefill[first]]
    ms = (first["token_ns"].to_numpy() - first["start_ns"].to_numpy()) / 1e6
    return dict(zip(first["request"].to_numpy().tolist(), ms.tolist(), strict=True))


def _mean_launch_us(act: Activity) -> float | None:
    """Mean host time of one kernel launch call: copies may block on the GPU and graph launches
    cost differently, so they are left out when plain kernel launches exist."""
    plain = act.launch_dur[act.launch_is_kernel]
    durations = plain if len(plain) else act.launch_dur
    return float(durations.mean() / 1e3) if len(durations) else None
