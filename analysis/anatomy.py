"""Inside a step: what the device (or, on a CPU trace, the host) spends each step's time on.

    anat = anatomy(timeline, analysis, model=shape, hardware=hw)   # one call, after analyze()
    anat.step_categories      # long frame: step, kind, category, kernels, time_ns
    anat.step_json()          # per step {category: {"kernels", "time_us"}} for the CLI JSON
    anat.summary()            # summary.anatomy: layers, layer_us, head_us, tail_us, evidence, roofline

Work is placed in steps the way analysis/steps.py places it: by the host time of its launch call
(correlation), falling back to its own start; a step owns [start_ns, end_ns). On a GPU trace the
work is kernels, copies and sets, each timed by its duration; on a CPU trace it is host ops, each
timed by its self time so that nested ops are not counted twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from ..parsers.timeline import GPU_KINDS, HOST_LAUNCH_KINDS, Timeline
from .activity import Activity, derive_activity
from .categories import (
    CATEGORIES,
    GENERIC,
    Rule,
    categorised_rows,
    categorize,
    enclosing_categories,
)
from .event_rows import kind_mask, take_rows
from .host_work import HostWork, host_work
from .layers import LayerResult, detect_layers
from .model import Analysis, Finding
from .roofline.accounting import decode_cost
from .roofline.gpus import match_gpu
from .roofline.hardware import Hardware
from .roofline.model_config import ModelShape
from .roofline.sources import timeline_device
from .steps import _place

ROOFLINE_CATEGORIES = ("gemm", "attention")  # the ones a model config gives bytes for


@dataclass(frozen=True)
class Anatomy:
    on_gpu: bool
    # step, start_ns, end_ns, time_ns, name, short, category, leaf (counted as a kernel), outer (in the layer sequence)
    work: pd.DataFrame
    step_categories: pd.DataFrame  # step, kind, category, kernels, time_ns (only non-zero rows)
    median_step: int | None  # row in analysis.steps used for layers and the roofline
    median_kind: str | None
    layers: LayerResult
    roofline: dict  # per-category roofline of the median step, or {"status": why not}
    notes: tuple[str, ...] = field(default_factory=tuple)
    hardware: Hardware | None = None  # the device the roofline reads bandwidth from (matched from the trace or given)

    def steps_json(self, n_steps: int) -> list[dict[str, dict[str, float]]]:
        """`step_json` of every step 0..n_steps-1 in one pass (the CLI JSON's per-step `categories`)."""
        out: list[dict[str, dict[str, float]]] = [{} for _ in range(n_steps)]
        frame = self.step_categories
        for step, cat, kernels, time_ns in zip(
            frame["step"].to_numpy(), frame["category"].astype(str), frame["kernels"], frame["time_ns"], strict=True
        ):
            if 0 <= step < n_steps:
                out[step][cat] = {"kernels": int(kernels), "time_us": round(float(time_ns) / 1e3, 3)}
        return out

    def step_json(self, step: int) -> dict[str, dict[str, float]]:
        rows = self.step_categories[self.step_categories["step"] == step]
        return {
            str(r.category): {"kernels": int(r.kernels), "time_us": round(float(r.time_ns) / 1e3, 3)}
            for r in rows.itertuples()
        }

    def step_table(self) -> pd.DataFrame:
        """One row per step, a `<category>_us` column per category seen (for the steps CSV)."""
        if self.step_categories.empty:
            return pd.DataFrame()
        wide = self.step_categories.pivot_table(
            index="step", columns="category", values="time_ns", aggfunc="sum", fill_value=0, observed=True
        )
        wide.columns = [f"{c}_us" for c in wide.columns]
        return wide / 1e3

    def median_categories(self) -> dict[str, dict[str, float]]:
        return self.step_json(self.median_step) if self.median_step is not None else {}

    def findings(self) -> tuple[Finding, ...]:
        """The per-category roofline's finding: the category furthest below its roofline."""
        roof = self.roofline
        if roof.get("status") != "ok" or not roof.get("finding"):
            return ()
        worst = min(
            (r for r in roof["categories"] if r["pct_of_roofline"] is not None), key=lambda r: r["pct_of_roofline"]
        )
        return (
            Finding(
                id="category-roofline",
                severity="warn" if worst["pct_of_roofline"] < 50 else "info",
                title=f"{worst['category']} runs at {worst['pct_of_roofline']:.0f}% of its memory roofline",
                detail=roof["finding"],
                evidence={
                    "time_us": worst["time_us"],
                    "floor_us": worst["floor_us"],
                    "bytes": float(worst["bytes"]),
                    "achieved_gb_s": worst["achieved_gb_s"],
                    "pct_of_roofline": worst["pct_of_roofline"],
                },
            ),
        )

    def summary(self) -> dict:
        """The `summary.anatomy` object for the CLI JSON."""
        unit = "kernels" if self.on_gpu else "host ops"
        out = {"step": self.median_step, "step_kind": self.median_kind, "unit": unit}
        out.update(self.layers.as_dict())
        out["categories"] = self.median_categories()
        out["roofline"] = self.roofline
        out["notes"] = list(self.notes)
        return out


def anatomy(
    timeline: Timeline,
    analysis: Analysis,
    model: ModelShape | None = None,
    hardware: Hardware | None = None,
    rules: tuple[Rule, ...] = (),
    activity: Activity | None = None,
    host: HostWork | None = None,
) -> Anatomy:
    """Categories per step, layers and the per-category roofline of the median decode step.

    `activity`: derive_activity(timeline) when the caller has it already (analyze() does), saving a second pass.
    `host`: host_work(timeline.events, rules) of a CPU trace when the caller has it already (analyze() computes
    it in a thread while it finds the steps); ignored on a GPU trace."""
    ev = timeline.events
    on_gpu = bool(kind_mask(ev, GPU_KINDS).any())
    steps = analysis.steps
    notes: list[str] = []
    if on_gpu:
        act = activity if activity is not None else derive_activity(timeline)
        short, category = categorize(pd.Series(act.work_name), rules)
        category, refined_note = _refine_by_module(ev, category, rules)
        if refined_note:
            notes.append(refined_note)
        work = pd.DataFrame(
            {
                "start_ns": act.work_start,
                "end_ns": act.work_end,
                "time_ns": act.work_end - act.work_start,
                "anchor_ns": act.work_anchor,
                "name": act.work_name,
                "short": short,
                "category": category,
                "leaf": act.work_is_kernel,
                "outer": act.work_is_kernel,
            }
        )
    else:
        work, host_notes = host if host is not None else host_work(ev, rules)
        notes.extend(host_notes)
    work["category"] = pd.Categorical(work["category"], categories=CATEGORIES)
    if len(steps):
        start = steps["start_ns"].to_numpy()
        work["step"] = _place(work["anchor_ns"].to_numpy(), start, steps["end_ns"].to_numpy())
    else:
        work["step"] = -1
    work = work.drop(columns="anchor_ns")
    step_categories = _per_step(work, steps)
    median = median_step(analysis)
    kind = str(steps["kind"].iloc[median]) if median is not None else None
    if median is not None and kind != "decode":
        notes.append(f"no decode step: layers are read from the {kind} step with the most work")
    layers = _layers_of(work, median, on_gpu)
    if hardware is None and on_gpu:
        hardware = match_gpu(*timeline_device(timeline))
    roofline = category_roofline(step_categories, steps, median, model, hardware)
    return Anatomy(on_gpu, work, step_categories, median, kind, layers, roofline, tuple(notes), hardware)


def with_anatomy(
    timeline: Timeline,
    analysis: Analysis,
    model: ModelShape | None = None,
    hardware: Hardware | None = None,
    rules: tuple[Rule, ...] = (),
    activity: Activity | None = None,
    host: HostWork | None = None,
) -> Analysis:
    """The analysis with its `anatomy` set and the anatomy's findings joined to its own."""
    anat = anatomy(timeline, analysis, model, hardware, rules, activity, host)
    return replace(analysis, anatomy=anat, findings=_joined(analysis.findings, anat))


def with_category_roofline(analysis: Analysis, model: ModelShape | None, hardware: Hardware | None = None) -> Analysis:
    """Re-read the per-category roofline for a model known only after analyze(): a run.json beside
    the trace, the CLI's --model, the app's picker. Categories and layers stay as they are;
    `hardware` None keeps the device the anatomy matched from the trace."""
    anat = analysis.anatomy
    if anat is None:
        return analysis
    hardware = hardware or anat.hardware
    roofline = category_roofline(anat.step_categories, analysis.steps, anat.median_step, model, hardware)
    anat = replace(anat, roofline=roofline, hardware=hardware)
    return replace(analysis, anatomy=anat, findings=_joined(analysis.findings, anat))


def _joined(findings: tuple[Finding, ...], anat: Anatomy) -> tuple[Finding, ...]:
    own = {f.id for f in anat.findings()} | {"category-roofline"}
    return tuple(f for f in findings if f.id not in own) + anat.findings()


def _refine_by_module(ev: pd.DataFrame, category: pd.Categorical, rules: tuple[Rule, ...]) -> tuple:
    """Generic kernels (elementwise, other) launched inside a categorised nn.Module (the trace's
    python stack, when recorded) take the module's category: an unfused RMSNorm's pow, mean, mul
    and rsqrt kernels are norm time. Returns (categories, a note or None)."""
    spans = categorised_rows(ev["name"], kind_mask(ev, ["python"]), rules)  # nn.Module spans (with_stack)
    modules = take_rows(ev, spans, ("ts", "dur", "tid", "name"))
    if modules.empty:
        return category, None
    gpu = take_rows(ev, kind_mask(ev, GPU_KINDS), ("correlation",))
    launch_rows = kind_mask(ev, HOST_LAUNCH_KINDS) & (ev["correlation"].to_numpy() >= 0)
    launches = take_rows(ev, launch_rows, ("ts", "tid", "correlation"))
    corr = launches["correlation"].to_numpy()
    sort = np.argsort(corr, kind="stable")
    corr = corr[sort]
    gpu_corr = gpu["correlation"].to_numpy()
    pos = np.clip(np.searchsorted(corr, gpu_corr), 0, max(len(corr) - 1, 0))
    found = (len(corr) > 0) & (corr[pos] == gpu_corr) & (gpu_corr >= 0) if len(corr) else np.zeros(len(gpu), bool)
    rows = sort[pos[found]]
    module_cat = np.full(len(gpu), -1, dtype=np.int64)
    module_cat[found] = enclosing_categories(
        modules["tid"].to_numpy(),
        modules["ts"].to_numpy(),
        modules["dur"].to_numpy(),
        modules["name"],
        launches["tid"].to_numpy()[rows],
        launches["ts"].to_numpy()[rows],
        rules,
    )
    codes = np.asarray(category.codes, dtype=np.int64)
    generic = np.isin(codes, [CATEGORIES.index(c) for c in GENERIC])
    change = generic & (module_cat >= 0) & (module_cat != codes)
    if not change.any():
        return category, None
    codes = np.where(change, module_cat, codes)
    note = f"{int(change.sum())} generic kernels categorised by the nn.Module that launched them (python stack)"
    return pd.Categorical.from_codes(codes, categories=CATEGORIES), note


def _per_step(work: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Time and leaf count per (step, category), on integer keys: a groupby would first copy the placed rows of
    every work column. Rows in (step, category) order, then sorted by step and time (descending), stably;
    (step, category) pairs with neither time nor leaves are left out."""
    step = work["step"].to_numpy()
    category = np.asarray(work["category"].array.codes, dtype=np.int64)
    n_cat = len(CATEGORIES)
    placed = (step >= 0) & (category >= 0)
    key = step[placed] * n_cat + category[placed]  # dense: steps x categories
    n_keys = (int(step.max()) + 1) * n_cat if placed.any() else 0
    time_ns = np.zeros(n_keys, dtype=np.int64)
    np.add.at(time_ns, key, work["time_ns"].to_numpy()[placed])
    kernels = np.bincount(key[work["leaf"].to_numpy(dtype=bool)[placed]], minlength=n_keys).astype(np.int64)
    groups = np.flatnonzero((time_ns > 0) | (kernels > 0))
    time_ns, kernels = time_ns[groups], kernels[groups]
    group_step = groups // n_cat
    order = np.lexsort((-time_ns, group_step))
    kinds = steps["kind"].to_numpy() if len(steps) else np.array([], dtype=object)
    frame = pd.DataFrame(
        {
            "step": group_step[order],
            "category": pd.Categorical.from_codes(groups[order] % n_cat, dtype=work["category"].dtype),
            "time_ns": time_ns[order],
            "kernels": kernels[order],
        }
    )
    frame.insert(1, "kind", kinds[frame["step"].to_numpy()] if len(frame) else [])
    return frame


def median_step(analysis: Analysis) -> int | None:
    """The decode step (outliers left out) whose span is the median; without decode steps, the
    step with the most kernels."""
    steps = analysis.steps
    if steps.empty:
        return None
    decode = (steps["kind"] == "decode").to_numpy()
    if "outlier" in steps:
        kept = decode & ~steps["outlier"].to_numpy(dtype=bool)
        decode = kept if kept.any() else decode
    if decode.any():
        rows = np.flatnonzero(decode)
        span = (steps["end_ns"] - steps["start_ns"]).to_numpy()[rows]
        return int(rows[np.argsort(span, kind="stable")[(len(rows) - 1) // 2]])
    return int(np.argmax(steps["kernels"].to_numpy()))


def _layers_of(work: pd.DataFrame, step: int | None, on_gpu: bool) -> LayerResult:
    what = "kernels" if on_gpu else "compute ops"
    if step is None:
        return LayerResult(None, None, None, None, None, None, None, None, (), (), "no step found: layers not counted")
    # a GPU step's kernels; a CPU step's outermost compute ops (linear, sdpa, mul ...): its leaf ops
    # mix in views and allocations that vary from layer to layer
    rows = np.flatnonzero((work["step"].to_numpy() == step) & work["outer"].to_numpy(dtype=bool))
    seq = take_rows(work, rows, ("start_ns", "end_ns", "short", "category"))  # only the columns read below
    if on_gpu:
        seq = seq.sort_values("start_ns", kind="stable")  # device order
    names = pd.Categorical(seq["short"].astype(str)).codes
    cats = seq["category"].cat.codes.to_numpy()
    return detect_layers(names, cats, seq["start_ns"].to_numpy(), seq["end_ns"].to_numpy(), what)


def step_context(steps: pd.DataFrame, row: int) -> int | None:
    """Tokens already cached per sequence before a step: the tokens of its request's earlier steps."""
    same = (steps["request"] == steps["request"].iloc[row]).to_numpy() & (np.arange(len(steps)) < row)
    tokens = steps["tokens"][same]
    if tokens.isna().any() or not same.any():
        return None
    return int(tokens.astype("int64").sum())


def category_roofline(
    step_categories: pd.DataFrame,
    steps: pd.DataFrame,
    row: int | None,
    model: ModelShape | None,
    hardware: Hardware | None,
) -> dict:
    """Bytes each category must move in the median decode step against its measured time.

    gemm: every layer's weights plus lm_head, read once per step; attention: the KV cache of the
    step's context. Whatever is neither is shown as overhead (time with no byte floor here).
    """
    if row is None:
        return {"status": "no step to read"}
    if model is None:
        return {"status": "needs a model (run.json beside the trace, the app's picker or --model PRESET)"}
    if hardware is None:
        return {"status": "needs the device's memory bandwidth (device not in the GPU table)"}
    if steps["kind"].iloc[row] != "decode":
        return {"status": "the per-category roofline is for decode steps; this trace has none"}
    context = step_context(steps, row)
    batch = steps["batch"].iloc[row]
    batch = int(batch) if not pd.isna(batch) else 1
    if context is None:
        return {"status": "needs the step's context length (token counts of earlier steps unknown)"}
    cost = decode_cost(model, context=max(context, 0), batch=batch)
    floor_bytes = {
        "gemm": cost.layers * model.layer_matrix_params * model.dtype_bytes + cost.head_weight_bytes,
        "attention": cost.kv_read_bytes,
    }
    groups = _gemm_groups(model)
    mine = step_categories[step_categories["step"] == row]
    time_ns = dict(zip(mine["category"].astype(str), mine["time_ns"], strict=True))
    bw = hardware.memory_bytes_per_s
    rows = []
    for cat in ROOFLINE_CATEGORIES:
        t = float(time_ns.get(cat, 0))
        b = float(floor_bytes[cat])
        floor_us = b / bw * 1e6
        rows.append(
            {
                "category": cat,
                "bytes": int(b),
                "time_us": t / 1e3,
                "floor_us": floor_us,
                "achieved_gb_s": (b / (t / 1e9) / 1e9) if t > 0 else None,
                "pct_of_roofline": (100.0 * floor_us / (t / 1e3)) if t > 0 else None,
            }
        )
        if rows[-1]["pct_of_roofline"] is not None and rows[-1]["pct_of_roofline"] > 100:
            rows[-1]["note"] = (
                f"faster than {bw / 1e9:.0f} GB/s allows: the bytes came from cache, or the bandwidth figure is low"
            )
    overhead = {c: float(t) / 1e3 for c, t in time_ns.items() if c not in ROOFLINE_CATEGORIES and t > 0}
    measured = [r for r in rows if r["pct_of_roofline"] is not None]
    finding = None
    if measured:
        worst = min(measured, key=lambda r: r["pct_of_roofline"])
        finding = (
            f"{worst['category']} is furthest below its roofline: {worst['time_us']:.1f} us for "
            f"{worst['bytes'] / 1e6:.1f} MB is {worst['achieved_gb_s']:.1f} GB/s, "
            f"{worst['pct_of_roofline']:.0f}% of {bw / 1e9:.0f} GB/s ({hardware.name})"
        )
    return {
        "status": "ok",
        "model": model.name,
        "hardware": hardware.name,
        "memory_gb_s": bw / 1e9,
        "context": context,
        "batch": batch,
        "categories": rows,
        "gemm_groups_bytes": groups,
        "overhead_us": overhead,
        "overhead_total_us": sum(overhead.values()),
        "finding": finding,
    }


def _gemm_groups(model: ModelShape) -> dict[str, int]:
    """Weight bytes read per decode step by each GEMM group, all layers together."""
    h, q, kv, inter, b, n = model.hidden, model.q_dim, model.kv_dim, model.intermediate, model.dtype_bytes, model.layers
    return {
        "qkv_proj": n * h * (q + 2 * kv) * b,
        "o_proj": n * q * h * b,
        "gate_up_proj": n * 2 * h * inter * b,
        "down_proj": n * inter * h * b,
        "lm_head": model.vocab * h * b,
    }
