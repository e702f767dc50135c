"""Knobs of the analysis, with the defaults the CLI and app use."""

from __future__ import annotations

from dataclasses import dataclass

from .categories import Rule


@dataclass(frozen=True)
class AnalysisOptions:
    gap_threshold_ns: int = 1_000  # idle intervals shorter than this are not gaps
    step_regex: str | None = None  # a user's own step annotation pattern, tried first
    outlier_factor: float = 3.0  # a decode step slower than this times the median is an outlier
    host_bound_idle_share: float = 0.20  # decode idle above this share of the step -> host-bound finding
    anatomy: bool = True  # categories per step and layers (analysis.anatomy); False skips them
    category_rules: tuple[Rule, ...] = ()  # user rules (analysis.categories.load_rules), tried before the table

    def __post_init__(self) -> None:
        if self.gap_threshold_ns < 0:
            raise ValueError("the gap threshold must not be negative")
        if self.outlier_factor <= 1:
            raise ValueError("the outlier factor must be above 1")
