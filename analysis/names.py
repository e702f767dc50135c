"""Name tests on categorical columns, done once per distinct name instead of once per event, over a bounded prefix.

Why a prefix: a trace can hold thousands of distinct names of many kilobytes (parsers keep up to 16,384
characters), and every pattern searched over each whole name makes analysis time grow with name bytes: a compressed
upload under a megabyte kept `analyze` busy for tens of seconds (issue 39). What the analysis looks for in a name (a
step marker, an engine's path, a runtime call, a kernel's family) sits at its start; a name longer than MATCH_CHARS
is searched over its first MATCH_CHARS characters followed by "…", so a pattern anchored at the end ($) never
matches where the name was cut.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

MATCH_CHARS = 1024  # characters of a name that patterns see; the longest names of the real traces (tests/data) keep
# their answers (cutlass kernels of 1-5 KB name their family in the first hundred characters)
CUT = "\u2026"


def match_text(name: object) -> str:
    """The text patterns are searched over for this name: the whole name, or its first MATCH_CHARS characters and
    "…" when it is longer."""
    text = str(name)
    return text if len(text) <= MATCH_CHARS else text[:MATCH_CHARS] + CUT


def name_matches(
    names: pd.Series | pd.Categorical, pattern: str | re.Pattern[str], rows: np.ndarray | None = None
) -> np.ndarray:
    """Boolean mask: which rows' name (its match_text) contains a match for the regex (only the positions `rows`,
    when given: the same as name_matches(names.iloc[rows], pattern), without taking the rows first)."""
    regex = re.compile(pattern) if isinstance(pattern, str) else pattern
    if isinstance(names, pd.Series) and isinstance(names.dtype, pd.CategoricalDtype):
        names = names.array
    if not isinstance(names, pd.Categorical):
        names = pd.Series(names) if rows is None else pd.Series(names).iloc[rows]
        return names.astype(object).map(lambda s: bool(regex.search(match_text(s)))).to_numpy(dtype=bool)
    categories = names.categories
    hit = np.fromiter((bool(regex.search(match_text(c))) for c in categories), dtype=bool, count=len(categories))
    codes = np.asarray(names.codes) if rows is None else np.asarray(names.codes)[rows]
    return np.append(hit, False)[codes]  # code -1 (missing) indexes the trailing False
