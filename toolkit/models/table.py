"""A markdown table of every (model, preset): what it is for, architecture, size, compute and
training recipe; the README's copy is `preset_table_markdown()` (checked by a test)."""

from __future__ import annotations

from collections.abc import Callable

from toolkit.models.macs import count_macs
from toolkit.models.presets import PRESET_PURPOSES, PRESETS, ShiftViTArch, ViTArch, get_preset
from toolkit.models.registry import build_model

README_INPUT = (32, 32, 3)
README_CLASSES = 10


def _shiftvit_shape(arch: ShiftViTArch) -> str:
    widths = [arch.dim * 2**i for i in range(len(arch.depths))]
    return f"blocks {'-'.join(map(str, arch.depths))} / width {widths[0]}-{widths[-1]}"


def _vit_shape(arch: ViTArch) -> str:
    return f"{arch.depth} blocks / width {arch.dim}, {arch.num_heads} heads x {arch.key_dim}"


# architecture class -> its "depth / width" cell
_SHAPES: dict[type, Callable] = {ShiftViTArch: _shiftvit_shape, ViTArch: _vit_shape}


def preset_table(
    input_shape: tuple[int, int, int] = README_INPUT, num_classes: int = README_CLASSES
) -> str:
    """Build each preset for `input_shape` images and tabulate its size, compute and recipe."""
    rows = [
        "| model | preset | for | image | patch | depth / width | parameters | MACs / image "
        "| epochs | batch |",
        "|---|---|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    for model, presets in PRESETS.items():
        for name in presets:
            preset = get_preset(model, name)
            arch, train = preset.arch, preset.train
            net = build_model(preset, input_shape, num_classes)
            rows.append(
                f"| {model} | {name} | {PRESET_PURPOSES[name]} | {arch.image_size} "
                f"| {arch.patch_size} | {_SHAPES[type(arch)](arch)} | {net.count_params():,} "
                f"| {count_macs(net) / 1e6:,.1f} M | {train.epochs} | {train.batch_size} |"
            )
    return "\n".join(rows)


def preset_table_markdown() -> str:
    """The README's presets table (32x32 RGB input, 10 classes), newline-terminated."""
    return preset_table(README_INPUT, README_CLASSES) + "\n"
