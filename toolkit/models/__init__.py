"""Models, presets and the registry that maps `--model` names to builders."""

from toolkit.models.macs import LayerCost, count_macs, layer_costs
from toolkit.models.position import PositionEmbedding
from toolkit.models.presets import PRESETS, Preset, get_preset, preset_from_dict
from toolkit.models.registry import MODELS, build_model, channel_stats

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
