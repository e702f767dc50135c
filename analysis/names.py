"""Name tests on categorical columns, done once per distinct name instead of once per event."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd


def name_matches(names: pd.Series | pd.Categorical, pattern: str | re.Pattern[str]) -> np.ndarray:
    """Boolean mask: which rows' name contains a match for the regex."""
    regex = re.compile(pattern) if isinstance(pattern, str) else pattern
    if isinstance(names, pd.Series) and isinstance(names.dtype, pd.CategoricalDtype):
        names = names.array
    if not isinstance(names, pd.Categorical):
        return pd.Series(names).astype(object).map(lambda s: bool(regex.search(str(s)))).to_numpy(dtype=bool)
    categories = names.categories
    hit = np.fromiter((bool(regex.search(str(c))) for c in categories), dtype=bool, count=len(categories))
    codes = np.asarray(names.codes)
    return np.append(hit, False)[codes]  # code -1 (missing) indexes the trailing False
