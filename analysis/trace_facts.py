"""Which engine and device a trace comes from, read from what it holds (Compare warns when a pair differs).

The engine is read from the names in the trace: Python stack frames (`sglang/srt/...`, `vllm/v1/...`,
`transformers/...`), the engines' own step annotations (SGLang `step[DECODE ...]`, vLLM `execute_..._context_`),
Stepscope's step markers. A trace can hold several (SGLang imports vLLM kernels; a vLLM trace shows transformers
frames): the one with the most distinct names wins, and the evidence says the counts.
"""

from __future__ import annotations

import re

import pandas as pd

from stepscope.parsers.timeline import Timeline
from .model import TraceFacts
from .names import match_text

_ENGINES = (  # (engine, pattern on distinct event names)
    ("SGLang", re.compile(r"sglang[/.]|^step\[(?:DECODE|EXTEND|MIXED|PREFILL|IDLE)\b")),
    ("vLLM", re.compile(r"vllm[/.]|^execute_(?:\d+_)?context_\d+\(")),
    ("HF transformers", re.compile(r"transformers[/.]")),
    ("Stepscope collector", re.compile(r"^stepscope\.")),
)


def trace_facts(timeline: Timeline) -> TraceFacts:
    device, device_source = timeline.device_source
    engine, engine_source = engine_of(timeline.events["name"])
    return TraceFacts(device, device_source, engine, engine_source, world_size(timeline))


def world_size(timeline: Timeline) -> int:
    """The job's ranks from Kineto's distributedInfo (a bounded positive int), else 1."""
    info = timeline.meta.extra.get("distributed")
    value = info.get("world_size") if isinstance(info, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 1 << 16 else 1


def engine_of(names: pd.Series) -> tuple[str | None, str | None]:
    """(engine, evidence) from the distinct event names (a categorical column's categories: no pass over rows)."""
    distinct = names.cat.categories if isinstance(names.dtype, pd.CategoricalDtype) else pd.unique(names)
    text = pd.Series([match_text(n) for n in distinct], dtype=object)  # a bounded prefix (analysis.names)
    counts = {engine: int(text.str.contains(pattern).sum()) for engine, pattern in _ENGINES}
    found = {e: n for e, n in counts.items() if n}
    if not found:
        return None, None
    best = max(found, key=lambda e: found[e])  # first in _ENGINES on a tie
    seen = ", ".join(f"{n} {e}" for e, n in sorted(found.items(), key=lambda kv: -kv[1]))
    return best, f"distinct event names that name an engine: {seen}"
