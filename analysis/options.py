"""Knobs of the analysis, with the defaults the CLI and app use.

Every door (the CLI, the app, the notebook API, batch) builds one of these and hands it to the front door, which
keys cached answers on all of its fields (analysis/result_key.py): a field added here is part of the key the day
it is added. Checked here, so every door refuses the same values with the same words. Standard library only: the
command line's warm path builds one before numpy or pandas is imported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .categories import Rule

MAX_GAP_THRESHOLD_NS = 10**12  # 1000 s: any longer "gap" threshold would hide everything
MAX_STEP_REGEX_CHARS = 500
MAX_BATCH = 1_000_000  # sequences per step a user may type


@dataclass(frozen=True)
class AnalysisOptions:
    gap_threshold_ns: int = 1_000  # idle intervals shorter than this are not gaps
    step_regex: str | None = None  # a user's own step annotation pattern, tried first
    outlier_factor: float = 3.0  # a decode step slower than this times the median is an outlier
    host_bound_idle_share: float = 0.20  # decode idle above this share of the step -> host-bound finding
    anatomy: bool = True  # categories per step and layers (analysis.anatomy); False skips them
    category_rules: tuple[Rule, ...] = ()  # user rules (analysis.categories.load_rules), tried before the table
    # sequences per step where the trace does not say (no input shapes, no engine annotation): typed by the user, so
    # per-token figures have a batch to rest on and say that it was typed (analysis.step_figures.typed_batch)
    batch: int | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.gap_threshold_ns <= MAX_GAP_THRESHOLD_NS:
            raise ValueError("--gap-threshold-us must be a number of microseconds from 0 to 1e9")
        if self.step_regex is not None and len(self.step_regex) > MAX_STEP_REGEX_CHARS:
            raise ValueError(f"--step-regex is longer than {MAX_STEP_REGEX_CHARS} characters")
        if not (math.isfinite(self.outlier_factor) and self.outlier_factor > 1):
            raise ValueError("the outlier factor must be above 1")
        if not (math.isfinite(self.host_bound_idle_share) and 0 <= self.host_bound_idle_share <= 1):
            raise ValueError("the host-bound idle share must be between 0 and 1")
        if self.batch is not None and not (
            isinstance(self.batch, int) and not isinstance(self.batch, bool) and 1 <= self.batch <= MAX_BATCH
        ):
            raise ValueError(f"--batch must be a whole number of sequences from 1 to {MAX_BATCH:,}")

    @classmethod
    def from_us(cls, gap_threshold_us: float = 1.0, **fields) -> AnalysisOptions:
        """Options with the gap threshold in microseconds, as the CLI and the app take it; ValueError (one line)
        for inf, NaN, negative or huge values."""
        number = isinstance(gap_threshold_us, int | float) and math.isfinite(gap_threshold_us)
        if not number or not 0 <= gap_threshold_us <= MAX_GAP_THRESHOLD_NS / 1000:
            raise ValueError(f"--gap-threshold-us must be microseconds from 0 to 1e9, not {gap_threshold_us}")
        return cls(gap_threshold_ns=int(gap_threshold_us * 1000), **fields)
