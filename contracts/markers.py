"""Names of the per-forward record_function markers that Stepscope's collectors write.

They live in contracts/, torch-free, so that analysis reads exactly the format the collectors write
(collectors.step_tracker writes them, analysis.annotations parses them).

A marker looks like ``stepscope.decode[request=0,index=3,tokens=1,batch=4]``:
``index`` counts forwards within the request from 0 (the prefill is index 0),
``tokens`` is the number of new token positions per sequence in that forward,
``batch`` the number of sequences.
"""

from __future__ import annotations

import re
from typing import NamedTuple

MARKER_PREFIX = "stepscope."
MARKER_RE = re.compile(
    r"^stepscope\.(?P<kind>prefill|decode)\[request=(?P<request>\d+),index=(?P<index>\d+),"
    r"tokens=(?P<tokens>\d+),batch=(?P<batch>\d+)\]$"
)


class Marker(NamedTuple):
    kind: str
    request: int
    index: int
    tokens: int
    batch: int


def format_marker(kind: str, request: int, index: int, tokens: int, batch: int) -> str:
    if kind not in ("prefill", "decode"):
        raise ValueError(f"marker kind must be prefill or decode, not {kind!r}")
    return f"stepscope.{kind}[request={request},index={index},tokens={tokens},batch={batch}]"


def parse_marker(name: str) -> Marker | None:
    m = MARKER_RE.match(name)
    if m is None:
        return None
    return Marker(m["kind"], int(m["request"]), int(m["index"]), int(m["tokens"]), int(m["batch"]))
