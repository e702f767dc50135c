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


def card_metrics(summary: Any, on_gpu: bool | None = None) -> list[tuple[Metric, str]]:
    """The summary cards: (metric shown, its label), one per headline metric in order. On a trace whose main step
    kind is not decode, a decode figure gives way to its stand-in over that kind's steps (analysis.step_figures).
    On a CPU-only trace (`on_gpu` False; else the summary's own on_gpu) the cards say what they measure there
    ("Host busy", "Host ops / decode step") and the launch card is left out: a CPU trace launches nothing."""
    kind = summary.get("step_kind") if isinstance(summary, Mapping) else getattr(summary, "step_kind", None)
    if on_gpu is None:
        on_gpu = summary.get("on_gpu", True) if isinstance(summary, Mapping) else getattr(summary, "on_gpu", True)
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
