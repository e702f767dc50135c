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

from stepscope.contracts.presets import PRESETS
from stepscope.contracts.safe_read import read_regular_text
from .devices import free_memory_bytes
from .errors import CollectorError


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


# A decoder's layers are built one module object each, whatever their size (about 7 ms and 33 KB apiece on the
# meta device, more with real tensors): a count past any published model's (Llama-3-405B has 126) is refused
# rather than built for minutes. Positions allocate nothing at build time; past what an int32 position id holds,
# the config is nonsense.
MAX_LAYERS = 1024
MAX_POSITIONS = 1 << 31
HOST_BYTES_PER_LAYER = 256 << 10  # the layer's module objects and their bookkeeping, priced generously
MAX_CONFIG_BYTES = 16 << 20  # a config.json is a few kB (quantisation maps: a few MB)
_SIZE_KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")
_EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")


def _whole(config: dict[str, Any], key: str, default: int | None = None) -> int:
    value = config.get(key)
    value = default if value is None else value  # transformers' to_dict() writes None for "not set"
    if value is None:
        raise CollectorError(f"the model config has no {key}")
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise CollectorError(f"the model config's {key} must be a whole number, not {str(value)[:40]!r}")
    return value


def config_parameters(config: dict[str, Any]) -> int:
    """Parameters a config describes, from its numbers alone in constant time (no module built, nothing
    allocated): an upper estimate (gated MLPs, untied heads unless tied, learned positions never counted), so that
    an absurd number in any dimension (layers, experts, heads, hidden, vocabulary, widths) is priced before
    transformers builds anything. CollectorError when a size is missing, not a whole number or out of bounds."""
    if isinstance(config.get("text_config"), dict) and "hidden_size" not in config:
        config = config["text_config"]
    hidden, layers, heads, inter, vocab = (_whole(config, key) for key in _SIZE_KEYS)
    if min(hidden, layers, heads, vocab) < 1:
        raise CollectorError("the model config's hidden_size, num_hidden_layers, heads and vocab_size must be >= 1")
    if layers > MAX_LAYERS:
        raise CollectorError(f"the model config has {layers:,} layers: more than {MAX_LAYERS:,} is not a real model")
    positions = _whole(config, "max_position_embeddings", 2048)
    if positions > MAX_POSITIONS:
        raise CollectorError(f"the model config's max_position_embeddings {positions:,} is past {MAX_POSITIONS:,}")
    kv_heads = _whole(config, "num_key_value_heads", heads) or heads
    head_dim = _whole(config, "head_dim", hidden // heads) or hidden // heads
    if head_dim < 1 or kv_heads > heads:
        raise CollectorError(f"the model config's {heads:,} attention heads do not fit its hidden size {hidden:,}")
    experts = max((_whole(config, key, 0) for key in _EXPERT_KEYS), default=0)
    expert_width = _whole(config, "moe_intermediate_size", inter) or inter
    shared = _whole(config, "shared_expert_intermediate_size", 0) + _whole(config, "n_shared_experts", 0) * expert_width
    attention = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim + 3 * heads * head_dim
    dense_mlp = 3 * hidden * inter
    if experts > 1:  # a MoE layer's experts replace the dense MLP; DeepSeek keeps its first layers dense
        mlp = experts * (3 * hidden * expert_width + hidden) + 3 * hidden * shared
        dense_layers = min(layers, _whole(config, "first_k_dense_replace", 0))
    else:
        mlp, dense_layers = dense_mlp, 0
    head = 1 if config.get("tie_word_embeddings") else 2
    per_layer = attention + 4 * hidden
    return (
        layers * per_layer + (layers - dense_layers) * mlp + dense_layers * dense_mlp + head * vocab * hidden + hidden
    )


def kv_cache_bytes(config: dict[str, Any], batch: int, positions: int, dtype: torch.dtype) -> int:
    if isinstance(config.get("text_config"), dict) and "hidden_size" not in config:
        config = config["text_config"]
    heads = _whole(config, "num_attention_heads") or 1
    kv_heads = _whole(config, "num_key_value_heads", heads) or heads
    head_dim = _whole(config, "head_dim", 0) or _whole(config, "hidden_size") // heads
    return 2 * _whole(config, "num_hidden_layers") * kv_heads * head_dim * positions * batch * dtype.itemsize


def check_memory(config: dict[str, Any], device: torch.device, dtype: torch.dtype, batch: int, positions: int) -> int:
    """Refuse a model that cannot fit before building anything, from the config's numbers (a dict, as config.json
    holds it) in constant time; returns the estimate in bytes."""
    params = config_parameters(config)
    layers = _whole(config.get("text_config") or config, "num_hidden_layers")
    need = params * dtype.itemsize + kv_cache_bytes(config, batch, positions, dtype)
    need = int(need * 1.15) + (256 << 20) + layers * HOST_BYTES_PER_LAYER  # activations, logits, allocator slack
    free = free_memory_bytes(device)
    if free is not None and need > free:
        raise CollectorError(
            f"model does not fit: {_count(params)} parameters in {str(dtype).removeprefix('torch.')} "
            f"need about {need / 2**30:,.1f} GiB on {device.type}, only {free / 2**30:.1f} GiB free"
        )
    return need


def _count(params: int) -> str:
    return f"{params / 1e9:,.2f}B" if params < 10**18 else f"about 10^{len(str(params)) - 1}"


def _check_before_reading(
    config: dict[str, Any], device: torch.device, dtype: torch.dtype, batch: int, positions: int
) -> None:
    """Price the raw config.json when it holds every size; else bound what it holds (a model with its own code may
    leave sizes to its config class: priced after AutoConfig has read it)."""
    text = config["text_config"] if isinstance(config.get("text_config"), dict) else config
    if all(key in text for key in _SIZE_KEYS):
        check_memory(config, device, dtype, batch, positions)
    elif _whole(text, "num_hidden_layers", 0) > MAX_LAYERS:
        raise CollectorError(f"the model config has {text['num_hidden_layers']:,} layers: not a real model")


def _config_file(path: str) -> dict[str, Any]:
    """A local folder's config.json as a dict, read with a size bound: priced before transformers reads it (some
    config classes build a list per layer in their constructor, so AutoConfig itself runs long on 10^9 layers)."""
    import json

    try:
        config = json.loads(read_regular_text(os.path.join(path, "config.json"), MAX_CONFIG_BYTES))
    except (OSError, ValueError) as exc:
        raise CollectorError(f"could not read {path}/config.json: {' '.join(str(exc).split())[:200]}") from None
    if not isinstance(config, dict):
        raise CollectorError(f"{path}/config.json is not a JSON object")
    return config


def preset_config(name: str):
    """The transformers config of a preset; unknown names get a message listing the known ones."""
    preset = PRESETS.get(name)
    if preset is None:
        known = ", ".join(sorted(PRESETS))
        raise CollectorError(f"unknown preset {name!r}; known presets: {known}")
    import transformers

    config_class = getattr(transformers, preset.config_class)
    config = config_class(**preset.config_kwargs)
    # Presets always use PyTorch's SDPA: the attention kernels a stock HF deployment runs.
    config._attn_implementation = "sdpa"
    return config


def build_preset(name: str, device: torch.device, dtype: torch.dtype, batch: int, positions: int) -> LoadedModel:
    from transformers import AutoModelForCausalLM

    config = preset_config(name)
    check_memory(config.to_dict(), device, dtype, batch, positions)
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
        _check_before_reading(_config_file(path), device, dtype, batch, positions)
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
        check_memory(config.to_dict(), device, dtype, batch, positions)
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
