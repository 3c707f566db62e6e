"""ShiftViT (Wang et al., AAAI 2022): attention replaced by a zero-parameter partial shift."""

from __future__ import annotations

import keras
import numpy as np
from keras import layers

from toolkit.models.architectures import ShiftViTArch
from toolkit.ops import MLP, DropPath, PartialShift, PatchConv2D


def norm_layer(arch: ShiftViTArch, name: str) -> layers.Layer:
    """The architecture's normalisation: LayerNorm over channels, or BatchNorm per channel
    (momentum 0.9: PyTorch's BatchNorm2d default, as the official code trains it)."""
    if arch.norm == "batch":
        return layers.BatchNormalization(epsilon=arch.epsilon, momentum=0.9, name=name)
    return layers.LayerNormalization(epsilon=arch.epsilon, name=name)


def shift_block(x, arch: ShiftViTArch, drop_path: float, name: str):
    """x <- shift(x); x <- x + DropPath(MLP(norm(x))): the block of the official code."""
    x = PartialShift(arch.num_div, arch.shift_pixel, name=f"{name}_shift")(x)
    channels = x.shape[-1]
    y = norm_layer(arch, f"{name}_norm")(x)
    y = MLP(
        [int(arch.mlp_ratio * channels), channels],
        dropout=arch.dropout,
        activate_last=False,
        activation=arch.activation,
        name=f"{name}_mlp",
    )(y)
    if drop_path > 0:
        y = DropPath(drop_path, name=f"{name}_drop_path")(y)
    return layers.Add(name=f"{name}_add")([x, y])


def build_shiftvit(
    arch: ShiftViTArch, input_shape: tuple[int, int, int], num_classes: int, **_: object
) -> keras.Model:
    """Functional ShiftViT taking 0-255 RGB at the dataset's resolution, returning logits."""
    inputs = keras.Input(shape=input_shape, name="image")
    x = layers.Rescaling(1.0 / 255, name="rescale")(inputs)
    if tuple(input_shape[:2]) != (arch.image_size, arch.image_size):
        x = layers.Resizing(arch.image_size, arch.image_size, name="resize")(
            x,
            training=False,  # its default (True) would switch on Dropout/DropPath downstream
        )
    x = PatchConv2D(arch.dim, arch.patch_size, padding="same", name="patch_embed")(x)
    rates = np.linspace(0.0, arch.drop_path, sum(arch.depths))
    block = 0
    for stage, depth in enumerate(arch.depths):
        for i in range(depth):
            x = shift_block(x, arch, float(rates[block]), name=f"stage{stage}_block{i}")
            block += 1
        if stage < len(arch.depths) - 1:
            x = norm_layer(arch, f"stage{stage}_merge_norm")(x)
            x = PatchConv2D(
                2 * x.shape[-1],
                2,
                padding="same",
                use_bias=False,
                name=f"stage{stage}_merge",
            )(x)
    x = norm_layer(arch, "head_norm")(x)
    x = layers.GlobalAveragePooling2D(name="pool")(x)
    outputs = layers.Dense(num_classes, dtype="float32", name="logits")(x)
    return keras.Model(inputs, outputs, name="shiftvit")


def at_resolution(model: keras.Model, size: int) -> keras.Model:
    """`model` (built by `build_shiftvit`) training at `size` x `size`: the same layers and
    weights behind a resize to `size` (in place of the model's own resize, if any). A shift
    block has no position embedding, so its weights hold at any resolution (progressive
    resizing, toolkit.training.resolution). Bilinear: XLA compiles no antialiasing."""
    resize = layers.Resizing(size, size, name=f"resize_{size}")

    def call(layer: layers.Layer, *args, **kwargs):
        if layer.name == "resize":  # the model's own resize to its image size: ours instead
            return args[0]
        outputs = layer(*args, **kwargs)
        return resize(outputs, training=False) if layer.name == "rescale" else outputs

    inputs = keras.Input(model.input_shape[1:], name="image")
    return keras.models.clone_model(
        model,
        input_tensors=inputs,
        clone_function=lambda layer: layer,  # shared, not copied: one set of weights
        call_function=call,
    )
