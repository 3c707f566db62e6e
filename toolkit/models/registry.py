"""The model registry: one entry per `--model` name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import keras
import numpy as np

from toolkit.common.errors import UsageError
from toolkit.models.presets import Preset
from toolkit.models.shiftvit import at_resolution, build_shiftvit
from toolkit.models.vit import build_vit


@dataclass(frozen=True)
class ModelEntry:
    """How to build one model and which in-model preprocessing it uses."""

    build: Callable[..., keras.Model]
    preprocessing: str  # "rescale": x / 255; "normalize": (x - mean) / std of the train split
    description: str
    # (model, size) -> the model training at size x size with the same weights; None where a
    # weight depends on the resolution (a position embedding): no progressive resizing
    at_resolution: Callable[[keras.Model, int], keras.Model] | None = None


MODELS: dict[str, ModelEntry] = {
    "shiftvit": ModelEntry(
        build_shiftvit, "rescale", "ShiftViT: partial channel shift, no attention", at_resolution
    ),
    "vit-lsa": ModelEntry(build_vit, "normalize", "ViT with Shifted Patch Tokenization + LSA"),
    "vit": ModelEntry(build_vit, "normalize", "vanilla ViT (ablation baseline of vit-lsa)"),
}


def channel_stats(images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel mean and variance of 0-255 images, as Normalization.adapt computes them."""
    flat = images.reshape(-1, images.shape[-1]).astype(np.float64)
    return flat.mean(axis=0), flat.var(axis=0)


def build_model(
    preset: Preset,
    input_shape: tuple[int, int, int],
    num_classes: int,
    norm_stats: tuple[np.ndarray, np.ndarray] | None = None,
) -> keras.Model:
    """Build `preset.model` for images of `input_shape` (0-255 RGB) and `num_classes` logits."""
    if preset.model not in MODELS:
        raise UsageError(f"unknown model '{preset.model}': choose one of {', '.join(MODELS)}")
    return MODELS[preset.model].build(
        preset.arch, tuple(input_shape), num_classes, norm_stats=norm_stats
    )
