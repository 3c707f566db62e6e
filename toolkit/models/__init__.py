"""Models, presets and the registry that maps `--model` names to builders."""

from toolkit.models.macs import count_macs
from toolkit.models.position import PositionEmbedding
from toolkit.models.presets import PRESETS, Preset, get_preset, preset_from_dict
from toolkit.models.registry import MODELS, build_model, channel_stats

__all__ = [
    "MODELS",
    "PRESETS",
    "PositionEmbedding",
    "Preset",
    "build_model",
    "channel_stats",
    "count_macs",
    "get_preset",
    "preset_from_dict",
]
