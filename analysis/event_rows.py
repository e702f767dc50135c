"""Row selections of the timeline's events that copy only what is read.

The events frame has a dozen columns and up to millions of rows; `ev[ev["kind"].isin(...)]` compares
strings row by row and then copies every column of the selected rows. These helpers test the kind on
its categorical codes (one comparison per distinct kind) and take only the columns a caller names.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd


def kind_mask(events: pd.DataFrame, kinds: Iterable[str]) -> np.ndarray:
    """Boolean mask of the rows whose kind is one of `kinds`."""
    kinds = tuple(kinds)
    kind = events["kind"]
    if not isinstance(kind.dtype, pd.CategoricalDtype):
        return kind.isin(kinds).to_numpy()
    codes = kind.array.codes
    mask = np.zeros(len(codes), dtype=bool)
    for code, name in enumerate(kind.cat.categories):  # a handful of kinds: one comparison each
        if name in kinds:
            mask |= codes == code
    return mask


def take_rows(events: pd.DataFrame, mask: np.ndarray, columns: Iterable[str]) -> pd.DataFrame:
    """The rows of `mask` (boolean or positions), only `columns`, index kept: what `events[mask][columns]` gives."""
    rows = np.flatnonzero(mask) if mask.dtype == bool else mask
    # copy=False: the taken columns are fresh; the default would copy them again into one block
    return pd.DataFrame({c: events[c].array.take(rows) for c in columns}, index=events.index.take(rows), copy=False)


def name_mask(events: pd.DataFrame, names: Iterable[str]) -> np.ndarray:
    """Boolean mask of the rows whose name is exactly one of `names` (on codes when the column is categorical)."""
    column = events["name"]
    if not isinstance(column.dtype, pd.CategoricalDtype):
        return column.isin(list(names)).to_numpy()
    wanted = column.cat.categories.get_indexer(list(names))
    return np.isin(column.cat.codes.to_numpy(), wanted[wanted >= 0])


def isin_ints(values: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """np.isin for integer ids (correlations): a lookup table over the allowed ids' range when that range is
    below 32 M (at most 32 MB, briefly), which is ten times faster than the sorting np.isin picks for sparse ids."""
    if len(values) == 0 or len(allowed) == 0:
        return np.zeros(len(values), dtype=bool)
    lo, hi = int(allowed.min()), int(allowed.max())
    if hi - lo >= 1 << 25:
        return np.isin(values, allowed)
    table = np.zeros(hi - lo + 2, dtype=bool)  # the last slot stands for every value outside [lo, hi]
    table[allowed - lo] = True
    inside = (values >= lo) & (values <= hi)
    return table[np.where(inside, values - lo, hi - lo + 1)]


def text_column(labels: tuple[str, ...], codes: np.ndarray):
    """The column a DataFrame makes of `np.asarray(labels, dtype=object)[codes]` (pandas' string dtype; object
    when empty), built by taking from an array of the few labels: inferring and converting every row's string
    costs several times more."""
    if len(codes) == 0:
        return np.empty(0, dtype=object)
    dtype = pd.Series(np.asarray(labels[:1], dtype=object)).dtype  # what inference gives these strings
    return pd.array(list(labels), dtype=dtype).take(np.asarray(codes, dtype=np.intp))
