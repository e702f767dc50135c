"""Name tests on categorical columns, done once per distinct name instead of once per event."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd


def name_matches(
    names: pd.Series | pd.Categorical, pattern: str | re.Pattern[str], rows: np.ndarray | None = None
) -> np.ndarray:
    """Boolean mask: which rows' name contains a match for the regex (only the positions `rows`, when given:
    the same as name_matches(names.iloc[rows], pattern), without taking the rows first)."""
    regex = re.compile(pattern) if isinstance(pattern, str) else pattern
    if isinstance(names, pd.Series) and isinstance(names.dtype, pd.CategoricalDtype):
        names = names.array
    if not isinstance(names, pd.Categorical):
        names = pd.Series(names) if rows is None else pd.Series(names).iloc[rows]
        return names.astype(object).map(lambda s: bool(regex.search(str(s)))).to_numpy(dtype=bool)
    categories = names.categories
    hit = np.fromiter((bool(regex.search(str(c))) for c in categories), dtype=bool, count=len(categories))
    codes = np.asarray(names.codes) if rows is None else np.asarray(names.codes)[rows]
    return np.append(hit, False)[codes]  # code -1 (missing) indexes the trailing False
