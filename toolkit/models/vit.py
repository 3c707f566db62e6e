"""ViT for small datasets (Lee et al. 2021): Shifted Patch Tokenization + Locality Self-Attention.

With `spt=False, lsa=False` it is the vanilla ViT of the paper's ablation.
"""

from __future__ import annotations

import keras
import numpy as np
from keras import layers

from toolkit.models.position import PositionEmbedding
from toolkit.models.presets import ViTArch
from toolkit.ops import (
    MLP,
    Dropout,
    LocalitySelfAttention,
    SelfAttention,
    ShiftedPatchTokenization,
)


def transformer_block(x, arch: ViTArch, name: str):
    """Pre-norm block: x + Attn(LN(x)), then + MLP(LN(.))."""
    attention = LocalitySelfAttention if arch.lsa else SelfAttention
    y = layers.LayerNormalization(epsilon=arch.epsilon, name=f"{name}_norm1")(x)
    y = attention(arch.num_heads, arch.key_dim, dropout=arch.dropout, name=f"{name}_attn")(y)
    x = layers.Add(name=f"{name}_add1")([y, x])
    y = layers.LayerNormalization(epsilon=arch.epsilon, name=f"{name}_norm2")(x)
    y = MLP(list(arch.mlp_units), dropout=arch.dropout, name=f"{name}_mlp")(y)
    return layers.Add(name=f"{name}_add2")([y, x])


def build_vit(
    arch: ViTArch,
    input_shape: tuple[int, int, int],
    num_classes: int,
    norm_stats: tuple[np.ndarray, np.ndarray] | None = None,
    **_: object,
) -> keras.Model:
    """Functional ViT taking 0-255 RGB; normalization (mean, variance per channel) is inside."""
    mean, variance = norm_stats if norm_stats is not None else ([127.5] * 3, [127.5**2] * 3)
    inputs = keras.Input(shape=input_shape, name="image")
    x = layers.Normalization(
        mean=[float(m) for m in mean], variance=[float(v) for v in variance], name="normalize"
    )(inputs)
    if tuple(input_shape[:2]) != (arch.image_size, arch.image_size):
        x = layers.Resizing(arch.image_size, arch.image_size, name="resize")(
            x,
            training=False,  # its default (True) would switch on Dropout/DropPath downstream
        )
    x = ShiftedPatchTokenization(
        arch.patch_size, arch.dim, vanilla=not arch.spt, epsilon=arch.epsilon, name="tokenize"
    )(x)
    x = PositionEmbedding(name="position")(x)
    for i in range(arch.depth):
        x = transformer_block(x, arch, name=f"block{i}")
    x = layers.LayerNormalization(epsilon=arch.epsilon, name="head_norm")(x)
    x = layers.Flatten(name="flatten")(x)
    x = Dropout(arch.head_dropout, name="head_dropout")(x)
    x = MLP(list(arch.head_units), dropout=arch.head_dropout, name="head_mlp")(x)
    outputs = layers.Dense(num_classes, dtype="float32", name="logits")(x)
    name = "vit_lsa" if arch.lsa else "vit"
    return keras.Model(inputs, outputs, name=name)
