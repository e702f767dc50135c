"""Name tests on categorical columns, done once per distinct name instead of once per event."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd


def name_matches(names: pd.Series, pattern: str | re.Pattern[str]) -> np.ndarray:
    """Boolean mask: which rows' name contains a match for the regex."""
    regex = re.compile(pattern) if isinstance(pattern, str) else pattern
    if not isinstance(names.dtype, pd.CategoricalDtype):
        return names.astype(object).map(lambda s: bool(regex.search(str(s)))).to_numpy(dtype=bool)
    categories = names.cat.categories
    hit = np.fromiter((bool(regex.search(str(c))) for c in categories), dtype=bool, count=len(categories))
    codes = names.cat.codes.to_numpy()
    return np.append(hit, False)[codes]  # code -1 (missing) indexes the trailing False
