"""A model's shapes for the roofline from a name the user gives: a preset (contracts/presets.py), a model folder,
a config.json or a run.json. Used by the roofline command and by the Analyze page for traces
without a run.json (so the page does not import the command line)."""

from __future__ import annotations

from pathlib import Path

from stepscope.contracts.presets import PRESETS
from . import ModelShape, read_config_file, shape_from_config
from .model_presets import ANALYSIS_PRESETS, analysis_preset

_PRESET_MODEL_TYPES = {"LlamaConfig": "llama", "Qwen2Config": "qwen2", "Phi3Config": "phi3"}


def model_shape(model: str, dtype: str | None = None) -> ModelShape:
    """A ModelShape for a preset name (contracts/presets.py, else a family preset of
    analysis.roofline.model_presets), else a model folder, config.json or run.json; ValueError
    with a one-line message otherwise."""
    preset = PRESETS.get(model)
    if preset is not None:
        config = {"model_type": _PRESET_MODEL_TYPES.get(preset.config_class, ""), **preset.config_kwargs}
        return shape_from_config(config, dtype=dtype, name=preset.name)
    family = analysis_preset(model)
    if family is not None:
        return shape_from_config(family, dtype=dtype, name=model.strip().lower())
    if not Path(model).exists():
        known = ", ".join(preset_names())
        raise ValueError(f"model {model!r} is neither a preset ({known}) nor an existing path")
    return shape_from_config(read_config_file(model), dtype=dtype, name=Path(model).name)


def preset_names() -> list[str]:
    """Every name model_shape takes as a preset: contracts/presets.py's (tiny ones for CPU runs) and the families'."""
    return sorted(set(PRESETS) | set(ANALYSIS_PRESETS))
