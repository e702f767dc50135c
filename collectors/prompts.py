"""Turn the asked-for prompt into token ids, offline and deterministically.

Presets have no tokenizer, so a text prompt is mapped byte by byte: the UTF-8 bytes of the
text become ids ``BYTE_ID_OFFSET + byte`` (256 ids above the usual special tokens 0..2).
A token count (``--prompt-tokens N``) gives ids ``BYTE_ID_OFFSET + (i * 37) % 256`` for
i = 0..N-1: the same ids every run, so runs compare. Every sequence of a batch gets the
same prompt: no padding, so every forward has the same shape across the batch.
"""

from __future__ import annotations

from typing import Any

import torch

from .errors import CollectorError

BYTE_ID_OFFSET = 3


def byte_level_ids(text: str, vocab_size: int) -> list[int]:
    return [(BYTE_ID_OFFSET + b) % vocab_size for b in text.encode("utf-8")]


def counted_ids(count: int, vocab_size: int) -> list[int]:
    return [(BYTE_ID_OFFSET + (i * 37) % 256) % vocab_size for i in range(count)]


def prompt_ids(
    prompt: str | None, prompt_tokens: int, batch: int, vocab_size: int, tokenizer: Any | None
) -> torch.Tensor:
    """A (batch, prompt length) int64 tensor on the CPU."""
    if prompt is not None:
        if tokenizer is not None:
            ids = list(tokenizer(prompt, add_special_tokens=True)["input_ids"])
        else:
            ids = byte_level_ids(prompt, vocab_size)
    else:
        ids = counted_ids(prompt_tokens, vocab_size)
    if not ids:
        raise CollectorError("the prompt is empty: give some text or --prompt-tokens of at least 1")
    return torch.tensor([ids] * batch, dtype=torch.long)
