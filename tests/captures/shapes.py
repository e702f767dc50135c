"""One function per generation shape: run it under torch.profiler as its docs show, return (trace, truth).

Each returns the exported Kineto trace (a dict, the truth markers already removed) and the truth record
(tests/captures/truth.py). Models are tiny and random (tests/captures/models.py); prompts are fixed token ids;
no stop token can end a run early (min_new_tokens = max_new_tokens, or an eos id no token has).
"""

from __future__ import annotations

import json
import tempfile
import threading
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.captures import models
from tests.captures.truth import ForwardLog, label_assisted, label_packed, label_padded_generate, truth_record

NEW_TOKENS = 8


def _profile(log: ForwardLog, run: Callable[[], Any], all_threads: bool = False, **options) -> dict:
    """Run `run` under torch.profiler (CPU activity, the given options) and return the exported trace."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    if all_threads:
        options["experimental_config"] = torch._C._profiler._ExperimentalConfig(profile_all_threads=True)
    with profile(activities=[ProfilerActivity.CPU], **options) as prof:
        run()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        doc = json.loads(path.read_text())
    return log.take_markers(doc)


def _ids(lengths, start: int = 10):
    """Prompts of the given lengths, left-padded with 0 to one [B, S] batch, and their attention mask."""
    import torch

    width = max(lengths)
    ids = torch.zeros(len(lengths), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, n in enumerate(lengths):
        ids[row, width - n :] = torch.arange(start + row, start + row + n)
        mask[row, width - n :] = 1
    return ids, mask


def _generate_kwargs(**extra) -> dict:
    return dict(max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, pad_token_id=0, **extra)


def _one_generate(shape: str, how: str, log: ForwardLog, doc: dict, extra: dict | None = None):
    label_padded_generate(log.calls)
    return doc, truth_record(shape, how, log.calls, requests=1, extra=extra)


def continuous_batching():
    """HF continuous batching: generate_batch over 4 prompts of 3, 7, 12 and 20 tokens, paged attention (sdpa), a
    16-token batch budget so the longest prompt is chunked and two prompts join while two others decode."""
    from transformers import ContinuousBatchingConfig, GenerationConfig
    from transformers.generation.continuous_batching import input_outputs

    model = models.llama()
    log = ForwardLog()
    log.wrap(model)
    lengths = (3, 7, 12, 20)
    prompts = [list(range(10 + 20 * i, 10 + 20 * i + n)) for i, n in enumerate(lengths)]
    config = GenerationConfig(max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=-1, pad_token_id=0)
    batching = ContinuousBatchingConfig(max_batch_tokens=16, num_blocks=16, page_size=16)
    prepare = input_outputs.ContinuousBatchingIOs.prepare_batch_tensors

    def noting_the_batch(self, requests_in_batch, *args, **kwargs):
        log.pending_batch = [
            {
                "request": fs.state.request_id,
                "past": fs.state.position_offset,
                "query": fs.query_length,
                "emits": bool(fs.has_new_token),
            }
            for fs in requests_in_batch
        ]
        return prepare(self, requests_in_batch, *args, **kwargs)

    input_outputs.ContinuousBatchingIOs.prepare_batch_tensors = noting_the_batch
    try:  # not under inference_mode: the engine's own thread updates its static tensors in place
        doc = _profile(
            log,
            lambda: model.generate_batch(
                prompts, generation_config=config, continuous_batching_config=batching, progress_bar=False
            ),
            all_threads=True,  # generate_batch runs its forwards on a thread of its own
            record_shapes=True,
        )
    finally:
        input_outputs.ContinuousBatchingIOs.prepare_batch_tensors = prepare
    label_packed(log.calls, {f"req_{i}": n for i, n in enumerate(lengths)})
    how = (
        "model.generate_batch(4 prompts of 3/7/12/20 tokens, max_new_tokens=8), ContinuousBatchingConfig("
        "max_batch_tokens=16, num_blocks=16, page_size=16), paged sdpa; profile(CPU, record_shapes=True, "
        "experimental_config=_ExperimentalConfig(profile_all_threads=True))"
    )
    return doc, truth_record("continuous_batching", how, log.calls, requests=len(prompts))


def assisted_generation():
    """HF assisted generation: a 2-layer, 64-wide target and a 1-layer, 32-wide draft model (same vocabulary),
    greedy, 16 new tokens; the draft proposes, the target scores each proposal in one forward."""
    import torch

    target, draft = models.llama(64, 2, seed=0), models.llama(32, 1, seed=1)
    log = ForwardLog()
    log.wrap(target, "target")
    log.wrap(draft, "draft")
    ids, mask = _ids([12])
    kwargs = dict(max_new_tokens=16, min_new_tokens=16, pad_token_id=0, do_sample=False)
    with torch.inference_mode():
        doc = _profile(
            log,
            lambda: target.generate(ids, attention_mask=mask, assistant_model=draft, **kwargs),
            record_shapes=True,
        )
    label_assisted(log.calls)
    how = (
        "target.generate(1 prompt of 12 tokens, assistant_model=draft, max_new_tokens=16, greedy); target Llama "
        "64 wide x 2 layers, draft Llama 32 wide x 1 layer, vocabulary 512; profile(CPU, record_shapes=True)"
    )
    return doc, truth_record("assisted_generation", how, log.calls, requests=1)


VERIFY_DRAFT_TOKENS = 2
VERIFY_CYCLES = 8


def speculative_verify_only():
    """Assisted generation that emits no plain decode step: every cycle drafts VERIFY_DRAFT_TOKENS tokens (constant
    schedule, no confidence cut) and the target keeps them all, so every cycle emits draft tokens + 1 and the run's
    last cycle still has a draft to verify (a random target rejects drafts, leaving its last token to a plain
    one-position decode: assisted_generation). The target keeps every draft because both models predict the same
    token: their final norms are zeroed, so every logit is 0 and greedy decoding picks token 0 in both (the
    forwards, their ops and shapes are those of any pair of models). Eager attention: no sdpa op, so the trace does
    not show the cache's length and with it how many draft tokens were accepted (the run's truth does)."""
    import torch

    target = models.llama(64, 2, seed=0, attention="eager")
    draft = models.llama(32, 1, seed=1, attention="eager")
    for model in (target, draft):
        model.model.norm.weight.data.zero_()
    draft.generation_config.num_assistant_tokens = VERIFY_DRAFT_TOKENS
    draft.generation_config.num_assistant_tokens_schedule = "constant"
    draft.generation_config.assistant_confidence_threshold = 0.0
    log = ForwardLog()
    log.wrap(target, "target")
    log.wrap(draft, "draft")
    ids, mask = _ids([12])
    new = (VERIFY_DRAFT_TOKENS + 1) * VERIFY_CYCLES
    kwargs = dict(max_new_tokens=new, min_new_tokens=new, pad_token_id=0, eos_token_id=2, do_sample=False)
    with torch.inference_mode():
        doc = _profile(
            log,
            lambda: target.generate(ids, attention_mask=mask, assistant_model=draft, **kwargs),
            record_shapes=True,
        )
    label_assisted(log.calls)
    how = (
        f"target.generate(1 prompt of 12 tokens, assistant_model=draft, max_new_tokens={new}, greedy); draft "
        f"generation_config num_assistant_tokens={VERIFY_DRAFT_TOKENS}, schedule 'constant', "
        "assistant_confidence_threshold=0; target Llama 64 wide x 2 layers, draft Llama 32 wide x 1 layer, both "
        "with eager attention and their final norm zeroed (both always predict token 0: every draft accepted); "
        "profile(CPU, record_shapes=True)"
    )
    return doc, truth_record("speculative_verify_only", how, log.calls, requests=1)


def compiled_forward():
    """model.forward = torch.compile(model.forward), static cache, compiled by a first generate() before the
    profile; the profile without shapes, with stacks and modules."""
    return _compiled("compiled_forward", record_shapes=False)


def compiled_forward_shapes():
    """The same with record_shapes=True and neither stacks nor modules: no module span brackets the forwards."""
    return _compiled("compiled_forward_shapes", record_shapes=True)


def _compiled(shape: str, record_shapes: bool):
    import torch

    model = models.llama()
    model.forward = torch.compile(model.forward)
    log = ForwardLog()
    log.wrap(model)
    ids, mask = _ids([12])
    kwargs = _generate_kwargs(do_sample=False, cache_implementation="static")
    with torch.inference_mode():
        model.generate(ids, attention_mask=mask, **kwargs)  # compiles prefill and decode graphs
        log.calls.clear()
        doc = _profile(
            log,
            lambda: model.generate(ids, attention_mask=mask, **kwargs),
            record_shapes=record_shapes,
            with_stack=not record_shapes,
            with_modules=not record_shapes,
        )
    options = "record_shapes=True" if record_shapes else "record_shapes=False, with_stack=True, with_modules=True"
    how = (
        "model.forward = torch.compile(model.forward); generate(1 prompt of 12 tokens, max_new_tokens=8, "
        f"cache_implementation='static') once to compile, then profiled: profile(CPU, {options})"
    )
    return _one_generate(shape, how, log, doc)


@contextmanager
def _streamed_generate(model, tokenizer, prompt: str, all_threads: bool):
    """generate() on a background thread, the launching thread reading a TextIteratorStreamer."""
    from transformers import TextIteratorStreamer

    streamer = TextIteratorStreamer(tokenizer, skip_prompt=True)
    enc = tokenizer(prompt, return_tensors="pt")
    kwargs = _generate_kwargs(do_sample=False, streamer=streamer, **enc)
    thread = threading.Thread(target=model.generate, kwargs=kwargs)
    text: list[str] = []

    def run():
        thread.start()
        text.extend(streamer)
        thread.join()

    yield run, text


def _streamer_shape(shape: str, all_threads: bool, with_stack: bool = False):
    model, tok = models.llama(), models.tokenizer()
    log = ForwardLog()
    log.wrap(model)
    with _streamed_generate(model, tok, models.words(12), all_threads) as (run, text):
        doc = _profile(log, run, all_threads=all_threads, with_stack=with_stack)
    profiler = (
        "profile(CPU, experimental_config=_ExperimentalConfig(profile_all_threads=True))"
        if all_threads
        else "profile(CPU, with_stack=True)"
        if with_stack
        else "profile(CPU) with its defaults"
    )
    how = (
        "threading.Thread(target=model.generate, kwargs=(12-token prompt, max_new_tokens=8, "
        f"streamer=TextIteratorStreamer)) started inside the profile, the launching thread reading the streamer; "
        f"{profiler}"
    )
    extra = {"launching_thread": threading.get_native_id(), "streamed_text": "".join(text)}
    return _one_generate(shape, how, log, doc, extra)


def launching_thread_only():
    return _streamer_shape("launching_thread_only", all_threads=False)


def launching_thread_only_stack():
    return _streamer_shape("launching_thread_only_stack", all_threads=False, with_stack=True)


def background_all_threads():
    return _streamer_shape("background_all_threads", all_threads=True)


def two_requests_stack():
    """Two generate() calls one after the other, profiled with stacks and modules but no shapes: which forwards
    open a request is read from the call tree."""
    model = models.llama()
    log = ForwardLog()
    log.wrap(model)
    first, first_mask = _ids([9])
    second, second_mask = _ids([6], start=40)
    kwargs = _generate_kwargs(do_sample=False)

    def run():
        model.generate(first, attention_mask=first_mask, **kwargs)
        model.generate(second, attention_mask=second_mask, **kwargs)

    import torch

    with torch.inference_mode():
        doc = _profile(log, run, with_stack=True, with_modules=True)
    label_padded_generate(log.calls, first_of_call={0, NEW_TOKENS})
    how = (
        "generate(1 prompt of 9 tokens, max_new_tokens=8), then generate(1 prompt of 6 tokens, max_new_tokens=8); "
        "profile(CPU, with_stack=True, with_modules=True), no shapes"
    )
    return doc, truth_record("two_requests_stack", how, log.calls, requests=2)


def beam_search():
    import torch

    model = models.llama()
    log = ForwardLog()
    log.wrap(model)
    ids, mask = _ids([10])
    kwargs = _generate_kwargs(num_beams=3, do_sample=False)
    with torch.inference_mode():
        doc = _profile(log, lambda: model.generate(ids, attention_mask=mask, **kwargs), record_shapes=True)
    how = "generate(1 prompt of 10 tokens, num_beams=3, max_new_tokens=8); profile(CPU, record_shapes=True)"
    return _one_generate("beam_search", how, log, doc)


def left_padded_sampling():
    import torch

    model = models.llama()
    log = ForwardLog()
    log.wrap(model)
    ids, mask = _ids([5, 9, 7])
    kwargs = _generate_kwargs(do_sample=True, temperature=0.8, top_k=50)
    torch.manual_seed(1)
    with torch.inference_mode():
        doc = _profile(log, lambda: model.generate(ids, attention_mask=mask, **kwargs), record_shapes=True)
    how = (
        "generate(3 prompts of 5/9/7 tokens left-padded to [3, 9], do_sample=True, temperature=0.8, top_k=50, "
        "max_new_tokens=8); profile(CPU, record_shapes=True)"
    )
    return _one_generate("left_padded_sampling", how, log, doc)


def moe():
    import torch

    model = models.qwen2_moe()
    log = ForwardLog()
    log.wrap(model)
    ids, mask = _ids([10])
    kwargs = _generate_kwargs(do_sample=False)
    with torch.inference_mode():
        doc = _profile(log, lambda: model.generate(ids, attention_mask=mask, **kwargs), record_shapes=True)
    how = (
        "tiny Qwen2-MoE (4 experts, 2 per token, shared expert, 2 layers): generate(1 prompt of 10 tokens, "
        "max_new_tokens=8); profile(CPU, record_shapes=True)"
    )
    return _one_generate("moe", how, log, doc)


def pipeline_chat():
    """The tutorial's text-generation pipeline on one chat message, profiled with memory and stacks."""
    from transformers import pipeline

    model, tok = models.llama(), models.tokenizer()
    log = ForwardLog()
    log.wrap(model)
    pipe = pipeline("text-generation", model=model, tokenizer=tok, device="cpu")
    messages = [{"role": "user", "content": models.words(10)}]
    kwargs = _generate_kwargs(do_sample=False)
    doc = _profile(log, lambda: pipe(messages, **kwargs), profile_memory=True, with_stack=True)
    how = (
        "pipeline('text-generation', model, tokenizer)([{'role': 'user', 'content': 10 words}], "
        "max_new_tokens=8) with a chat template; profile(CPU, profile_memory=True, with_stack=True)"
    )
    return _one_generate("pipeline_chat", how, log, doc)


SHAPES: dict[str, Callable[[], tuple[dict, dict]]] = {
    "continuous_batching": continuous_batching,
    "assisted_generation": assisted_generation,
    "speculative_verify_only": speculative_verify_only,
    "compiled_forward": compiled_forward,
    "compiled_forward_shapes": compiled_forward_shapes,
    "launching_thread_only": launching_thread_only,
    "launching_thread_only_stack": launching_thread_only_stack,
    "background_all_threads": background_all_threads,
    "two_requests_stack": two_requests_stack,
    "beam_search": beam_search,
    "left_padded_sampling": left_padded_sampling,
    "moe": moe,
    "pipeline_chat": pipeline_chat,
}
