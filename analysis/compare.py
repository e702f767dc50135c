"""Two analyses side by side: the metric table with deltas and ratios, and one sentence on what changed.

Kept in analysis (pure pandas, no Streamlit) so the app only arranges these
numbers and the CLI or a notebook can print the same comparison.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .anatomy_compare import anatomy_phrase, compare_anatomy
from .composition import composition_table
from .metrics import COMPARED, Metric, metric
from .model import Analysis
from .summary import Summary

# the headline metrics, then the compared ones where either trace has them, in the registry's order
COMPARED_METRICS: tuple[Metric, ...] = COMPARED
METRIC_COLUMNS = ("metric", "label", "unit", "a", "b", "delta", "ratio")
CATEGORY_COLUMNS = ("category", "a_us", "b_us", "delta_us", "ratio", "a_kernels", "b_kernels")
COMPOSITION_COLUMNS = ("key", "label", "a", "b", "delta")
COMPOSITION_ROWS = (  # (key, label, where analysis.composition.composition_table has it)
    ("sequences_per_decode_step", "sequences per decode step", ("sequences_per_decode_step",)),
    ("prefill_tokens_per_step", "prefill tokens per prefill-carrying step", ("prefill_tokens_per_step",)),
    ("mixed_steps", "mixed steps", ("steps", "mixed")),
    ("verify_steps", "verify steps", ("steps", "verify")),
    ("draft_steps", "draft steps", ("steps", "draft")),
    ("requests", "requests", ("requests",)),
)
_NOTABLE_CHANGE = 0.10  # a secondary metric enters the sentence when it moved by more than this share


@dataclass(frozen=True)
class Comparison:
    label_a: str
    label_b: str
    metrics: pd.DataFrame  # METRIC_COLUMNS; delta = b - a, ratio = b / a (NaN when unknown)
    sentence: str
    # the median decode step of each, by category (CATEGORY_COLUMNS; ratio NaN where A has none); empty
    # when either analysis has no anatomy
    categories: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(CATEGORY_COLUMNS)))
    layers: dict = field(default_factory=dict)  # {"a": layer figures, "b": ...} (analysis.layers.LayerResult.as_dict)
    # what the batches held (COMPOSITION_COLUMNS: sequences per decode step, steps by kind, requests), A against B
    composition: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(COMPOSITION_COLUMNS)))

    def anatomy_json(self) -> dict:
        """The compare JSON's `categories` and `layers` keys (null ratios where A has no time)."""
        rows = [
            {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
            for row in self.categories.to_dict("records")
        ]
        return {"categories": rows, "layers": self.layers}

    def composition_json(self) -> list[dict]:
        """The compare JSON's `composition` rows (null where a trace does not tell)."""
        return [
            {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
            for row in self.composition.to_dict("records")
        ]


def summary_value(summary: Summary, key: str) -> float:
    """One summary figure as a float, NaN when the trace does not have it (see analysis.metrics)."""
    return metric(key).value(summary)


def compare(a: Analysis, b: Analysis, label_a: str = "A", label_b: str = "B") -> Comparison:
    """Compare trace b against trace a (a is the baseline: deltas are b - a)."""
    rows = []
    on_gpu = a.summary.on_gpu or b.summary.on_gpu
    for m in COMPARED_METRICS:
        va, vb = m.value(a.summary), m.value(b.summary)
        if not m.headline and math.isnan(va) and math.isnan(vb):
            continue  # a figure neither trace has (memory without memory events): no row of n/a
        ratio = vb / va if va and not math.isnan(va) else math.nan
        rows.append((m.key, m.label_for(on_gpu), m.unit, va, vb, vb - va, ratio))
    metrics = pd.DataFrame(rows, columns=list(METRIC_COLUMNS))
    sentence = _sentence(metrics, label_a, label_b)
    batches = compare_composition(a, b)
    sentence = _with_composition_phrase(sentence, batches)
    if a.anatomy is None or b.anatomy is None:
        return Comparison(label_a, label_b, metrics, sentence, composition=batches)
    inside = compare_anatomy(a.anatomy, b.anatomy)
    categories = pd.DataFrame(inside["categories"], columns=list(CATEGORY_COLUMNS)).astype({"ratio": float})
    phrase = anatomy_phrase(inside)
    if phrase:  # "...; elementwise time fell 40%; gemm unchanged."
        sentence = f"{sentence.removesuffix('.')}; inside the median decode step, {phrase}."
    return Comparison(label_a, label_b, metrics, sentence, categories, inside["layers"], batches)


def compare_composition(a: Analysis, b: Analysis) -> pd.DataFrame:
    """What the two runs' batches held, row by row (COMPOSITION_COLUMNS; NaN where a trace does not tell)."""
    ta, tb = composition_table(a.steps), composition_table(b.steps)

    def pick(table: dict, path: tuple[str, ...]) -> float:
        value = table
        for key in path:
            value = value[key]
        return math.nan if value is None else float(value)

    rows = []
    for key, label, path in COMPOSITION_ROWS:
        va, vb = pick(ta, path), pick(tb, path)
        rows.append((key, label, va, vb, vb - va))
    return pd.DataFrame(rows, columns=list(COMPOSITION_COLUMNS))


def batches_differ(batches: pd.DataFrame) -> bool:
    """Whether any composition row differs between A and B (one side unknown and the other known counts)."""
    a, b = batches["a"].to_numpy(dtype=float), batches["b"].to_numpy(dtype=float)
    return bool(np.any((np.isnan(a) != np.isnan(b)) | (~np.isnan(a) & ~np.isnan(b) & (a != b))))


def _with_composition_phrase(sentence: str, batches: pd.DataFrame) -> str:
    """Say when the runs batch differently: the sequences per decode step, and mixed / verify steps that only one
    of them has."""
    rows = batches.set_index("key")
    parts = []
    seq_a, seq_b = rows.loc["sequences_per_decode_step", ["a", "b"]]
    if not (math.isnan(seq_a) or math.isnan(seq_b)) and seq_a != seq_b:
        parts.append(f"{seq_b:g} sequences per decode step against {seq_a:g}")
    for key in ("mixed_steps", "verify_steps"):
        va, vb = rows.loc[key, ["a", "b"]]
        if (va == 0) != (vb == 0):
            parts.append(f"{vb:g} {rows.loc[key, 'label']} against {va:g}")
    if not parts:
        return sentence
    return f"{sentence.removesuffix('.')}; the batches differ: {', '.join(parts)}."


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
