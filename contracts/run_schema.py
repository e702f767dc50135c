"""Schema check for the run.json a collector writes beside a trace (stepscope.run/1).

The file sits next to a trace that may come from anywhere, so it is input like the trace: a spec that
is a list, a device that is a number, hidden size 1e308 or negative layers must give a note and no
roofline, never a crash or a "715% of roofline". One small function with no dependencies, so that it
can move to contracts/ with the rest of the run.json reading.
"""

from __future__ import annotations

import math
from typing import Any

# Model sizes the roofline reads, with bounds far beyond any real model (so no false rejections).
CONFIG_BOUNDS = {
    "hidden_size": 1 << 20,
    "num_hidden_layers": 10_000,
    "num_attention_heads": 1 << 14,
    "num_key_value_heads": 1 << 14,
    "intermediate_size": 1 << 24,
    "vocab_size": 1 << 26,
    "head_dim": 1 << 16,
}
REQUIRED_CONFIG = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")
TEXT_FIELDS = ("device", "device_type", "dtype", "schema")
COUNT_BOUNDS = {"prompt_len": 1 << 24, "batch": 1 << 20, "prompt_tokens": 1 << 24, "new_tokens": 1 << 24}
MOE_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")


def run_record_problems(record: Any) -> list[str]:
    """What is wrong with a run.json for the roofline, as short phrases naming the field; [] when fine."""
    if not isinstance(record, dict):
        return [f"the top level is a {type(record).__name__}, not an object"]
    problems = []
    for key in TEXT_FIELDS:
        if record.get(key) is not None and not isinstance(record[key], str):
            problems.append(f"{key} is a {type(record[key]).__name__}, not text")
    spec = record.get("spec")
    if spec is not None and not isinstance(spec, dict):
        problems.append(f"spec is a {type(spec).__name__}, not an object")
    counts = {"prompt_len": record.get("prompt_len")}
    if isinstance(spec, dict):
        counts.update({k: spec.get(k) for k in ("batch", "prompt_tokens", "new_tokens")})
    for key, value in counts.items():
        problem = _count_problem(value, COUNT_BOUNDS[key], allow_none=True)
        if problem:
            problems.append(f"{key} {problem}")
    model = record.get("model")
    if not isinstance(model, dict):
        return [*problems, "model is missing or not an object"]
    for key in ("source", "architecture"):
        if model.get(key) is not None and not isinstance(model[key], str):
            problems.append(f"model.{key} is a {type(model[key]).__name__}, not text")
    config = model.get("config")
    if isinstance(config, dict) and "hidden_size" not in config and isinstance(config.get("text_config"), dict):
        config = config["text_config"]
    if not isinstance(config, dict):
        return [*problems, "model.config is missing or not an object"]
    for key, limit in CONFIG_BOUNDS.items():
        problem = _count_problem(config.get(key), limit, allow_none=key not in REQUIRED_CONFIG)
        if problem:
            problems.append(f"model.config.{key} {problem}")
    for key in MOE_KEYS:
        if config.get(key) is not None and _count_problem(config[key], 1 << 16, allow_none=True):
            problems.append(f"model.config.{key} is not a whole number in range")
    for key in ("torch_dtype", "dtype", "model_type", "_name_or_path"):
        if config.get(key) is not None and not isinstance(config[key], str):
            problems.append(f"model.config.{key} is a {type(config[key]).__name__}, not text")
    return problems


def _count_problem(value: Any, limit: int, allow_none: bool) -> str | None:
    if value is None:
        return None if allow_none else "is missing"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"is a {type(value).__name__}, not a number"
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        return f"is {value!r}, not a whole number"
    if not 0 < value <= limit:
        return f"is {value:.6g}, outside 1..{limit}"
    return None
