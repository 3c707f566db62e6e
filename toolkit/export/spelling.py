"""Layers respelled for a converter: the same function as the trained layer, in fewer or faster
ops of the target format. The converters clone the run's model with these swaps; the trained
`model.keras` never changes."""

from __future__ import annotations

import keras

from toolkit.ops import (
    AdditiveMaskLocalitySelfAttention,
    CenteredLayerNorm,
    DepthwisePartialShift,
    LocalitySelfAttention,
    PartialShift,
)


def respelled(layer: keras.layers.Layer, cls: type[keras.layers.Layer]) -> keras.layers.Layer:
    """`layer` as an instance of `cls` (the same function, other ops) with its weights, or
    `layer` itself when `cls` refuses its config."""
    spelled = cls.from_config(layer.get_config())
    try:
        spelled.build(layer.input.shape)
    except ValueError:  # e.g. a LayerNormalization not over the last axis
        return layer
    spelled.set_weights(layer.get_weights())
    return spelled


def converter_spelling(
    model: keras.Model,
    centered_norm: bool = False,
    additive_mask: bool = False,
    depthwise_shift: bool = False,
) -> keras.Model:
    """`model` with its (top-level) layers spelled for a converter: with `centered_norm` a
    last-axis LayerNormalization as CenteredLayerNorm (the TFLite converter folds gamma and beta
    into the next Dense), with `additive_mask` LSA as AdditiveMaskLocalitySelfAttention, with
    `depthwise_shift` PartialShift as DepthwisePartialShift (one depthwise convolution instead
    of a pad, slices and a concatenate). Every other layer is shared with `model`, names
    included."""

    def clone(layer: keras.layers.Layer) -> keras.layers.Layer:
        norm = type(layer) is keras.layers.LayerNormalization and not layer.rms_scaling
        if centered_norm and norm:
            return respelled(layer, CenteredLayerNorm)
        if additive_mask and type(layer) is LocalitySelfAttention:
            return respelled(layer, AdditiveMaskLocalitySelfAttention)
        if depthwise_shift and type(layer) is PartialShift:
            return respelled(layer, DepthwisePartialShift)
        return layer

    return keras.models.clone_model(model, clone_function=clone)
