"""ViT for small datasets (Lee et al. 2021): Shifted Patch Tokenization + Locality Self-Attention.

With `spt=False, lsa=False` it is the vanilla ViT of the paper's ablation. The default
architecture is the keras.io example's; `head="class_token"` and the other fields after `lsa`
give the paper's own code's (ViTArch).
"""

from __future__ import annotations

from dataclasses import fields

import keras
import numpy as np
from keras import layers

from toolkit.models.architectures import ViTArch
from toolkit.models.class_token import ClassToken, ClassTokenReadout
from toolkit.models.position import PositionEmbedding
from toolkit.ops import (
    MLP,
    Dropout,
    DropPath,
    LocalitySelfAttention,
    SelfAttention,
    ShiftedPatchTokenization,
)

HEADS = next(f for f in fields(ViTArch) if f.name == "head").metadata["choices"]


def _residual(x, y, arch: ViTArch, name: str, branch: int):
    """x + y, the branch y through stochastic depth when the arch has it."""
    if arch.drop_path > 0:
        y = DropPath(arch.drop_path, name=f"{name}_drop_path{branch}")(y)
    return layers.Add(name=f"{name}_add{branch}")([y, x])


def transformer_block(x, arch: ViTArch, name: str):
    """Pre-norm block: x + Attn(LN(x)), then + MLP(LN(.))."""
    if arch.lsa:
        attention = LocalitySelfAttention(
            arch.num_heads,
            arch.key_dim,
            dropout=arch.dropout,
            qkv_bias=arch.qkv_bias,
            temperature=arch.lsa_temperature,
            name=f"{name}_attn",
        )
    else:
        attention = SelfAttention(
            arch.num_heads,
            arch.key_dim,
            dropout=arch.dropout,
            qkv_bias=arch.qkv_bias,
            name=f"{name}_attn",
        )
    y = layers.LayerNormalization(epsilon=arch.epsilon, name=f"{name}_norm1")(x)
    x = _residual(x, attention(y), arch, name, 1)
    y = layers.LayerNormalization(epsilon=arch.epsilon, name=f"{name}_norm2")(x)
    y = MLP(
        list(arch.mlp_units),
        dropout=arch.dropout,
        activate_last=arch.mlp_activate_last,
        name=f"{name}_mlp",
    )(y)
    return _residual(x, y, arch, name, 2)


def build_vit(
    arch: ViTArch,
    input_shape: tuple[int, int, int],
    num_classes: int,
    norm_stats: tuple[np.ndarray, np.ndarray] | None = None,
    **_: object,
) -> keras.Model:
    """Functional ViT taking 0-255 RGB; normalization (mean, variance per channel) is inside."""
    if arch.head not in HEADS:
        raise ValueError(f"ViTArch.head {arch.head!r}: one of {', '.join(HEADS)}")
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
    if arch.head == "class_token":
        x = ClassToken(name="class_token")(x)
    x = PositionEmbedding(name="position")(x)
    for i in range(arch.depth):
        x = transformer_block(x, arch, name=f"block{i}")
    if arch.head == "class_token":  # the paper's code: LayerNorm + Linear on the class token
        x = ClassTokenReadout(name="readout")(x)
        x = layers.LayerNormalization(epsilon=arch.epsilon, name="head_norm")(x)
    else:  # keras.io: every token, flattened, through an MLP
        x = layers.LayerNormalization(epsilon=arch.epsilon, name="head_norm")(x)
        x = layers.Flatten(name="flatten")(x)
        x = Dropout(arch.head_dropout, name="head_dropout")(x)
        x = MLP(list(arch.head_units), dropout=arch.head_dropout, name="head_mlp")(x)
    outputs = layers.Dense(num_classes, dtype="float32", name="logits")(x)
    name = "vit_lsa" if arch.lsa else "vit"
    return keras.Model(inputs, outputs, name=name)
