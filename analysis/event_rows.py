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
    wanted = [i for i, c in enumerate(kind.cat.categories) if c in kinds]
    codes = kind.cat.codes.to_numpy()
    if len(wanted) == 1:
        return codes == wanted[0]
    return np.isin(codes, wanted)


def take_rows(events: pd.DataFrame, mask: np.ndarray, columns: Iterable[str]) -> pd.DataFrame:
    """The rows of `mask` (boolean or positions), only `columns`, index kept: what `events[mask][columns]` gives."""
    rows = np.flatnonzero(mask) if mask.dtype == bool else mask
    return pd.DataFrame({c: events[c].array.take(rows) for c in columns}, index=events.index.take(rows))
