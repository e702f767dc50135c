"""The metric registry: every figure a person compares, declared once and read by every output.

The JSON contract (analysis.report, via the Summary fields it marks), the app's summary cards,
Compare, the text report and a gate all take key, label, unit, better direction and format from
here. Adding a metric = one `Metric` below + (when it is a new figure) one field of
analysis.summary.Summary.

`key` names the metric in outputs (units in the name); `field` is the Summary field it reads and
`item` a key inside that field when the field is a mapping (itl_p50_ms reads itl_ms["p50"]).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import number_format


@dataclass(frozen=True)
class Metric:
    key: str
    label: str  # lower case, for tables and sentences ("kernels per decode step")
    unit: str  # "ms" | "us" | "%" | "tok/s" | "B" (bytes) | "" (a count)
    better: str | None  # "lower" | "higher" | None (neither: a count or a share that depends on the workload)
    field: str
    item: str | None = None
    card_label: str | None = None  # the app's summary card; None: the label with a capital first letter
    cpu_label: str | None = None  # on CPU-only traces host ops stand in for kernels and "idle" means no op running
    headline: bool = True  # shown as a summary card and compared; False: the JSON and the text report only
    compared: bool = False  # compared (Compare, compare --json, gates) though not a headline card
    # the metric a card shows instead on a trace whose main step kind is not decode (analysis.step_figures): the
    # same figure over that kind's steps, so that no card says n/a where the figure exists under another kind
    stand_in: str | None = None
    cpu_card: str | None = None  # the card's label on a CPU-only trace ("Host busy"); "{kind}" as in card_label
    gpu_only: bool = False  # a figure a CPU-only trace does not have (launch calls): no card, no line there
    # a served run's cards (issue 41) lead with these, in this order (0: not one of them), labelled serving_label
    serving_card: int = 0
    serving_label: str | None = None
    # a card of a trace without steps (CAPTURE_CARDS), in the order shown; 0: not one of them
    capture_card: int = 0
    text_item: str | None = None  # the card shows this item of the field's mapping (a name) instead of the value

    @property
    def card(self) -> str:
        return self.card_for("decode")

    def card_for(self, kind: str | None) -> str:
        """The card's label, a "{kind}" in it filled with the step kind it describes ("Kernels / mixed step")."""
        text = self.card_label or self.label[:1].upper() + self.label[1:]
        kind = kind or "decode"
        return text.replace("{Kind}", kind[:1].upper() + kind[1:]).replace("{kind}", kind)

    def card_label_for(self, kind: str | None, on_gpu: bool) -> str:
        """The card's label for a trace: its CPU wording on a CPU-only trace ("Host busy")."""
        if on_gpu or self.cpu_card is None:
            return self.card_for(kind)
        kind = kind or "decode"
        return self.cpu_card.replace("{Kind}", kind[:1].upper() + kind[1:]).replace("{kind}", kind)

    def label_for(self, on_gpu: bool) -> str:
        return self.label if on_gpu or self.cpu_label is None else self.cpu_label

    def value(self, summary: Any) -> float:
        """The figure as a float, NaN when the trace does not have it. `summary`: an
        analysis.summary.Summary or the JSON contract's summary object (a mapping)."""
        raw = summary.get(self.field) if isinstance(summary, Mapping) else getattr(summary, self.field, None)
        if self.item is not None:  # a mapping (itl_ms, the JSON's memory) or a record (Summary.memory)
            raw = raw.get(self.item) if isinstance(raw, Mapping) else getattr(raw, self.item, None)
        try:
            value = float(raw)
        except (TypeError, ValueError):
            return math.nan
        return value if math.isfinite(value) else math.nan

    def format(self, value: float | None) -> str:
        """A value as the cards show it (analysis.number_format): "—" when unknown, us as ms from 1 ms up."""
        return format_value(value, self.unit)

    def verdict(self, delta: float | None) -> str | None:
        """Whether a change B - A of this metric is "better" or "worse" (None: no direction, or no change)."""
        if self.better is None or number_format.missing(delta) or not delta:
            return None
        return "better" if (float(delta) < 0) == (self.better == "lower") else "worse"


METRICS: tuple[Metric, ...] = (
    Metric(
        "requests",
        "requests",
        "",
        None,
        "requests",
        card_label="Requests",
        headline=False,
        compared=True,
        serving_card=1,
    ),
    Metric("ttft_ms", "TTFT", "ms", "lower", "ttft_ms", card_label="TTFT", serving_card=2, serving_label="TTFT p50"),
    Metric(
        "ttft_p90_ms",
        "TTFT p90 over requests",
        "ms",
        "lower",
        "ttft_ms_dist",
        item="p90",
        card_label="TTFT p90",
        headline=False,
        compared=True,
        serving_card=3,
    ),
    Metric("itl_p50_ms", "ITL p50", "ms", "lower", "itl_ms", item="p50", serving_card=4),
    Metric("itl_p90_ms", "ITL p90", "ms", "lower", "itl_ms", item="p90", serving_card=5),
    Metric(
        "run_tokens_per_s",
        "tokens/s over the run",
        "tok/s",
        "higher",
        "run_tokens_per_s",
        card_label="Tokens/s (run)",
        headline=False,
        compared=True,
        serving_card=6,
    ),
    Metric("itl_p99_ms", "ITL p99", "ms", "lower", "itl_ms", item="p99", headline=False),
    Metric("step_ms", "step time", "ms", "lower", "step_ms", card_label="Step time ({kind})"),
    Metric("tokens_per_step", "tokens per step", "", None, "tokens_per_step", card_label="Tokens / {kind} step"),
    Metric("decode_tokens_per_s", "decode tokens/s", "tok/s", "higher", "decode_tokens_per_s", stand_in="tokens_per_s"),
    Metric("tokens_per_s", "tokens/s", "tok/s", "higher", "tokens_per_s", card_label="{Kind} tokens/s", headline=False),
    Metric("prefill_steps", "prefill steps", "", None, "prefill_steps", headline=False),
    Metric("decode_steps", "decode steps", "", None, "decode_steps", stand_in="steps_of_kind"),
    Metric(
        "steps_of_kind", "steps of the main kind", "", None, "steps_of_kind", card_label="{Kind} steps", headline=False
    ),
    Metric(
        "kernels_per_decode_step",
        "kernels per decode step",
        "",
        "lower",
        "kernels_per_decode_step",
        card_label="Kernels / decode step",
        cpu_label="host ops per decode step",
        stand_in="kernels_per_step",
        cpu_card="Host ops / decode step",
    ),
    Metric(
        "kernels_per_step",
        "kernels per step",
        "",
        "lower",
        "kernels_per_step",
        card_label="Kernels / {kind} step",
        cpu_label="host ops per step",
        headline=False,
        compared=True,
        cpu_card="Host ops / {kind} step",
    ),
    Metric(
        "launches_per_decode_step",
        "launches per decode step",
        "",
        "lower",
        "launches_per_decode_step",
        card_label="Launches / decode step",
        stand_in="launches_per_step",
        gpu_only=True,
    ),
    Metric(
        "launches_per_step",
        "launches per step",
        "",
        "lower",
        "launches_per_step",
        card_label="Launches / {kind} step",
        headline=False,
        compared=True,
        gpu_only=True,
    ),
    Metric(
        "gpu_busy_pct",
        "GPU busy",
        "%",
        None,
        "gpu_busy_pct",
        cpu_label="host busy (some op running)",
        cpu_card="Host busy",
    ),
    Metric(
        "gpu_idle_per_decode_step_us",
        "GPU idle per decode step",
        "us",
        "lower",
        "gpu_idle_per_decode_step_us",
        card_label="GPU idle / decode step",
        cpu_label="no op running per decode step",
        stand_in="gpu_idle_per_step_us",
        cpu_card="No op running / decode step",
    ),
    Metric(
        "gpu_idle_per_step_us",
        "GPU idle per step",
        "us",
        "lower",
        "gpu_idle_per_step_us",
        card_label="GPU idle / {kind} step",
        cpu_label="no op running per step",
        headline=False,
        compared=True,
        cpu_card="No op running / {kind} step",
    ),
    Metric(
        "gpu_lead_per_step_us",
        "GPU lead per step",
        "us",
        "lower",
        "gpu_lead_per_step_us",
        card_label="GPU lead / {kind} step",
        cpu_label="no op running before a step's first op",
        cpu_card="Before the first op / {kind} step",
    ),
    Metric(
        "capture_busy_pct",
        "GPU busy over the capture",
        "%",
        None,
        "capture",
        item="busy_pct",
        card_label="GPU busy (capture)",
        cpu_label="host busy over the capture (some op running)",
        cpu_card="Host busy (capture)",
        headline=False,
        capture_card=1,
    ),
    Metric(
        "kernels_per_s",
        "kernels per second",
        "",
        None,
        "capture",
        item="kernels_per_s",
        card_label="Kernels / s",
        cpu_label="host ops per second",
        cpu_card="Host ops / s",
        headline=False,
        capture_card=2,
    ),
    Metric(
        "longest_idle_ms",
        "longest GPU idle gap",
        "ms",
        None,
        "capture",
        item="longest_idle_ms",
        card_label="Longest idle gap",
        cpu_label="longest gap with no host op running",
        cpu_card="Longest gap, no op",
        headline=False,
        capture_card=3,
    ),
    Metric(
        "top_kernel_pct",
        "top kernel's share of kernel time",
        "%",
        None,
        "capture",
        item="top_kernel_pct",
        card_label="Top kernel",
        cpu_label="top host op's share of host-op time",
        cpu_card="Top host op",
        headline=False,
        capture_card=4,
        text_item="top_kernel",
    ),
    Metric(
        "memory_peak_allocated_bytes",
        "peak memory allocated",
        "B",
        "lower",
        "memory",
        item="peak_allocated_bytes",
        headline=False,
        compared=True,
    ),
    Metric(
        "memory_peak_reserved_bytes",
        "peak memory reserved",
        "B",
        "lower",
        "memory",
        item="peak_reserved_bytes",
        headline=False,
        compared=True,
    ),
    Metric(
        "kv_growth_bytes_per_token",
        "KV growth per decode step",
        "B",
        "lower",
        "memory",
        item="kv_growth_bytes_per_token",
        headline=False,
        compared=True,
    ),
    Metric(
        "kv_tokens_capacity",
        "KV tokens that fit",
        "",
        "higher",
        "memory",
        item="kv_tokens_capacity",
        headline=False,
        compared=True,
    ),
)
BY_KEY: dict[str, Metric] = {m.key: m for m in METRICS}
HEADLINE: tuple[Metric, ...] = tuple(m for m in METRICS if m.headline)
COMPARED: tuple[Metric, ...] = tuple(m for m in METRICS if m.headline or m.compared or m.key == "tokens_per_s")
SERVING_CARDS: tuple[Metric, ...] = tuple(sorted((m for m in METRICS if m.serving_card), key=lambda m: m.serving_card))
UNKNOWN = "unknown"
CAPTURE_CARDS: tuple[Metric, ...] = tuple(sorted((m for m in METRICS if m.capture_card), key=lambda m: m.capture_card))
CARD_NAME_CHARS = 18  # a name on a card (the top kernel), cut to what a card's width shows; the hover has it all


def card_metrics(summary: Any, on_gpu: bool | None = None) -> list[tuple[Metric, str]]:
    """The summary cards: (metric shown, its label), one per headline metric in order. On a trace whose main step
    kind is not decode, a decode figure gives way to its stand-in over that kind's steps (analysis.step_figures).
    On a CPU-only trace (`on_gpu` False; else the summary's own on_gpu) the cards say what they measure there
    ("Host busy", "Host ops / decode step") and the launch card is left out: a CPU trace launches nothing."""
    kind = summary.get("step_kind") if isinstance(summary, Mapping) else getattr(summary, "step_kind", None)
    if on_gpu is None:
        on_gpu = summary.get("on_gpu", True) if isinstance(summary, Mapping) else getattr(summary, "on_gpu", True)
    if kind is None and _get(summary, "capture"):  # no steps: the capture's time decides the first row
        return [(m, m.card_label_for(None, bool(on_gpu))) for m in CAPTURE_CARDS]
    cards = []
    for m in HEADLINE:
        shown = BY_KEY[m.stand_in] if m.stand_in and kind not in (None, "decode") else m
        if shown.gpu_only and not on_gpu:
            continue
        cards.append((shown, shown.card_label_for(kind, bool(on_gpu))))
    if _get(summary, "served"):  # a served run: its requests first, then the steps' figures not shown among them
        lead = [(m, m.serving_label or m.card_label_for(kind, bool(on_gpu))) for m in SERVING_CARDS]
        cards = lead + [(m, label) for m, label in cards if not m.serving_card]
    return cards


def unknown_reason(m: Metric, summary: Any) -> str | None:
    """Why a card's figure is null and what to record next time (the analysis's summary.unknown_reasons), None when
    the figure is known or nothing says why."""
    if not math.isnan(m.value(summary)):
        return None
    reasons = _get(summary, "unknown_reasons") or {}
    return reasons.get(m.key) if isinstance(reasons, Mapping) else None


PER_TOKEN = ("tokens_per_step", "tokens_per_s", "decode_tokens_per_s")  # null when the batch is unknown
# a card whose figure is a range where one value would be a guess: speculative decoding without the acceptance
RANGES = {"itl_p50_ms": "itl_ms_range", "itl_p90_ms": "itl_p90_ms_range", "tokens_per_s": "tokens_per_s_range"}


def card_text(m: Metric, summary: Any) -> str:
    """What a card shows: the figure (analysis.number_format); where it is null, the range the trace allows
    (speculative decoding whose acceptance the trace does not show: "1.86–5.59 ms"), or "unknown" for a per-token
    figure whose batch the trace does not say or whose reason the analysis gives (summary.unknown_reasons; the page
    says under the cards what would make it known), else "—"."""
    value = m.value(summary)
    if m.text_item is not None:
        name = _get(_get(summary, m.field) or {}, m.text_item)
        if name:
            name = str(name)
            return name if len(name) <= CARD_NAME_CHARS else name[: CARD_NAME_CHARS - 1] + "…"
    if not math.isnan(value):
        return m.format(value)
    span = _range(m, summary)
    if span is not None:
        return number_format.format_range(span["min"], span["max"], m.unit)
    if _batch_unknown(m, summary) or unknown_reason(m, summary):  # a served run's null figure with its reason too
        return UNKNOWN
    return m.format(value)


def card_help(m: Metric, summary: Any) -> str:
    """The card's hover text: what it is and its JSON key, then where its figure comes from (the batch's source for
    a per-token figure) or why it is a range or unknown."""
    on_gpu = bool(_get(summary, "on_gpu", True))
    text = f"{m.label_for(on_gpu)} (`{m.key}` in the JSON)"
    if m.text_item is not None and _get(_get(summary, m.field) or {}, m.text_item):
        return f"{_get(_get(summary, m.field), m.text_item)}: {m.format(m.value(summary))} of the time; {text}"
    if m.capture_card:
        return text + ", over the capture: its first event to its last (no generation steps were found)"
    if _range(m, summary) is not None and math.isnan(m.value(summary)):
        return text + (
            ": a range, from every draft token accepted to none (speculative decoding: the trace does not say how "
            "many were accepted)"
        )
    if m.key in PER_TOKEN:
        source = _get(summary, "batch_source")
        if source:
            return text + f"; sequences per step from {source}"
        if _batch_unknown(m, summary):
            return text + (
                ": unknown, the trace does not say the batch (sequences per step): record with record_shapes=True, "
                "use the engine's annotations, or type it in Analysis settings (--batch)"
            )
    return text


def _batch_unknown(m: Metric, summary: Any) -> bool:
    """A per-token figure of the main step kind that is null because the trace does not say the batch (decode
    tokens/s only on a trace whose main kind is decode: elsewhere it has no decode steps to be about)."""
    kind = _get(summary, "step_kind")
    if m.key not in PER_TOKEN or kind is None or _get(summary, "batch_source"):
        return False
    return m.key != "decode_tokens_per_s" or kind == "decode"


def _range(m: Metric, summary: Any) -> dict | None:
    spec = _get(summary, "speculative")
    key = RANGES.get(m.key)
    span = spec.get(key) if isinstance(spec, Mapping) and key else None
    return span if isinstance(span, Mapping) and span.get("min") is not None and span.get("max") is not None else None


def _get(summary: Any, name: str, default: Any = None) -> Any:
    return summary.get(name, default) if isinstance(summary, Mapping) else getattr(summary, name, default)


def metric(key: str) -> Metric:
    """The registry entry for a key; KeyError names the known keys."""
    try:
        return BY_KEY[key]
    except KeyError:
        raise KeyError(f"unknown metric {key!r}; known: {', '.join(BY_KEY)}") from None


def format_value(value: float | None, unit: str) -> str:
    """A value as every output writes it (analysis.number_format: 3 significant digits, unit by magnitude, "—" when
    unknown)."""
    return number_format.format_value(value, unit)


def format_bytes(value: float) -> str:
    """A size in binary units, as memory is counted: 131072 -> "128 KiB"; whole bytes below 1 KiB."""
    return number_format.format_value(value, "B")
