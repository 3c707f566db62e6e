"""A markdown table of every (model, preset): architecture, parameters and MACs per image."""

from __future__ import annotations

from dataclasses import asdict

from toolkit.models.macs import count_macs
from toolkit.models.presets import PRESETS, get_preset
from toolkit.models.registry import build_model

_SUMMARY_KEYS = ("image_size", "patch_size", "dim", "depths", "depth", "num_heads", "key_dim")


def preset_table(input_shape: tuple[int, int, int] = (32, 32, 3), num_classes: int = 10) -> str:
    """Build each preset for `input_shape` images and tabulate its size and compute."""
    rows = [
        "| model | preset | architecture | parameters | MACs / image |",
        "|---|---|---|---:|---:|",
    ]
    for model, presets in PRESETS.items():
        for name in presets:
            preset = get_preset(model, name)
            net = build_model(preset, input_shape, num_classes)
            arch = asdict(preset.arch)
            summary = ", ".join(f"{k} {arch[k]}" for k in _SUMMARY_KEYS if k in arch)
            rows.append(
                f"| {model} | {name} | {summary} | {net.count_params():,} "
                f"| {count_macs(net) / 1e6:,.1f} M |"
            )
    return "\n".join(rows)
