"""NumPy float64 references computed from a built layer's actual weights."""

from __future__ import annotations

import math

import keras
import numpy as np

from toolkit.ops import reference_partial_shift, reference_self_attention

_ERF = np.frompyfunc(math.erf, 1, 1)


def weight(layer: keras.layers.Layer, name: str) -> np.ndarray:
    """The float64 value of `layer`'s weight whose path ends with `name`."""
    for w in layer.weights:
        if w.path.split("/")[-1] == name:
            return np.asarray(w.numpy(), np.float64)
    raise KeyError(f"{layer.name} has no weight '{name}'")


def gelu(x: np.ndarray) -> np.ndarray:
    """Exact GELU 0.5 * x * (1 + erf(x / sqrt(2))) in float64."""
    return 0.5 * x * (1.0 + _ERF(x / math.sqrt(2.0)).astype(np.float64))


def layer_norm(x: np.ndarray, layer: keras.layers.LayerNormalization) -> np.ndarray:
    """LayerNormalization over the last axis with the layer's gamma, beta and epsilon."""
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    y = (x - mean) / np.sqrt(var + layer.epsilon)
    return y * weight(layer, "gamma") + weight(layer, "beta")


def dense(x: np.ndarray, layer: keras.layers.Dense) -> np.ndarray:
    """x @ kernel + bias (no activation; no bias when the layer has none)."""
    return x @ weight(layer, "kernel") + (weight(layer, "bias") if layer.use_bias else 0.0)


def mlp(x: np.ndarray, layer: keras.layers.Layer) -> np.ndarray:
    """toolkit MLP at inference: Dense, its activation (gelu or relu) on all but
    (activate_last=False) the last."""
    activate = {"gelu": gelu, "relu": lambda v: np.maximum(v, 0.0)}[layer.activation]
    last = len(layer.dense_layers) - 1
    for i, d in enumerate(layer.dense_layers):
        x = dense(x, d)
        if i < last or layer.activate_last:
            x = activate(x)
    return x


def shift(x: np.ndarray, num_div: int, shift_pixel: int) -> np.ndarray:
    """Partial shift from the official ShiftViT definition."""
    return reference_partial_shift(np.asarray(x, np.float64), num_div, shift_pixel)


def attention(x: np.ndarray, layer: keras.layers.Layer) -> np.ndarray:
    """LSA with the layer's projections and temperature; the diagonal is always excluded."""
    pairs = [
        (weight(d, "kernel"), weight(d, "bias") if d.use_bias else 0.0)
        for d in (layer.query_dense, layer.key_dense, layer.value_dense, layer.output_dense)
    ]
    tau, scale = getattr(layer, "tau", None), getattr(layer, "scale", None)
    out, _ = reference_self_attention(
        x,
        *[a for pair in pairs for a in pair],
        num_heads=layer.num_heads,
        key_dim=layer.key_dim,
        tau=None if tau is None else float(np.asarray(tau.numpy())),
        locality=True,
        head_scale=None if scale is None else np.asarray(scale.numpy()),
    )
    return out
