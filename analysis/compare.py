"""Two analyses side by side: the metric table with deltas and ratios, and one sentence on what changed.

Kept in analysis (pure pandas, no Streamlit) so the app only arranges these
numbers and the CLI or a notebook can print the same comparison.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from . import number_format
from .anatomy_compare import anatomy_phrase, compare_anatomy
from .compare_warnings import pair_warnings
from .composition import composition_table, requests_of
from .metrics import COMPARED, Metric, metric
from .model import Analysis
from .op_diff import op_diff
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
    # what makes the pair not like for like (analysis.compare_warnings); () when the pair is comparable
    warnings: tuple[str, ...] = ()
    op_diff: dict = field(default_factory=dict)  # kernels by short name per step (analysis.op_diff)

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
    served = a.summary.served or b.summary.served
    for m in COMPARED_METRICS:
        va, vb = m.value(a.summary), m.value(b.summary)
        if not m.headline and math.isnan(va) and math.isnan(vb):
            continue  # a figure neither trace has (memory without memory events): no row of n/a
        if m.serving_card and not m.headline and not served:
            continue  # a served run's figures (requests, TTFT p90, tokens/s over the run): rows of a serving pair
        ratio = vb / va if va and not math.isnan(va) else math.nan
        rows.append((m.key, m.label_for(on_gpu), m.unit, va, vb, vb - va, ratio))
    metrics = _without_repeats(pd.DataFrame(rows, columns=list(METRIC_COLUMNS)))
    warnings = tuple(pair_warnings(a, b))
    diff = op_diff(a, b)
    batches = compare_composition(a, b)
    if a.anatomy is None or b.anatomy is None or warnings:  # an unlike pair: no cause, from the anatomy or else
        sentence = _with_composition_phrase(_sentence(metrics, label_a, label_b, warnings=warnings), batches)
        return Comparison(label_a, label_b, metrics, sentence, composition=batches, warnings=warnings, op_diff=diff)
    inside = compare_anatomy(a.anatomy, b.anatomy)
    categories = pd.DataFrame(inside["categories"], columns=list(CATEGORY_COLUMNS)).astype({"ratio": float})
    sentence = _with_composition_phrase(_sentence(metrics, label_a, label_b, categories, warnings), batches)
    phrase = anatomy_phrase(inside)
    if phrase:  # "...; elementwise time fell 40%; gemm unchanged."
        where = "the median decode step" if a.summary.step_kind == b.summary.step_kind == "decode" else "the step"
        sentence = f"{sentence.removesuffix('.')}; inside {where}, {phrase}."
    return Comparison(
        label_a, label_b, metrics, sentence, categories, inside["layers"], batches, warnings=warnings, op_diff=diff
    )


def _without_repeats(metrics: pd.DataFrame) -> pd.DataFrame:
    """The table without a per-step row that repeats its decode row exactly (a decode trace's per-step figures
    are its decode figures): such a row is shown only where it says something the decode row does not."""
    by_key = metrics.set_index("metric")
    repeats = []
    for m in COMPARED_METRICS:
        twin = m.stand_in
        if not twin or twin not in by_key.index or m.key not in by_key.index:
            continue
        own, other = by_key.loc[m.key, ["a", "b"]], by_key.loc[twin, ["a", "b"]]
        if own.notna().all() and ((own - other).abs() < 1e-9).all():
            repeats.append(twin)
    return metrics[~metrics["metric"].isin(repeats)].reset_index(drop=True)


def compare_composition(a: Analysis, b: Analysis) -> pd.DataFrame:
    """What the two runs' batches held, row by row (COMPOSITION_COLUMNS; NaN where a trace does not tell)."""
    ta, tb = composition_table(a.steps, requests_of(a)), composition_table(b.steps, requests_of(b))

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
    """The sentence's numbers as every table shows them (analysis.number_format: 3 significant digits)."""
    return number_format.format_value(value, unit)


def _phrase(row: pd.Series) -> str:
    return f"{row['label']} from {_fmt(row['a'], row['unit'])} to {_fmt(row['b'], row['unit'])}"


def _speed(ratio: float, higher_is_better: bool = False) -> str:
    """ "(2.0x faster)" from B / A of a time (or of a rate, `higher_is_better`)."""
    if ratio <= 0 or math.isnan(ratio):
        return ""
    slower = 1 / ratio if higher_is_better else ratio
    if slower < 1:
        return f" ({number_format.sig(1 / slower, strip=True)}x faster)"
    return f" ({number_format.sig(slower, strip=True)}x slower)" if slower > 1 else " (unchanged)"


# what the sentence can lead with, ITL preferred on a near tie
END_TO_END = ("itl_p50_ms", "step_ms", "decode_tokens_per_s", "tokens_per_s")
_NEAR_TIE = 0.05  # |log ratio| within this share of the largest counts as a tie
SECONDARY = (
    "launches_per_decode_step",
    "launches_per_step",
    "gpu_idle_per_decode_step_us",
    "gpu_idle_per_step_us",
    "kernels_per_decode_step",
    "kernels_per_step",
    "ttft_ms",
)
_SAME_AS = {  # a per-step row says nothing more when its decode row is in the sentence
    "launches_per_step": "launches_per_decode_step",
    "gpu_idle_per_step_us": "gpu_idle_per_decode_step_us",
    "kernels_per_step": "kernels_per_decode_step",
}


def _lead_key(known: pd.DataFrame) -> str | None:
    """The largest end-to-end change both traces have (ITL p50, step time, tokens/s), else TTFT, else None."""
    sizes = {
        k: abs(math.log(known.loc[k, "b"] / known.loc[k, "a"]))
        for k in END_TO_END
        if k in known.index and known.loc[k, "a"] > 0 and known.loc[k, "b"] > 0
    }
    if sizes:
        largest = max(sizes.values())
        return next(k for k in END_TO_END if k in sizes and sizes[k] >= largest * (1 - _NEAR_TIE))
    return "ttft_ms" if "ttft_ms" in known.index else None


def _cause(known: pd.DataFrame, lead_key: str, categories: pd.DataFrame | None) -> tuple[str | None, str | None]:
    """(the row key or category behind most of a step-time change, its phrase), from the table's own rows."""
    if lead_key not in END_TO_END or ("step_ms" not in known.index and "itl_p50_ms" not in known.index):
        return None, None
    step = known.loc["itl_p50_ms" if "itl_p50_ms" in known.index else "step_ms"]
    step_delta_us = float(step["delta"]) * 1e3
    idle_key = next((k for k in ("gpu_idle_per_decode_step_us", "gpu_idle_per_step_us") if k in known.index), None)
    # the headline's change as a change of time (a rate that rose is time that fell): a step time that moved the
    # other way cannot explain it, and neither can anything that moved with that step time
    lead_delta = float(known.loc[lead_key, "delta"])
    as_time = -lead_delta if metric(lead_key).better == "higher" else lead_delta
    if not step_delta_us or as_time * step_delta_us <= 0:
        return None, None
    if idle_key is not None:
        idle = known.loc[idle_key]
        if idle["delta"] * step_delta_us > 0 and abs(idle["delta"]) >= 0.5 * abs(step_delta_us):
            return idle_key, _phrase(idle)
    if categories is not None and len(categories):
        top = categories.loc[categories["delta_us"].abs().idxmax()]
        if top["delta_us"] * step_delta_us > 0 and abs(top["delta_us"]) >= 0.3 * abs(step_delta_us):
            return None, f"{top['category']} time from {_fmt(top['a_us'], 'us')} to {_fmt(top['b_us'], 'us')}"
    return None, None


def _sentence(
    metrics: pd.DataFrame,
    label_a: str,
    label_b: str,
    categories: pd.DataFrame | None = None,
    warnings: tuple[str, ...] = (),
) -> str:
    """One sentence: the largest end-to-end change, what moved it most, the other notable changes; every number
    is a row of the table (or of the category table). A pair that is not like for like says what differs and sets
    the headline figures side by side, without a verdict or a cause (_side_by_side)."""
    by_key = metrics.set_index("metric")
    subject = _subject(label_a, label_b)
    known = by_key.dropna(subset=["a", "b"])
    lead_key = _lead_key(known)
    if lead_key is None:
        return _nothing_to_compare(by_key, label_a, label_b)
    if warnings:
        return _side_by_side(known, lead_key, label_a, label_b, warnings)
    lead = by_key.loc[lead_key]
    verb = "cut" if lead["b"] < lead["a"] else ("raised" if lead["b"] > lead["a"] else "left")
    higher = metric(lead_key).better == "higher"
    head = f"{subject} {verb} {_phrase(lead)}{_speed(lead['ratio'], higher)}"
    cause_key, cause = _cause(known, lead_key, categories)
    if cause:
        head += f", mostly {cause}"
    parts = [head]
    said = {lead_key, cause_key}
    for key in SECONDARY:
        if key in said or _SAME_AS.get(key) in said or key not in known.index:
            continue
        row = known.loc[key]
        base = abs(row["a"]) or abs(row["b"])
        if base and abs(row["delta"]) / base > _NOTABLE_CHANGE:
            parts.append(_phrase(row))
            said.add(key)
    return "; ".join(parts) + "."


def _side_by_side(known: pd.DataFrame, lead_key: str, label_a: str, label_b: str, warnings: tuple[str, ...]) -> str:
    """A pair that is not like for like: what differs, then the headline figures side by side, with no verdict (no
    "faster", "cut", "x slower") and no cause: the difference in what ran explains as much as any change measured."""
    keys = [k for k in (lead_key, *END_TO_END, "ttft_ms") if k in known.index]
    figures = []
    for key in dict.fromkeys(keys):
        row = known.loc[key]
        figures.append(f"{row['label']} {_fmt(row['a'], row['unit'])} (A) and {_fmt(row['b'], row['unit'])} (B)")
    return f"{unlike_prefix(warnings)}no verdict on {label_b} against {label_a}. Side by side: {'; '.join(figures)}."


def unlike_prefix(warnings: tuple[str, ...]) -> str:
    """How the sentence of an unlike pair opens: what differs (a page that lists the differences itself shows the
    sentence without it)."""
    return f"Not like for like ({'; '.join(warnings)}): " if warnings else ""


def _nothing_to_compare(by_key: pd.DataFrame, label_a: str, label_b: str) -> str:
    has = by_key.loc["step_ms", ["a", "b"]].notna() if "step_ms" in by_key.index else pd.Series([False, False])
    if bool(has.iloc[0]) != bool(has.iloc[1]):
        only = label_a if bool(has.iloc[0]) else label_b
        return f"Only {only} has steps: nothing per step to compare ({label_a} vs {label_b})."
    return f"Neither trace has steps in common figures: nothing per step to compare ({label_a} vs {label_b})."
