"""Custom Keras 3 ops; importing this package registers them for safe_mode loading."""

from toolkit.ops.attention import (
    AdditiveMaskLocalitySelfAttention,
    LocalitySelfAttention,
    SelfAttention,
    additive_diagonal_softmax,
    mask_diagonal_softmax,
    reference_self_attention,
)
from toolkit.ops.dropout import Dropout
from toolkit.ops.droppath import DropPath
from toolkit.ops.gelu import gelu
from toolkit.ops.layer_norm import CenteredLayerNorm, reference_layer_norm
from toolkit.ops.mlp import MLP
from toolkit.ops.patch_conv import PatchConv2D, reference_patch_conv
from toolkit.ops.patches import (
    ShiftedPatchTokenization,
    patches,
    reference_shifted_patches,
    shifted_images,
    shifted_patches,
)
from toolkit.ops.shift import DepthwisePartialShift, PartialShift, reference_partial_shift

__all__ = [
    "AdditiveMaskLocalitySelfAttention",
    "CenteredLayerNorm",
    "DepthwisePartialShift",
    "MLP",
    "DropPath",
    "Dropout",
    "LocalitySelfAttention",
    "PartialShift",
    "PatchConv2D",
    "SelfAttention",
    "ShiftedPatchTokenization",
    "additive_diagonal_softmax",
    "gelu",
    "mask_diagonal_softmax",
    "patches",
    "reference_layer_norm",
    "reference_partial_shift",
    "reference_patch_conv",
    "reference_self_attention",
    "reference_shifted_patches",
    "shifted_images",
    "shifted_patches",
]
