"""Models, presets and the registry that maps `--model` names to builders.

Presets are plain data and import without Keras (`toolkit presets` reads them); the builders,
MAC counting and the position embedding need Keras and load on first use.
"""

from __future__ import annotations

import importlib

from toolkit.models.presets import PRESETS, Preset, get_preset, preset_from_dict

# name -> the module of this package that defines it, imported when the name is first used
_KERAS_BACKED = {
    "LayerCost": "macs",
    "count_macs": "macs",
    "layer_costs": "macs",
    "PositionEmbedding": "position",
    "MODELS": "registry",
    "build_model": "registry",
    "channel_stats": "registry",
}

__all__ = [
    "MODELS",
    "PRESETS",
    "LayerCost",
    "PositionEmbedding",
    "Preset",
    "build_model",
    "channel_stats",
    "count_macs",
    "get_preset",
    "layer_costs",
    "preset_from_dict",
]


def __getattr__(name: str) -> object:
    """The Keras-backed names, imported from their module on first use (PEP 562)."""
    if name not in _KERAS_BACKED:
        raise AttributeError(f"module 'toolkit.models' has no attribute {name!r}")
    return getattr(importlib.import_module(f"toolkit.models.{_KERAS_BACKED[name]}"), name)
