"""What the exported model does to its input itself, so an app feeds raw RGB pixels."""

from __future__ import annotations

from collections.abc import Callable

from toolkit.common.errors import UsageError
from toolkit.models import MODELS
from toolkit.runfiles import RunConfig


def _rescale(config: RunConfig) -> dict:
    return {"op": "rescale", "formula": "x / 255", "scale": 1 / 255}


def _normalize(config: RunConfig) -> dict:
    # build_vit's default when a run has no norm_stats: 0-255 mapped to [-1, 1]
    mean, variance = config.norm_stats or ([127.5] * 3, [127.5**2] * 3)
    return {
        "op": "normalize",
        "formula": "(x - mean) / sqrt(variance), per channel, on 0-255 values",
        "mean": mean,
        "variance": variance,
    }


# config.json "preprocessing" -> the in-model step it stands for
STEPS: dict[str, Callable[[RunConfig], dict]] = {"rescale": _rescale, "normalize": _normalize}


def describe_preprocessing(config: RunConfig, input_hw: tuple[int, int]) -> dict:
    """The input an app feeds and the steps the model applies inside, from a run's config.json."""
    size = config.image_size
    try:
        kind = config.preprocessing or MODELS[config.model].preprocessing
        step = STEPS[kind](config)
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(
            f"config.json of the run lacks the preprocessing or preset ({exc!r}): retrain the run"
        ) from exc
    height, width = input_hw
    applied = (height, width) != (size, size)
    resize = {
        "op": "resize",
        "formula": f"bilinear {height}x{width} -> {size}x{size}" if applied else "none (same size)",
        "size": [size, size],
        "applied": applied,
    }
    return {
        "app_input": f"raw RGB pixels 0-255 as float32 (int8 inputs: quantized with the input "
        f"scale/zero point), NHWC, {height}x{width}; no scaling, normalization or resize",
        "in_model": [step, resize],
        "summary": f"{kind}, then resize to {size}x{size}, inside the model"
        if applied
        else f"{kind} inside the model (input already {size}x{size}, no resize)",
    }
