"""Whether two traces are a fair pair: what differs between them besides the change being measured.

A comparison of a dense 8B model on SGLang with an MoE model on vLLM reads like a speed-up unless it says the
pair is not like for like. Each warning names what differs, from what the analyses hold: the device and engine
(analysis.trace_facts), the model (the roofline's shape when one was given, else the structure: layer count,
mixture-of-experts kernels), the main step kind (analysis.step_figures), the batch. Unknown on either side is
no warning: only a difference both sides show is reported. An empty list means the pair is comparable.
"""

from __future__ import annotations

import pandas as pd

from .model import Analysis
from .roofline.gpus import match_gpu
from .step_figures import main_steps


def pair_warnings(a: Analysis, b: Analysis) -> list[str]:
    """What makes B not like for like with A, one sentence each; [] when nothing does."""
    checks = (_platform, _device, _ranks, _engine, _model, _step_kind, _batch)
    return [w for check in checks if (w := check(a, b))]


def _platform(a: Analysis, b: Analysis) -> str | None:
    if a.summary.on_gpu == b.summary.on_gpu:
        return None
    which = ("A", "B") if not a.summary.on_gpu else ("B", "A")
    return f"{which[0]} is a CPU-only trace and {which[1]} a GPU trace: host ops and kernels are not the same unit"


def _device(a: Analysis, b: Analysis) -> str | None:
    da, db = a.facts.device, b.facts.device
    if not da or not db or _same_device(da, db):
        return None
    return f"different devices: A ran on {da}, B on {db}"


def _same_device(da: str, db: str) -> bool:
    """Names that map to one GPU table row are one device ("NVIDIA H100 80GB HBM3" and "H100 SXM")."""
    ra, rb = match_gpu(da), match_gpu(db)
    if ra is not None and rb is not None:
        return ra.name == rb.name
    return " ".join(da.lower().split()) == " ".join(db.lower().split())


def _ranks(a: Analysis, b: Analysis) -> str | None:
    ra, rb = a.facts.world_size, b.facts.world_size
    return None if ra == rb else f"different parallelism: A is one of {ra} rank(s), B one of {rb}"


def _engine(a: Analysis, b: Analysis) -> str | None:
    ea, eb = a.facts.engine, b.facts.engine
    if not ea or not eb or ea == eb:
        return None
    return f"different engines: A is {ea}, B is {eb}"


def model_name(analysis: Analysis) -> str | None:
    """The model the analysis was read against (a run.json, --model, the app's picker), None when none was given."""
    roof = analysis.summary.roofline
    if roof is not None and roof.model:
        return roof.model
    anat = analysis.anatomy
    if anat is not None and anat.roofline.get("status") == "ok":
        return anat.roofline.get("model")
    return None


def _model(a: Analysis, b: Analysis) -> str | None:
    ma, mb = model_name(a), model_name(b)
    if ma and mb:
        return None if ma == mb else f"different models: A is {ma}, B is {mb}"
    return _structure(a, b)


def _structure(a: Analysis, b: Analysis) -> str | None:
    """Without model names: a different layer count, or mixture-of-experts kernels on one side only."""
    facts = []
    la, lb = _layers(a), _layers(b)
    if la and lb and la != lb:
        facts.append(f"A has {la} layers, B {lb}")
    moe_a, moe_b = _runs_moe(a), _runs_moe(b)
    if moe_a is not None and moe_b is not None and moe_a != moe_b:
        facts.append(f"{'A' if moe_a else 'B'} runs mixture-of-experts kernels, {'B' if moe_a else 'A'} none")
    return f"probably different models: {'; '.join(facts)}" if facts else None


def _layers(analysis: Analysis) -> int | None:
    return analysis.anatomy.layers.layers if analysis.anatomy is not None else None


def _runs_moe(analysis: Analysis) -> bool | None:
    anat = analysis.anatomy
    if anat is None or anat.median_step is None:
        return None
    return anat.median_categories().get("moe", {}).get("time_us", 0) > 0


def _step_kind(a: Analysis, b: Analysis) -> str | None:
    ka, kb = a.summary.step_kind, b.summary.step_kind
    if not ka or not kb or ka == kb:
        return None
    return f"different step kinds: A's steps are {ka}, B's {kb}: step time and tokens per step mean different work"


def _batch(a: Analysis, b: Analysis) -> str | None:
    ba, bb = median_batch(a), median_batch(b)
    if ba is None or bb is None or ba == bb:
        return None
    return f"different batch: A runs {ba} sequence(s) per step, B {bb}: per-step times are not per token"


def median_batch(analysis: Analysis) -> int | None:
    """Sequences per step of the main kind (the `sequences` column where step composition gives it, else
    `batch`), None when unknown."""
    steps = analysis.steps
    if not len(steps):
        return None
    outliers = steps["outlier"].to_numpy(dtype=bool) if "outlier" in steps else None
    _, rows = main_steps(steps, outliers if outliers is not None else [False] * len(steps))
    column = "sequences" if "sequences" in rows else "batch"
    known = pd.to_numeric(rows[column], errors="coerce").dropna()
    return int(known.median()) if len(known) else None
