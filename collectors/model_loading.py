"""Build or load the model a run profiles: a preset with random weights, a local folder, or a hub id.

Presets are built directly on the target device in the target dtype, with weight
initialisation skipped and replaced by one cheap random fill: initialising an 8B model on
the CPU and copying it over would take minutes and needs twice the memory.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any

import torch

from .devices import free_memory_bytes
from .errors import CollectorError
from .presets import preset_config


@dataclass
class LoadedModel:
    model: Any  # a transformers PreTrainedModel with a causal LM head
    config: Any
    tokenizer: Any | None  # None for presets: prompts are mapped to ids without one (see prompts.py)
    source: str  # "preset:NAME", "local:PATH" or "hub:ID"


def _no_init_weights():
    """transformers' switch that skips weight init (moved between versions; absent -> no-op)."""
    for module_name in ("transformers.initialization", "transformers.modeling_utils"):
        try:
            module = __import__(module_name, fromlist=["no_init_weights"])
            return module.no_init_weights()
        except (ImportError, AttributeError):
            continue
    return contextlib.nullcontext()


@torch.no_grad()
def _fill_random(model: torch.nn.Module, seed: int = 0) -> None:
    """Replace uninitialised memory (possibly NaN or denormals, which slow CPU math) with sane values."""
    gen_device = next(model.parameters()).device
    generator = torch.Generator(device=gen_device).manual_seed(seed)
    for name, param in model.named_parameters():
        if param.dim() >= 2:
            param.normal_(0.0, 0.02, generator=generator)
        elif name.endswith("bias"):
            param.zero_()
        else:  # norm scales
            param.fill_(1.0)


def parameter_count(config: Any) -> int:
    """Parameters of the model a config describes, counted on the meta device (no memory used)."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        meta_model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in meta_model.parameters())


def kv_cache_bytes(config: Any, batch: int, positions: int, dtype: torch.dtype) -> int:
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = getattr(text, "num_attention_heads", 1) or 1
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    layers = text.num_hidden_layers
    return 2 * layers * kv_heads * head_dim * positions * batch * dtype.itemsize


def check_memory(config: Any, device: torch.device, dtype: torch.dtype, batch: int, positions: int) -> int:
    """Refuse a model that cannot fit before allocating anything; returns the estimate in bytes."""
    params = parameter_count(config)
    need = params * dtype.itemsize + kv_cache_bytes(config, batch, positions, dtype)
    need = int(need * 1.15) + (256 << 20)  # activations, logits, allocator slack
    free = free_memory_bytes(device)
    if free is not None and need > free:
        raise CollectorError(
            f"model does not fit: {params / 1e9:.2f}B parameters in {str(dtype).removeprefix('torch.')} "
            f"need about {need / 2**30:.1f} GiB on {device.type}, only {free / 2**30:.1f} GiB free"
        )
    return need


def build_preset(name: str, device: torch.device, dtype: torch.dtype, batch: int, positions: int) -> LoadedModel:
    from transformers import AutoModelForCausalLM

    config = preset_config(name)
    check_memory(config, device, dtype, batch, positions)
    with torch.device(device), _no_init_weights():
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    _fill_random(model)
    return LoadedModel(_ready(model), model.config, None, f"preset:{name}")


def _looks_like_path(name: str) -> bool:
    return os.path.isabs(name) or name.startswith((".", "~")) or name.count("/") != 1 or os.path.exists(name)


def load_pretrained(
    name: str, device: torch.device, dtype: torch.dtype, batch: int, positions: int, trust_remote_code: bool
) -> LoadedModel:
    """A local folder (never touches the network) or, if the name is an org/model id, the hub."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    local = _looks_like_path(name)
    if local:
        path = os.path.expanduser(name)
        if not os.path.isdir(path):
            raise CollectorError(f"no model folder at {name}")
        if not os.path.isfile(os.path.join(path, "config.json")):
            raise CollectorError(f"{name} is not a model folder (no config.json in it)")
    else:
        path = name
    common = dict(local_files_only=True, trust_remote_code=trust_remote_code)
    try:
        try:
            config = AutoConfig.from_pretrained(path, **common)
        except OSError:
            if local:
                raise
            common["local_files_only"] = False  # a hub id not in the local cache: only now go online
            config = AutoConfig.from_pretrained(path, **common)
        check_memory(config, device, dtype, batch, positions)
        model = AutoModelForCausalLM.from_pretrained(path, config=config, dtype=dtype, **common)
    except CollectorError:
        raise
    except torch.OutOfMemoryError:
        raise
    except Exception as exc:  # transformers raises many types; the user needs one line
        raise CollectorError(_explain_load_failure(name, local, exc)) from exc
    model = model.to(device)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, **common)
    except Exception:
        tokenizer = None  # prompts then use the byte mapping, as for presets
    return LoadedModel(_ready(model), model.config, tokenizer, ("local:" if local else "hub:") + name)


def _explain_load_failure(name: str, local: bool, exc: Exception) -> str:
    text = " ".join(str(exc).split())
    if "trust_remote_code" in text or "custom code" in text:
        return f"model {name} needs its own Python code; pass --trust-remote-code if you trust it"
    if not local:
        return (
            f"no model folder {name} here, and the Hugging Face hub has no such model or cannot be reached"
            f" (offline?): {text[:200]}"
        )
    return f"could not load the model in {name}: {type(exc).__name__}: {text[:300]}"


def _ready(model: Any) -> Any:
    model.eval()
    model.requires_grad_(False)
    return model
