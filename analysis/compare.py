"""Two analyses side by side: the metric table with deltas and ratios, and one sentence on what changed.

Kept in analysis (pure pandas, no Streamlit) so the app only arranges these
numbers and the CLI or a notebook can print the same comparison.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from analysis.model import Analysis

# (key, label, unit, lower_is_better); keys name a summary entry, "itl_p50_ms" style keys reach into itl_ms.
COMPARED_METRICS = (
    ("ttft_ms", "TTFT", "ms", True),
    ("itl_p50_ms", "ITL p50", "ms", True),
    ("itl_p90_ms", "ITL p90", "ms", True),
    ("decode_tokens_per_s", "decode tokens/s", "tok/s", False),
    ("decode_steps", "decode steps", "", None),
    ("kernels_per_decode_step", "kernels per decode step", "", True),
    ("launches_per_decode_step", "launches per decode step", "", True),
    ("gpu_busy_pct", "GPU busy", "%", None),
    ("gpu_idle_per_decode_step_us", "GPU idle per decode step", "us", True),
)
METRIC_COLUMNS = ("metric", "label", "unit", "a", "b", "delta", "ratio")
# On CPU-only traces host ops stand in for kernels and "idle" means no op running: say so in the labels.
_CPU_LABELS = {
    "kernels_per_decode_step": "host ops per decode step",
    "gpu_busy_pct": "busy (some op running)",
    "gpu_idle_per_decode_step_us": "idle per decode step (no op running)",
}
_NOTABLE_CHANGE = 0.10  # a secondary metric enters the sentence when it moved by more than this share


@dataclass(frozen=True)
class Comparison:
    label_a: str
    label_b: str
    metrics: pd.DataFrame  # METRIC_COLUMNS; delta = b - a, ratio = b / a (NaN when unknown)
    sentence: str


def summary_value(summary: dict, key: str) -> float:
    """One summary figure as a float, NaN when the trace does not have it."""
    if key.startswith("itl_") and key.endswith("_ms"):
        itl = summary.get("itl_ms") or {}
        value = itl.get(key[len("itl_") : -len("_ms")])
    else:
        value = summary.get(key)
    try:
        value = float(value)
    except (TypeError, ValueError):
        return math.nan
    return value if math.isfinite(value) else math.nan


def compare(a: Analysis, b: Analysis, label_a: str = "A", label_b: str = "B") -> Comparison:
    """Compare trace b against trace a (a is the baseline: deltas are b - a)."""
    rows = []
    cpu_only = not (a.summary.get("on_gpu", True) or b.summary.get("on_gpu", True))
    for key, label, unit, _ in COMPARED_METRICS:
        label = _CPU_LABELS.get(key, label) if cpu_only else label
        va, vb = summary_value(a.summary, key), summary_value(b.summary, key)
        ratio = vb / va if va and not math.isnan(va) else math.nan
        rows.append((key, label, unit, va, vb, vb - va, ratio))
    metrics = pd.DataFrame(rows, columns=list(METRIC_COLUMNS))
    return Comparison(label_a, label_b, metrics, _sentence(metrics, label_a, label_b))


def _subject(label_a: str, label_b: str) -> str:
    """Who gets the credit in the sentence: the known switch when the labels name one."""
    la, lb = label_a.lower(), label_b.lower()
    if "eager" in la and ("cuda-graph" in lb or "cudagraph" in lb or "cuda_graph" in lb):
        return "CUDA graphs"
    if "eager" in la and "compile" in lb:
        return "torch.compile"
    return f"{label_b} (vs {label_a})"


def _fmt(value: float, unit: str) -> str:
    if unit == "us":
        return f"{value / 1000:.1f} ms" if abs(value) >= 1000 else f"{value:.1f} us"
    if unit == "ms":
        return f"{value:.1f} ms" if abs(value) >= 1 else f"{value * 1000:.0f} us"
    if unit == "%":
        return f"{value:.1f}%"
    if unit == "tok/s":
        return f"{value:.1f} tok/s"
    return f"{value:.3g}" if abs(value) < 10 else f"{value:,.0f}"


def _phrase(row: pd.Series) -> str:
    return f"{row['label']} from {_fmt(row['a'], row['unit'])} to {_fmt(row['b'], row['unit'])}"


def _speed(ratio: float) -> str:
    if ratio <= 0 or math.isnan(ratio):
        return ""
    if ratio < 1:
        return f" ({1 / ratio:.1f}x faster)"
    return f" ({ratio:.1f}x slower)" if ratio > 1 else " (unchanged)"


def _sentence(metrics: pd.DataFrame, label_a: str, label_b: str) -> str:
    by_key = metrics.set_index("metric")
    subject = _subject(label_a, label_b)
    known = by_key.dropna(subset=["a", "b"])
    if "itl_p50_ms" in known.index:
        lead_key = "itl_p50_ms"
    elif "ttft_ms" in known.index:
        lead_key = "ttft_ms"
    else:
        return f"No decode steps or prefill in both traces: nothing per token to compare ({label_a} vs {label_b})."
    lead = by_key.loc[lead_key]
    verb = "cut" if lead["b"] < lead["a"] else ("raised" if lead["b"] > lead["a"] else "left")
    parts = [f"{subject} {verb} {_phrase(lead)}{_speed(lead['ratio'])}"]
    for key in ("launches_per_decode_step", "gpu_idle_per_decode_step_us", "kernels_per_decode_step", "ttft_ms"):
        if key == lead_key or key not in known.index:
            continue
        row = known.loc[key]
        base = abs(row["a"]) or abs(row["b"])
        if base and abs(row["delta"]) / base > _NOTABLE_CHANGE:
            parts.append(_phrase(row))
    return "; ".join(parts) + "."
