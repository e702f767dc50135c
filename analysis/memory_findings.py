"""Findings on memory that say what to change, each carrying the numbers it rests on (analysis.memory's summary).

memory-not-returned: a finished request left most of what it grew by allocated (leaked capacity).
reserved-far-above-allocated: the caching allocator holds much more than was ever allocated (fragmentation).
memory-near-capacity: the peak is close to the device's size.
kv-growth-vs-model: the KV cache grows far from what the model needs (set with a model, analysis.memory_model).
"""

from __future__ import annotations

from .metrics import format_bytes
from .model import Finding
from .summary import MemorySummary

RETAINED_SHARE = 0.5  # a request that keeps this share of its growth once over has not returned its memory
MIN_RETAINED_BYTES = 4096
SLACK_SHARE, MIN_SLACK_BYTES = 0.3, 256 << 20  # reserved above the peak allocated: share of reserved, and at least
NEAR_CAPACITY, CRITICAL_CAPACITY = 0.9, 0.97
KV_HIGH, KV_LOW = 1.5, 0.25  # measured / expected KV growth beyond which it is reported


def memory_findings(memory: MemorySummary) -> list[Finding]:
    """The findings that need no model."""
    return [*_not_returned(memory), *_reserved_slack(memory), *_near_capacity(memory)]


def _not_returned(memory: MemorySummary) -> list[Finding]:
    leaks = []
    for r in memory.requests:
        before, end, after = r["before_bytes"], r["last_step_end_bytes"], r["after_bytes"]
        if not all(isinstance(v, int) for v in (before, end, after)):
            continue
        grown, kept = end - before, after - before
        if grown > 0 and kept >= max(RETAINED_SHARE * grown, MIN_RETAINED_BYTES):
            leaks.append((r["request"], before, end, after, kept))
    if not leaks:
        return []
    request, before, end, after, kept = max(leaks, key=lambda leak: leak[4])
    total = sum(leak[4] for leak in leaks)
    return [
        Finding(
            "memory-not-returned",
            "warn",
            f"Memory not returned after {len(leaks)} request(s): {format_bytes(total)} still allocated",
            f"On {memory.device}, request {request} started with {format_bytes(before)} allocated, ended its last step "
            f"with {format_bytes(end)} and left {format_bytes(after)} once it was over: {format_bytes(kept)} of the "
            f"{format_bytes(end - before)} it grew by stayed. A finished request's KV cache (or outputs) still "
            "referenced, such as past_key_values returned by generate() and kept, or KV blocks not freed when a "
            "client disconnects, leaks capacity: every later request has that much less. Drop or reuse the cache "
            "when a request ends.",
            {"requests": len(leaks), "retained_bytes": total, "worst_request": request, "worst_retained_bytes": kept},
        )
    ]


def _reserved_slack(memory: MemorySummary) -> list[Finding]:
    reserved, allocated = memory.peak_reserved_bytes, memory.peak_allocated_bytes
    if reserved is None or allocated is None:
        return []
    slack = reserved - allocated
    if slack < max(SLACK_SHARE * reserved, MIN_SLACK_BYTES):
        return []
    capacity = memory.device_memory_bytes
    severity = "warn" if capacity and slack >= 0.1 * capacity else "info"
    return [
        Finding(
            "reserved-far-above-allocated",
            severity,
            f"The allocator reserved {format_bytes(slack)} more than was ever allocated ({slack / reserved:.0%} of "
            "its reserve)",
            f"On {memory.device} the caching allocator's reserve peaked at {format_bytes(reserved)} while allocated "
            f"memory peaked at {format_bytes(allocated)}: freed blocks that later sizes do not fit (fragmentation), "
            "kept from the driver. PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True grows segments in place instead "
            "of reserving new ones, and a static KV cache (allocated once, same sizes every step) stops the growing "
            f"cache from leaving holes: together they could give back up to {format_bytes(slack)} for more KV.",
            {"reserved_bytes": reserved, "allocated_bytes": allocated, "slack_bytes": slack},
        )
    ]


def _near_capacity(memory: MemorySummary) -> list[Finding]:
    capacity = memory.device_memory_bytes
    peak = max((v for v in (memory.peak_reserved_bytes, memory.peak_allocated_bytes) if v is not None), default=None)
    if not capacity or peak is None or peak < NEAR_CAPACITY * capacity:
        return []
    share = peak / capacity
    per_sequence = memory.kv_growth_bytes_per_token / (memory.batch or 1) if memory.kv_growth_bytes_per_token else None
    room = (
        f" About {int((capacity - peak) // per_sequence):,} more tokens of KV per sequence fit at the measured growth."
        if per_sequence and per_sequence > 0
        else ""
    )
    return [
        Finding(
            "memory-near-capacity",
            "critical" if share >= CRITICAL_CAPACITY else "warn",
            f"Memory peaked at {share:.0%} of the device",
            f"On {memory.device} the peak ({format_bytes(peak)}) is within {format_bytes(capacity - peak)} of the "
            f"device's {format_bytes(capacity)}.{room} A longer context or a larger batch will fail to allocate: "
            "admit requests by their KV need (tokens x KV per token), cap the batch or context, or hold the KV cache "
            "in a smaller dtype (fp8).",
            {"peak_bytes": peak, "capacity_bytes": capacity, "share": share},
        )
    ]


def kv_growth_findings(memory: MemorySummary, formula: str) -> list[Finding]:
    """The measured KV growth against the model's (`formula`: how the expected figure was made, for the text)."""
    measured, expected = memory.kv_growth_bytes_per_token, memory.expected_kv_bytes_per_token
    if measured is None or not expected:
        return []
    ratio = measured / expected
    numbers = {"measured_bytes_per_token": measured, "expected_bytes_per_token": expected, "ratio": ratio}
    said = f"{format_bytes(measured)} per decode step against the model's {format_bytes(expected)} ({formula})"
    if ratio > KV_HIGH:
        dtype_hint = (
            " Twice the expected is the mark of a cache held in fp32 while the model runs in 16 bits, or of two caches."
            if 1.8 <= ratio <= 2.2
            else ""
        )
        return [
            Finding(
                "kv-growth-vs-model",
                "warn",
                f"The KV cache grows {ratio:.1f}x faster than the model needs",
                f"On {memory.device} allocated memory grows by {said}.{dtype_hint} Other causes: a cache that copies "
                "itself every step and keeps the old copy, duplicated caches (a draft model, a second cache object), "
                "or per-step buffers that are never freed. Each costs capacity: fewer tokens fit per request. "
                f"Measured as the {memory.basis}.",
                numbers,
            )
        ]
    if ratio < KV_LOW:
        return [
            Finding(
                "kv-growth-vs-model",
                "info",
                "Memory does not grow per token: the KV cache was allocated up front",
                f"On {memory.device} allocated memory grows by {said}: a static or paged cache sized in advance. "
                "Its capacity was set when it was allocated, so the trace's peak, not its growth, says how many "
                f"tokens fit. Measured as the {memory.basis}.",
                numbers,
            )
        ]
    return []
