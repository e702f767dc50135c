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

from stepscope.parsers.timeline import GPU_KINDS, HOST_LAUNCH_KINDS, Timeline
from .activity import Activity, derive_activity
from .annotations import engine_batch
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
from .number_format import format_value
from .roofline.accounting import expert_weight_bytes, kv_read_tokens, layer_weight_bytes
from .roofline.gpus import match_gpu
from .roofline.hardware import Hardware
from .roofline.model_config import ModelShape
from .roofline.sources import timeline_device
from .step_figures import main_kind
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
    role: str = ""  # which step median_step is, in words ("step 3, the only mixed step"): analysis.anatomy.step_role

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
        """What the step spends its time on (category_findings) and the per-category roofline's finding."""
        return category_findings(self) + self._roofline_findings()

    def _roofline_findings(self) -> tuple[Finding, ...]:
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
                cost_us=max(float(worst["time_us"]) - float(worst["floor_us"]), 0.0),  # in this one step
                saving_us=max(float(worst["time_us"]) - float(worst["floor_us"]), 0.0),
            ),
        )

    def summary(self) -> dict:
        """The `summary.anatomy` object for the CLI JSON."""
        unit = "kernels" if self.on_gpu else "host ops"
        out = {"step": self.median_step, "step_kind": self.median_kind, "step_role": self.role, "unit": unit}
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
        notes.append(f"no decode step: categories and layers are read from {step_role(steps, median)}")
    layers = _layers_of(work, median, on_gpu)
    if hardware is None and on_gpu:
        hardware = match_gpu(*timeline_device(timeline))
    roofline = category_roofline(step_categories, steps, median, model, hardware)
    role = step_role(steps, median)
    return Anatomy(on_gpu, work, step_categories, median, kind, layers, roofline, tuple(notes), hardware, role)


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
    own = {f.id for f in anat.findings()} | {"category-roofline", "category-share", "category-dominant"}
    return tuple(f for f in findings if f.id not in own) + anat.findings()


FUSABLE = ("elementwise", "norm", "rotary")  # small memory-bound kernels that fusion removes
FUSABLE_SHARE_SHOWN = 0.30  # their share of a step's kernel time above which it is a finding
DOMINANT_SHARE = 0.50  # one category above this share of a step's kernel time sets the step's time
_DOMINANT_ADVICE = {
    "gemm": "the weight GEMMs set the step's time: compare them with their roofline (--model) and check the "
    "GEMM backend's tuning for these shapes",
    "moe": "the expert GEMMs set the step's time: check the fused-MoE kernel's tuning for this batch and how evenly "
    "tokens spread over the experts",
    "attention": "attention sets the step's time: long contexts or an unfused attention backend (check the backend "
    "and the KV cache's dtype)",
    "communication": "collectives set the step's time: overlap them with compute or use fewer ranks",
    "sampling": "sampling sets the step's time: keep it on the GPU and fused (top-k/top-p kernels)",
}


def category_findings(anat: Anatomy) -> tuple[Finding, ...]:
    """What the anatomy's step spends its kernel (host-op) time on, when one part says what to change: small
    memory-bound kernels (elementwise, norm, rotary) above FUSABLE_SHARE_SHOWN of it, or a single category above
    DOMINANT_SHARE. Priced by that time summed over every step of the same kind."""
    cats = anat.median_categories()
    total = sum(c["time_us"] for c in cats.values())
    if anat.median_step is None or total <= 0:
        return ()
    unit = "kernel" if anat.on_gpu else "host-op"
    of_kind = anat.step_categories[anat.step_categories["kind"] == anat.median_kind]
    kind_us = of_kind.groupby("category", observed=True)["time_ns"].sum() / 1e3
    out: list[Finding] = []
    fusable = {c: cats[c]["time_us"] for c in FUSABLE if c in cats and cats[c]["time_us"] > 0}
    share = sum(fusable.values()) / total
    if share >= FUSABLE_SHARE_SHOWN:
        parts = ", ".join(f"{c} {format_value(t, 'us')} ({t / total:.0%})" for c, t in fusable.items())
        names = ", ".join(fusable)
        out.append(
            Finding(
                "category-share",
                "warn" if share >= 0.5 else "info",
                f"{share:.0%} of the {anat.median_kind} step's {unit} time is {names}",
                f"In {anat.role}: {parts} of {format_value(total, 'us')}. These are small memory-bound kernels that "
                "fusion removes: torch.compile, or fused RMSNorm, rotary and SiLU-and-multiply kernels (the "
                "inference engines' own).",
                {"share": share, "time_us": sum(fusable.values()), "step_time_us": total},
                cost_us=float(sum(kind_us.get(c, 0.0) for c in fusable)),
                saving_us=float(sum(kind_us.get(c, 0.0) for c in fusable)),  # at most: what fusion removes
            )
        )
    top, top_us = max(cats.items(), key=lambda kv: kv[1]["time_us"])[0], max(c["time_us"] for c in cats.values())
    if top_us / total >= DOMINANT_SHARE and top not in FUSABLE:
        advice = _DOMINANT_ADVICE.get(top, f"{top} kernels set the step's time")
        out.append(
            Finding(
                "category-dominant",
                "info",
                f"{top} takes {top_us / total:.0%} of the {anat.median_kind} step's {unit} time",
                f"In {anat.role}: {top} {format_value(top_us, 'us')} of {format_value(total, 'us')} "
                f"({cats[top]['kernels']} "
                f"{unit}s): {advice}.",
                {"share": top_us / total, "time_us": top_us, "step_time_us": total},
                cost_us=float(kind_us.get(top, 0.0)),
            )
        )
    return tuple(out)


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
    """The step of the main kind (decode when there is decode, else mixed, verify, prefill: analysis.step_figures),
    outliers left out, whose span is the median: the step the per-step figures describe."""
    steps = analysis.steps
    kind = main_kind(steps)
    if kind is None:
        return int(np.argmax(steps["kernels"].to_numpy())) if len(steps) else None
    of_kind = (steps["kind"] == kind).to_numpy()
    if "outlier" in steps:
        kept = of_kind & ~steps["outlier"].to_numpy(dtype=bool)
        of_kind = kept if kept.any() else of_kind
    rows = np.flatnonzero(of_kind)
    span = (steps["end_ns"] - steps["start_ns"]).to_numpy()[rows]
    return int(rows[np.argsort(span, kind="stable")[(len(rows) - 1) // 2]])


def step_role(steps: pd.DataFrame, row: int | None) -> str:
    """Which step the anatomy read, in words for captions: "step 12, the median decode step (of 31)"."""
    if row is None:
        return "no step"
    kind = str(steps["kind"].iloc[row])
    count = int((steps["kind"] == kind).sum())
    if count == 1:
        return f"step {row}, the only {kind} step"
    return f"step {row}, the median {kind} step (of {count})"


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
    """Bytes each category must move in the anatomy's step against its measured time.

    gemm: every layer's weights (an MoE model's routed experts apart) plus lm_head, read once per step; moe (an
    MoE model): the routed experts the step's tokens reach (analysis.roofline.accounting.touched_experts);
    attention: the KV cache the step reads. Batch and context come from the engine's annotation where it states
    them (vLLM), else from the token counts of the request's earlier steps (decode steps only). Whatever is in
    none of these categories is shown as overhead (time with no byte floor here).
    """
    if row is None:
        return {"status": "no step to read"}
    if model is None:
        return {"status": "needs a model (run.json beside the trace, the app's picker or --model PRESET)"}
    if hardware is None:
        return {"status": "needs the device's memory bandwidth (device not in the GPU table)"}
    shape = _step_shape(steps, row, model)
    if isinstance(shape, str):
        return {"status": shape}
    sequences, tokens, context, kv_read, source = shape
    kv_token = model.kv_elements_per_token_layer * model.dtype_bytes
    experts = expert_weight_bytes(model, tokens)
    head = (model.embedding_params + model.hidden) * model.dtype_bytes
    floor_bytes = {
        # the layers' matrices (norms and biases are not GEMM work), lm_head's too
        "gemm": layer_weight_bytes(model, tokens)
        - experts
        - model.layers * model.layer_small_params * model.dtype_bytes
        + head,
        "attention": model.layers * kv_read * kv_token,
    }
    categories = ROOFLINE_CATEGORIES
    if model.is_moe:
        floor_bytes["moe"] = experts
        categories = (*ROOFLINE_CATEGORIES, "moe")
    groups = _gemm_groups(model)
    mine = step_categories[step_categories["step"] == row]
    time_ns = dict(zip(mine["category"].astype(str), mine["time_ns"], strict=True))
    bw = hardware.memory_bytes_per_s
    rows = [_category_row(cat, float(time_ns.get(cat, 0)), float(floor_bytes[cat]), bw) for cat in categories]
    overhead = {c: float(t) / 1e3 for c, t in time_ns.items() if c not in categories and t > 0}
    measured = [r for r in rows if r["pct_of_roofline"] is not None]
    finding = None
    if measured:
        worst = min(measured, key=lambda r: r["pct_of_roofline"])
        finding = (
            f"{worst['category']} is furthest below its roofline: {format_value(worst['time_us'], 'us')} for "
            f"{format_value(worst['bytes'], 'B')} is {format_value(worst['achieved_gb_s'], 'GB/s')}, "
            f"{worst['pct_of_roofline']:.0f}% of {format_value(bw / 1e9, 'GB/s')} ({hardware.name})"
        )
    return {
        "status": "ok",
        "model": model.name,
        "hardware": hardware.name,
        "memory_gb_s": bw / 1e9,
        "context": context,
        "batch": sequences,
        "tokens": tokens,
        "source": source,
        "categories": rows,
        "gemm_groups_bytes": groups,
        "overhead_us": overhead,
        "overhead_total_us": sum(overhead.values()),
        "finding": finding,
    }


def _step_shape(steps: pd.DataFrame, row: int, model: ModelShape) -> tuple | str:
    """(sequences, new tokens, cached tokens per sequence, cached tokens read per layer over the batch, source)
    of a step, or why they are unknown."""
    label = str(steps["label"].iloc[row]) if "label" in steps else ""
    stated = engine_batch(label)
    if stated is not None and stated.sequences >= 1 and stated.tokens >= 1:
        context = round(max(stated.kv_tokens - stated.tokens, 0) / stated.sequences)
        read = stated.sequences * kv_read_tokens(model, context)
        return stated.sequences, stated.tokens, context, read, "engine annotation"
    if steps["kind"].iloc[row] != "decode":
        return "the per-category roofline needs a decode step, or an engine annotation that states the batch"
    context = step_context(steps, row)
    if context is None:
        return "needs the step's context length (token counts of earlier steps unknown)"
    batch = steps["batch"].iloc[row]
    if pd.isna(batch):
        return "needs the step's batch (sequences per step: record_shapes=True, or type it with --batch)"
    batch = int(batch)
    context = max(context, 0)
    return batch, batch, context, batch * kv_read_tokens(model, context), "earlier steps' token counts"


def _category_row(category: str, time_ns: float, floor: float, bandwidth: float) -> dict:
    floor_us = floor / bandwidth * 1e6
    out = {
        "category": category,
        "bytes": int(floor),
        "time_us": time_ns / 1e3,
        "floor_us": floor_us,
        "achieved_gb_s": (floor / (time_ns / 1e9) / 1e9) if time_ns > 0 else None,
        "pct_of_roofline": (100.0 * floor_us / (time_ns / 1e3)) if time_ns > 0 else None,
    }
    if out["pct_of_roofline"] is not None and out["pct_of_roofline"] > 100:
        out["note"] = (
            f"faster than {bandwidth / 1e9:.0f} GB/s allows: the bytes came from cache, or the bandwidth figure is low"
        )
    return out


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
