"""Multiply-accumulates per image, counted analytically from layer shapes.

Counts the matrix work (convolutions, dense layers, attention matmuls); elementwise ops,
normalisation and softmax are left out, as is usual for MAC figures.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import keras

from toolkit.ops import MLP, LocalitySelfAttention, SelfAttention, ShiftedPatchTokenization


def _tokens(shape) -> int:
    return math.prod(int(d) for d in shape[1:-1])


def _dense(layer, in_shape, out_shape) -> int:
    return _tokens(in_shape) * int(in_shape[-1]) * int(out_shape[-1])


def _conv(layer, in_shape, out_shape) -> int:
    kh, kw = layer.kernel_size
    return _tokens(out_shape) * kh * kw * int(in_shape[-1]) * int(out_shape[-1])


def _attention(layer, in_shape, out_shape) -> int:
    t, d = int(in_shape[1]), int(in_shape[-1])
    inner = layer.num_heads * layer.key_dim
    return 3 * t * d * inner + 2 * t * t * inner + t * inner * d


def _tokenizer(layer, in_shape, out_shape) -> int:
    h, w, c = (int(v) for v in in_shape[1:])
    views = 1 if layer.vanilla else 5
    return (
        (h // layer.patch_size)
        * (w // layer.patch_size)
        * (layer.patch_size**2 * c * views)
        * int(out_shape[-1])
    )


def _mlp(layer, in_shape, out_shape) -> int:
    tokens, width, total = _tokens(in_shape), int(in_shape[-1]), 0
    for units in layer.units:
        total += tokens * width * units
        width = units
    return total


MAC_COUNTERS: dict[type, Callable] = {
    keras.layers.Dense: _dense,
    keras.layers.Conv2D: _conv,
    SelfAttention: _attention,
    LocalitySelfAttention: _attention,
    ShiftedPatchTokenization: _tokenizer,
    MLP: _mlp,
}


def count_macs(model: keras.Model) -> int:
    """MACs for one image through `model` (batch dimension excluded)."""
    total = 0
    for layer in model.layers:
        counter = MAC_COUNTERS.get(type(layer))
        if counter is not None:
            total += counter(layer, layer.input.shape, layer.output.shape)
    return total
