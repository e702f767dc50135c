"""Why a trace that holds profiler output has no forward in it, when the trace says: what it looks like and what to
change. The answer stays a success (no steps, method none); these lines go in segmentation.warnings.

- only the launching thread recorded: threads named in the trace's metadata hold no events, and no model op ran
  on the threads that do (torch.profiler records the thread that started it unless told otherwise);
- the profile stopped (or started) away from the generation: host ops, none of them a model op;
- a server's front-end process: its python frames are an HTTP / async server's, and no model op ran here.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..event_rows import kind_mask
from ..names import name_matches
from .frames import Views

MODEL_OP = re.compile(
    r"^aten::(linear|mm|addmm|matmul|bmm|baddbmm|embedding|scaled_dot_product_attention|_scaled_dot_product|conv)"
    r"|^Torch-Compiled Region|^nn\.Module: "
)
FRONT_END = re.compile(
    r"uvicorn|starlette|fastapi|aiohttp|asyncio/|api_server|serving_chat|serving_completion|openai|"
    r"AsyncLLM|engine_core_client|EngineCoreClient|TokenizerManager|tokenizer_manager|zmq"
)
DEVICE_WORK = ("kernel", "memcpy", "memset")
PROFILER_SPAN = re.compile(r"^PyTorch Profiler \(\d+\)$")
WAITING = re.compile(r"threading\.py\(\d+\): (wait|join)|queue\.py\(\d+\): get|streamers\.py\(\d+\): __next__")
ALL_THREADS = (
    "torch.profiler.profile(..., experimental_config=torch._C._profiler._ExperimentalConfig(profile_all_threads=True))"
)


def empty_reasons(views: Views) -> list[str]:
    """The case an empty trace looks like and what to change, [] when nothing points at one."""
    ev = views.events
    if kind_mask(ev, DEVICE_WORK).any():
        return []  # device work but no forward: not one of these cases
    host = kind_mask(ev, ("cpu_op", "python", "annotation", "runtime", "driver"))
    if (host & name_matches(ev["name"], MODEL_OP)).any():
        return []
    if not host.any():
        window = _window_ms(ev)
        return [
            f"the profiler recorded no operator at all{window}: the model ran on a thread it did not record, or "
            "outside the profile. torch.profiler records only the thread that started it (generate() on a "
            "background thread, as with a TextIteratorStreamer, or an engine's own thread is missed): profile with "
            f"{ALL_THREADS}, or start the profiler inside the thread that runs the model; and keep the generation "
            "inside the `with profile(...)` block"
        ]
    reasons = []
    named, silent = _silent_threads(views)
    waiting = _waiting_frames(ev, host)
    if (silent and named >= 2) or waiting:
        seen = f"the trace names {named} threads, {silent} of them with no events" if silent else waiting
        reasons.append(
            f"only the launching thread was recorded ({seen}) and no model op ran on it. torch.profiler records the "
            "thread that started it (a generate() on a background thread, as with a TextIteratorStreamer, or an "
            f"engine's own thread is missed): profile with {ALL_THREADS}, or start the profiler inside the thread "
            "that runs the model"
        )
    front = _front_end_frames(ev, host)
    if front:
        reasons.append(
            f"this looks like a server's front-end process ({front}): the model's forwards run in another process "
            "(the engine core or a worker): profile that process"
        )
    if not reasons:
        reasons.append(
            f"{int(host.sum())} host events and no model op among them: the profile stopped before the generation "
            "ran (or started after it): keep generate() inside the `with profile(...)` block, or, with a "
            "schedule, give it enough active steps to reach the forwards"
        )
    return reasons


def _window_ms(ev) -> str:
    """ " in its N ms window" from the profiler's own span, "" when the trace has none."""
    span = name_matches(ev["name"], PROFILER_SPAN)
    if not span.any():
        return ""
    return f" in its {float(ev['dur'].to_numpy()[span].max()) / 1e6:.1f} ms window"


def _waiting_frames(ev, host: np.ndarray) -> str:
    """How the launching thread waited on another (python frames of a queue or a thread join), "" if not seen."""
    hit = host & name_matches(ev["name"], WAITING)
    return f"{int(hit.sum())} python frames waiting on a queue or another thread" if hit.any() else ""


def _silent_threads(views: Views) -> tuple[int, int]:
    """(threads the profiler's metadata names, of them those that hold no event at all)."""
    named = set(views.timeline.meta.thread_names)
    if not named:
        return 0, 0
    ev = views.events
    pairs = pd.DataFrame({"pid": ev["pid"].to_numpy(), "tid": ev["tid"].to_numpy()}).drop_duplicates()
    seen = set(zip(pairs["pid"].tolist(), pairs["tid"].tolist(), strict=True))
    return len(named), len(named - seen)


def _front_end_frames(ev, host: np.ndarray) -> str:
    """A few distinct names of host spans that belong to a web or async server, "" when there are none."""
    hit = host & name_matches(ev["name"], FRONT_END)
    if not hit.any():
        return ""
    names = ev["name"][hit].astype(str).unique()[:3]
    return ", ".join(repr(str(n)[:60]) for n in names)
