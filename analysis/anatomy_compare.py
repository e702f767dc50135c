"""A against B inside the median decode step: time per category and layers, and one phrase for the summary."""

from __future__ import annotations

from .anatomy import Anatomy
from .categories import CATEGORIES

UNCHANGED = 0.05  # relative change below which a category reads "unchanged"


def compare_anatomy(a: Anatomy, b: Anatomy) -> dict:
    """`categories: [{category, a_us, b_us, delta_us, ratio}]` (median decode step of each) and
    `layers: {a, b}` (each side's summary.anatomy layer figures)."""
    ca, cb = a.median_categories(), b.median_categories()
    rows = []
    for cat in CATEGORIES:
        a_us = ca.get(cat, {}).get("time_us", 0.0)
        b_us = cb.get(cat, {}).get("time_us", 0.0)
        if a_us == 0 and b_us == 0:
            continue
        rows.append(
            {
                "category": cat,
                "a_us": a_us,
                "b_us": b_us,
                "delta_us": b_us - a_us,
                "ratio": (b_us / a_us) if a_us > 0 else None,
                "a_kernels": ca.get(cat, {}).get("kernels", 0),
                "b_kernels": cb.get(cat, {}).get("kernels", 0),
            }
        )
    layers = {side: {k: v for k, v in anat.layers.as_dict().items()} for side, anat in (("a", a), ("b", b))}
    return {"categories": rows, "layers": layers}


def anatomy_phrase(result: dict, launches_a: int | None = None, launches_b: int | None = None) -> str:
    """E.g. "B removed 380 launches; elementwise time fell 40%; gemm unchanged": launches (when
    given), then the category that changed most, then the largest category if it did not change."""
    parts = []
    if launches_a is not None and launches_b is not None and launches_a != launches_b:
        diff = launches_a - launches_b
        parts.append(f"B {'removed' if diff > 0 else 'added'} {abs(diff)} launches")
    rows = [r for r in result["categories"] if r["a_us"] > 0]
    if not rows:
        return "; ".join(parts)
    moved = max(rows, key=lambda r: abs(r["delta_us"]))
    if abs(moved["delta_us"]) / moved["a_us"] >= UNCHANGED:
        pct = 100 * abs(moved["delta_us"]) / moved["a_us"]
        parts.append(f"{moved['category']} time {'fell' if moved['delta_us'] < 0 else 'rose'} {pct:.0f}%")
    biggest = max(rows, key=lambda r: r["a_us"])
    if biggest is not moved and abs(biggest["delta_us"]) / biggest["a_us"] < UNCHANGED:
        parts.append(f"{biggest['category']} unchanged")
    return "; ".join(parts)
