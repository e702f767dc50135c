"""Input shapes (Kineto's "Input Dims") checked before analysis trusts them.

One aten::embedding whose dims are null, a scalar, nested lists, strings or negative must not crash the
analysis of an otherwise valid trace: a malformed shape record is ignored (treated as unrecorded) and
counted in a warning. Sizes are bounded so that products (batch x positions) stay far inside int64.
"""

from __future__ import annotations

import json
import math

import pandas as pd

from .event_rows import name_mask

MAX_DIM = 1 << 31  # a tensor dimension beyond this is not a real shape
MAX_TOKENS = 1 << 40  # batch x positions beyond this is not a real forward
SHAPED_OPS = ("aten::embedding",)


def clean_dims(value) -> list[list[int]] | None:
    """Kineto's dims: a list with one entry per input, each a list of sizes (an empty list for a scalar or
    a non-tensor input). Anything else - or a size that is negative, fractional or huge - gives None."""
    if not isinstance(value, list):
        return None
    for entry in value:
        if not isinstance(entry, list):
            return None
        for size in entry:
            if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size < MAX_DIM:
                return None
    return value


def token_shape(dims) -> tuple[int | None, int | None]:
    """(batch, new positions per sequence) from an embedding's clean input dims, None when unknown."""
    if not dims or len(dims) < 2 or not isinstance(dims[1], list) or not dims[1]:
        return None, None
    ids = dims[1]
    batch, positions = (1, ids[0]) if len(ids) == 1 else (ids[0], math.prod(ids[1:]))
    if batch * positions >= MAX_TOKENS:
        return None, None
    return int(batch), int(positions)


def malformed_shape_count(events: pd.DataFrame) -> int:
    """How many embedding ops carry an Input Dims record that clean_dims rejects (loops over distinct records)."""
    if "input_dims" not in events:
        return 0
    emb = events["input_dims"][name_mask(events, SHAPED_OPS)].astype(str)
    counts = emb[emb != ""].value_counts()
    return int(sum(n for text, n in counts.items() if _malformed(text)))


def shape_warnings(events: pd.DataFrame) -> list[str]:
    bad = malformed_shape_count(events)
    return [f"{bad} aten::embedding shape records malformed (not lists of sizes 0..2^31) and ignored"] if bad else []


def _malformed(text: str) -> bool:
    try:
        return clean_dims(json.loads(text)) is None
    except (ValueError, RecursionError):
        return True
