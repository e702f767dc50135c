"""The truth of a capture, recorded by the run itself: every forward call, timed on the trace's own clock.

`ForwardLog.wrap(model, role)` replaces `model.forward` by a wrapper that notes the call (model role, input
shape, the OS thread) and runs it inside `torch.profiler.record_function("capture_truth#<n>")`. After the
profile, `take_markers` removes those spans from the exported trace and hands their times to the log, so the
shipped trace holds nothing the capture added and the truth is on the trace's clock. A forward that ran on a
thread the profiler did not record has no marker: `recorded` is False.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any

TRUTH_PREFIX = "capture_truth#"
KINDS = ("prefill", "decode", "mixed", "verify", "draft", "empty")


class ForwardLog:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.pending_batch: list[dict[str, Any]] | None = None  # what an engine put in the next forward

    def wrap(self, model, role: str = "target") -> None:
        import torch

        inner = model.forward

        def forward(*args, **kwargs):
            ids = kwargs.get("input_ids", args[0] if args else None)
            n = len(self.calls)
            record: dict[str, Any] = {
                "n": n,
                "model": role,
                "input_ids": list(ids.shape) if ids is not None else None,
                "thread": threading.get_native_id(),
            }
            if self.pending_batch is not None:
                record["batch"], self.pending_batch = self.pending_batch, None
            cache = kwargs.get("past_key_values")
            if cache is not None and hasattr(cache, "get_seq_length"):
                record["past"] = int(cache.get_seq_length())  # positions cached before the call
            self.calls.append(record)
            with torch.profiler.record_function(f"{TRUTH_PREFIX}{n}"):
                return inner(*args, **kwargs)

        model.forward = forward

    def take_markers(self, doc: dict) -> dict:
        """Remove the truth markers from an exported trace (in place) and time the calls with them."""
        kept, found = [], {}
        for event in doc.get("traceEvents", []):
            name = str(event.get("name", ""))
            if name.startswith(TRUTH_PREFIX):
                if event.get("ph") == "X" and event.get("cat") == "user_annotation":
                    found[int(name[len(TRUTH_PREFIX) :])] = (float(event["ts"]), float(event["dur"]))
                continue
            kept.append(event)
        doc["traceEvents"] = kept
        for call in self.calls:
            ts_dur = found.get(call["n"])
            call["recorded"] = ts_dur is not None
            call["ts_us"], call["dur_us"] = ts_dur if ts_dur else (None, None)
        return doc


def label_padded_generate(calls: list[dict[str, Any]], first_of_call: set[int] | None = None) -> None:
    """Kinds of generate()'s own forwards over a [B, S] batch: the first of each generate() call is the prefill
    (B sequences, B x S positions), each later one decodes S == 1 per sequence."""
    first_of_call = first_of_call or {0}
    for call in calls:
        b, s = call["input_ids"]
        prefill = call["n"] in first_of_call
        call.update(kind="prefill" if prefill else "decode" if s == 1 else "verify", sequences=b, tokens=b * s)
        call.update(prefill_tokens=b * s if prefill else 0, decode_sequences=0 if prefill else b)


def label_assisted(calls: list[dict[str, Any]]) -> None:
    """Assisted generation: the draft model's forwards are `draft`; the target's first is its prefill, a later
    one scoring more than one position is a `verify`, one position a plain `decode`."""
    target_seen = False
    for call in calls:
        b, s = call["input_ids"]
        if call["model"] == "draft":
            call.update(kind="draft", sequences=b, tokens=b * s, prefill_tokens=None, decode_sequences=None)
            continue
        kind = "prefill" if not target_seen else "verify" if s > 1 else "decode"
        target_seen = True
        call.update(kind=kind, sequences=b, tokens=b * s)
        call.update(prefill_tokens=b * s if kind == "prefill" else 0, decode_sequences=0 if kind == "prefill" else b)
    _accepted(calls)


def _accepted(calls: list[dict[str, Any]]) -> None:
    """Per verify forward with the caches known: the draft tokens the target kept, from the cache it had before
    this forward and before its next one (the next starts after the kept tokens and the target's own token)."""
    target = [c for c in calls if c["model"] == "target"]
    for this, after in pairwise(target):
        if this["kind"] == "verify" and "past" in this and "past" in after:
            this["accepted"] = after["past"] - this["past"] - 1


def label_packed(calls: list[dict[str, Any]], prompt_lengths: dict[str, int]) -> None:
    """Continuous batching: each forward's sequences as the engine scheduled them (request id, cached positions
    before the forward, new positions): a sequence whose cached positions are fewer than its prompt is prefilling
    (a chunk), else it decodes one token."""
    for call in calls:
        seqs = call["batch"]
        prefill = [s for s in seqs if s["past"] < prompt_lengths[s["request"]]]
        decode = [s for s in seqs if s["past"] >= prompt_lengths[s["request"]]]
        kind = "mixed" if prefill and decode else "prefill" if prefill else "decode" if decode else "empty"
        call.update(
            kind=kind,
            sequences=len(seqs),
            tokens=sum(s["query"] for s in seqs),
            prefill_tokens=sum(s["query"] for s in prefill),
            decode_sequences=len(decode),
        )


def truth_record(shape: str, how: str, calls: list[dict[str, Any]], requests: int, extra: dict | None = None) -> dict:
    import platform

    import torch
    import transformers

    recorded = [c for c in calls if c["recorded"]]
    counts = Counter(c["kind"] for c in recorded)
    return {
        "shape": shape,
        "how": how,
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        },
        "requests": requests,  # the requests the run was given
        "requests_recorded": requests if recorded else 0,  # of them, those the trace holds forwards of
        "forwards_called": len(calls),
        "forwards_recorded": len(recorded),
        "counts": {k: counts.get(k, 0) for k in KINDS},
        "forwards": calls,
        **(extra or {}),
    }


def write_json(path: Path, value: dict) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(value, indent=1) + "\n")
    tmp.replace(path)
