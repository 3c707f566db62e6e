"""Multiply-accumulates per image, counted analytically from layer shapes.

Counted: every Conv2D (its subclasses too, e.g. the patch embedding and patch merging
PatchConv2D) as output positions x kh x kw x C_in x C_out, "same" padding's zeros included;
every Dense as tokens x C_in x C_out; self-attention (plain and LSA) as its Q, K, V and output
projections plus the two T x T matmuls (q.k^T and weights.v); the tokenizer's projection and
each Dense of an MLP. Left out, as is usual for MAC figures: biases, normalisation, softmax,
activations, the shift, pooling, resizing, position embeddings and other elementwise work.
`layer_costs` gives the same count per top-level layer with its parameter count, what a
per-layer roofline needs (work and weights of each step).

Each layer is counted by the entry of the nearest class in its MRO (so a subclass is counted
as what it computes), and only at the top level of the model: a counted custom layer counts
the layers nested inside it itself. A layer with no entry that holds a counted layer inside it
is an error rather than a silent miss.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import keras

from toolkit.ops import MLP, SelfAttention, ShiftedPatchTokenization


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


# class -> counter(layer, input shape, output shape); a layer takes the entry of the nearest
# class in its MRO, so LocalitySelfAttention uses SelfAttention's and PatchConv2D Conv2D's.
MAC_COUNTERS: dict[type, Callable] = {
    keras.layers.Dense: _dense,
    keras.layers.Conv2D: _conv,
    SelfAttention: _attention,
    ShiftedPatchTokenization: _tokenizer,
    MLP: _mlp,
}


def mac_counter(layer: keras.layers.Layer) -> Callable | None:
    """The counter of the most specific class of `layer` in MAC_COUNTERS, or None."""
    for cls in type(layer).__mro__:
        if cls in MAC_COUNTERS:
            return MAC_COUNTERS[cls]
    return None


@dataclass(frozen=True)
class LayerCost:
    """One top-level layer: its MACs per image and its weights (parameter count)."""

    name: str
    macs: int
    parameters: int


def layer_costs(model: keras.Model) -> list[LayerCost]:
    """MACs per image and parameters of every top-level layer of `model`; see the module doc."""
    costs = []
    for layer in model.layers:
        counter = mac_counter(layer)
        if counter is None:
            inner = [s for s in layer._flatten_layers(include_self=False) if mac_counter(s)]
            if inner:
                raise TypeError(
                    f"count_macs: layer '{layer.name}' ({type(layer).__name__}) holds "
                    f"{type(inner[0]).__name__} '{inner[0].name}' but has no entry in "
                    "MAC_COUNTERS; add one that counts what it computes"
                )
        macs = 0 if counter is None else counter(layer, layer.input.shape, layer.output.shape)
        costs.append(LayerCost(layer.name, int(macs), int(layer.count_params())))
    return costs


def count_macs(model: keras.Model) -> int:
    """MACs for one image through `model` (batch dimension excluded); see the module doc."""
    return sum(cost.macs for cost in layer_costs(model))
