"""Step annotations that inference engines write, parsed into step kind, tokens and batch.

Formats seen in real traces (see ../shared/real_traces):
  vLLM    execute_context_1(888_788544)_generation_0(0)
          execute_32_context_0(sq0sk0...)_generation_32(sq32sk55086...)
  SGLang  step[DECODE bs=32], step[EXTEND ...], step[MIXED ...]
  torch   ProfilerStep#6
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

from stepscope.contracts.markers import parse_marker
from stepscope.parsers.numbers import bounded_int, has_oversized_number

if TYPE_CHECKING:
    from .user_patterns import UserPattern

_VLLM = re.compile(
    r"^execute_(?:(?P<total>\d+)_)?context_(?P<ctx>\d+)\((?P<ctx_detail>[^)]*)\)_generation_(?P<gen>\d+)\("
)
_SGLANG = re.compile(r"^step\[(?P<mode>EXTEND|DECODE|MIXED|PREFILL|IDLE)\b(?P<rest>[^\]]*)\]")
_SGLANG_BS = re.compile(r"\bbs=(\d+)")
_PROFILER_STEP = re.compile(r"^ProfilerStep#(\d+)$")


class StepLabel(NamedTuple):
    kind: str | None  # prefill | decode | mixed | verify | empty; None when the name does not say
    tokens: int | None  # new token positions in the step, over the whole batch
    batch: int | None  # sequences in the step
    request: int | None = None
    index: int | None = None
    prefill_tokens: int | None = None  # of the tokens, those of sequences still prefilling (None: not written)
    decode_sequences: int | None = None  # sequences past their prompt, scoring one token each (more: a verify)


# Every number in a step name is bounded (parsers.numbers): a name with a 20-digit count is not a step
# label (find_steps warns about such names), so no huge int ever reaches an int64 column.


def stepscope_label(name: str) -> StepLabel | None:
    if has_oversized_number(name):
        return None
    marker = parse_marker(name)
    if marker is None:
        return None
    return StepLabel(marker.kind, marker.tokens * marker.batch, marker.batch, marker.request, marker.index)


def vllm_label(name: str) -> StepLabel | None:
    """vLLM V1's step name: context_C(...) are the C sequences prefilling, generation_G(...) the G decoding.

    Inside the brackets the newer form writes sq<query tokens>sk<key tokens>..., the older one
    <query tokens>_<sum of squares>. Decoding sequences that score more than one token each are verifying
    speculative tokens (generation_1(5): one sequence scoring 5 positions): the step is a `verify`."""
    m = _VLLM.match(name)
    if m is None or has_oversized_number(name):
        return None
    ctx, gen = int(m["ctx"]), int(m["gen"])
    ctx_tokens = _vllm_query_tokens(m["ctx_detail"])
    gen_tokens = _vllm_query_tokens(_vllm_generation_detail(name, m.end()))
    if gen and gen_tokens is None and m["total"] and ctx_tokens is not None:
        gen_tokens = int(m["total"]) - ctx_tokens
    verify = not ctx and gen and gen_tokens is not None and gen_tokens > gen
    kind = "mixed" if ctx and gen else "prefill" if ctx else "verify" if verify else "decode" if gen else "empty"
    tokens = int(m["total"]) if m["total"] else None
    if tokens is None and ctx == 0:
        tokens = gen_tokens if gen_tokens is not None else gen
    elif tokens is None and ctx:
        tokens = ctx_tokens + (gen_tokens if gen_tokens is not None else gen) if ctx_tokens is not None else None
    prefill_tokens = 0 if not ctx else ctx_tokens
    return StepLabel(kind, tokens, ctx + gen, prefill_tokens=prefill_tokens, decode_sequences=gen)


_VLLM_QUERY = re.compile(r"^(?:sq)?(\d+)")


def _vllm_query_tokens(detail: str | None) -> int | None:
    """The query (new) tokens inside a context_/generation_ bracket, both forms; None when not written."""
    m = _VLLM_QUERY.match(detail or "")
    return int(m.group(1)) if m else None


def _vllm_generation_detail(name: str, start: int) -> str:
    """The text of the generation_G(...) bracket, which _VLLM opens but does not read."""
    end = name.find(")", start)
    return name[start:end] if end >= 0 else ""


def sglang_label(name: str) -> StepLabel | None:
    m = _SGLANG.match(name)
    if m is None or has_oversized_number(m.group(0)):
        return None
    bs = _SGLANG_BS.search(m["rest"])
    batch = int(bs.group(1)) if bs else None
    kind = {"EXTEND": "prefill", "PREFILL": "prefill", "DECODE": "decode", "MIXED": "mixed", "IDLE": "empty"}[m["mode"]]
    decoding = batch if kind == "decode" else 0 if kind in ("prefill", "empty") else None
    return StepLabel(
        kind,
        batch if kind == "decode" else None,
        batch,
        prefill_tokens=0 if kind == "decode" else None,
        decode_sequences=decoding,
    )


def profiler_step_label(name: str) -> StepLabel | None:
    return StepLabel(None, None, None) if _PROFILER_STEP.match(name) and not has_oversized_number(name) else None


def regex_label(pattern: re.Pattern[str] | UserPattern, name: str) -> StepLabel | None:
    m = pattern.search(name)
    if m is None:
        return None
    groups = m.groupdict()
    kind = (groups.get("kind") or "").lower() or None
    if kind not in (None, "prefill", "decode", "mixed", "verify", "draft", "empty"):
        kind = None
    tokens = bounded_int(groups.get("tokens"))
    return StepLabel(kind, tokens, None)


STEP_NAME_START = re.compile(r"^(?:stepscope\.|execute_|step\[|ProfilerStep#)")


def oversized_step_names(names) -> list[str]:
    """Names that look like step annotations but carry a number too large to be a count (not trusted)."""
    return [n for n in names if STEP_NAME_START.match(n) and has_oversized_number(n)]


def oversized_step_warnings(names) -> list[str]:
    """The warning for step annotations ignored because of a huge number, [] when there are none."""
    bad = oversized_step_names(names)
    if not bad:
        return []
    return [f"{len(bad)} step annotations with numbers too large to be counts ignored, e.g. {bad[0][:80]!r}"]


class EngineBatch(NamedTuple):
    """A forward's batch as vLLM's annotation states it: `execute_N_context_C(sq.sk.sqsq.sqsk.)_generation_G(...)`
    gives, per part (C prefilling sequences, G decoding ones), the sums over its sequences of the query tokens
    (sq), the KV tokens after the step (sk, the new ones included), of sq^2 and of sq x sk."""

    prefill_sequences: int
    prefill_tokens: int
    prefill_kv_tokens: int
    prefill_pairs: float  # (query, key) pairs of the prefill chunks, causal
    decode_sequences: int
    decode_tokens: int
    decode_kv_tokens: int

    @property
    def sequences(self) -> int:
        return self.prefill_sequences + self.decode_sequences

    @property
    def tokens(self) -> int:
        return self.prefill_tokens + self.decode_tokens

    @property
    def kv_tokens(self) -> int:
        return self.prefill_kv_tokens + self.decode_kv_tokens

    @property
    def pairs(self) -> float:
        return self.prefill_pairs + self.decode_kv_tokens  # a decode token attends to its sequence's whole cache


_VLLM_SUMS = re.compile(r"^sq(\d+)sk(\d+)sqsq(\d+)sqsk(\d+)$")
_VLLM_PARTS = re.compile(r"context_(?P<c>\d+)\((?P<cd>[^)]*)\)_generation_(?P<g>\d+)\((?P<gd>[^)]*)\)")


def engine_batch(label: str) -> EngineBatch | None:
    """The batch a vLLM step annotation states (EngineBatch), None when the label does not carry the sums (an
    older vLLM form, another engine, a bounded-number check failing)."""
    if not label.startswith("execute_") or has_oversized_number(label):
        return None
    m = _VLLM_PARTS.search(label)
    if m is None:
        return None
    ctx, gen = _VLLM_SUMS.match(m["cd"]), _VLLM_SUMS.match(m["gd"])
    if ctx is None or gen is None:
        return None
    c_sq, c_sk, c_sqsq, c_sqsk = (int(v) for v in ctx.groups())
    g_sq, g_sk = int(gen.group(1)), int(gen.group(2))
    # causal pairs of a chunk of q new tokens after c cached: q*c + q(q+1)/2 = q*k - q^2/2 + q/2, summed
    return EngineBatch(int(m["c"]), c_sq, c_sk, c_sqsk - c_sqsq / 2 + c_sq / 2, int(m["g"]), g_sq, g_sk)
