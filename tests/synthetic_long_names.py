"""A SYNTHETIC trace of thousands of distinct names of many kilobytes each, small once compressed (issue 39, item 4).

Why: the analysis does some work per distinct name (categories, short names, step and engine markers); a name's
length must not multiply that work, or a compressed upload under a megabyte keeps the server busy for minutes.
The names share all but their first bytes, so gzip (whose window holds the previous name) packs 40 MB of them
into a few hundred kilobytes, as an adversary's upload would.
"""

from __future__ import annotations

import gzip
import json

from tests.synthetic_traces import doc, synthetic_generation

# Text that looks like a kernel's template arguments and matches no built-in rule: every rule searched to its end.
_FILLER = "cute::tuple<cute::C<128>, cute::C<64>, unsigned_long_long, cute::Layout<int, int>>, "


def long_name(index: int, name_bytes: int, kind: str = "kernel", filler: str = _FILLER) -> str:
    """A distinct name of `name_bytes` characters: its number first, then `filler` repeated."""
    head = f"void synthetic_{kind}_{index}<"
    filler = filler or _FILLER
    body = (filler * (name_bytes // len(filler) + 1))[: max(0, name_bytes - len(head) - 1)]
    return head + body + ">"


def synthetic_long_names(
    kernels: int = 5000, name_bytes: int = 8192, per_step: int = 50, filler: str = _FILLER
) -> list[dict]:
    """A host-bound generation (tests/synthetic_traces.synthetic_generation) of kernels // per_step forwards of
    `per_step` kernels each, every kernel with a distinct name of `name_bytes` characters (the host ops keep theirs:
    the forwards are found by their aten::embedding)."""
    events = synthetic_generation(decode_steps=max(1, kernels // per_step) - 1, kernels_per_step=per_step)
    count = 0
    for event in events:
        if event["cat"] == "kernel":
            event["name"] = long_name(count, name_bytes, filler=filler)
            count += 1
    return events


def synthetic_long_names_gz(
    kernels: int = 5000, name_bytes: int = 8192, per_step: int = 50, filler: str = _FILLER
) -> bytes:
    """synthetic_long_names as a gzip'd Kineto JSON document (under 1 MB at the defaults)."""
    return gzip.compress(json.dumps(doc(synthetic_long_names(kernels, name_bytes, per_step, filler))).encode(), 6)
