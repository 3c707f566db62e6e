"""OP_CASES: each verified op (or whole block) with its Keras builder, NumPy reference and shapes.

Every case builds a one-op Keras model on a generic float input (batch dimension free),
with seeded random weights (biases and LayerNorm offsets included, so no term is zero), and
computes the expected output in float64 NumPy from the definition, using the built layer's
actual weights. The `full` shape set holds the seed presets' shapes and small odd ones; the
`quick` set only small odd ones, for tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import keras
import numpy as np

from toolkit.models.architectures import ShiftViTArch, ViTArch
from toolkit.models.shiftvit import shift_block
from toolkit.models.vit import transformer_block
from toolkit.ops import (
    LocalitySelfAttention,
    PartialShift,
    ShiftedPatchTokenization,
    reference_shifted_patches,
)
from toolkit.verify.ops import OP_NAMES
from toolkit.verify.ops import reference as ref
from toolkit.verify.ops.spt_step import ShiftedPatches
from toolkit.verify.rules import OP_RULES, Rule

Params = Mapping[str, object]
LayerClass = Callable[..., keras.layers.Layer]
INPUT_CLIP = 4.0  # inputs are N(0, 1) clipped to +-4: calibration covers every test value
SHIFT, SHIFTED_PATCHES, SPT, LSA, SHIFTVIT_BLOCK, VIT_BLOCK = OP_NAMES


@dataclass(frozen=True)
class OpCase:
    """One verified op: how to build it, its float64 reference, tolerance rules and shapes."""

    name: str
    description: str
    fp32_rule: str  # key of rules.OP_RULES: its float32 cells' rule
    int8_rule: str  # key of rules.OP_RULES: its int8 cells' rule
    input_shape: Callable[[Params], tuple[int, ...]]
    build: Callable[[Params, LayerClass | None], keras.Layer | Callable]  # params, override
    reference: Callable[[keras.Model, Params, np.ndarray], np.ndarray]
    label: Callable[[Params], str]
    shapes: Mapping[str, tuple[Params, ...]]
    default_layer: LayerClass | None = None  # what an override replaces; None: not overridable

    def rule(self, precision: str) -> Rule:
        """The rule its cells of `precision` (fp32 or int8) are judged by."""
        return OP_RULES[{"fp32": self.fp32_rule, "int8": self.int8_rule}[precision]]


def case_model(case: OpCase, params: Params, override: LayerClass | None, seed: int) -> keras.Model:
    """A functional model input `x` -> the op, with seeded random weights."""
    keras.utils.set_random_seed(seed)
    x = keras.Input(shape=case.input_shape(params), name="x")
    model = keras.Model(x, case.build(params, override)(x), name=case.name.replace("-", "_"))
    randomize_weights(model, np.random.default_rng(seed))
    return model


def randomize_weights(model: keras.Model, rng: np.random.Generator) -> None:
    """Kernels N(0, 1/fan_in); gamma 1 + N(0, 0.1^2); LSA's tau or scale x U(0.8, 1.2); others
    N(0, 0.1^2)."""
    for w in model.weights:
        name, shape = w.path.split("/")[-1], tuple(w.shape)
        if name == "kernel":
            value = rng.standard_normal(shape) / np.sqrt(np.prod(shape[:-1]))
        elif name == "gamma":
            value = 1.0 + 0.1 * rng.standard_normal(shape)
        elif name in ("tau", "scale"):  # LSA's temperature: shared or per head
            value = np.asarray(w.numpy()) * rng.uniform(0.8, 1.2)
        else:
            value = 0.1 * rng.standard_normal(shape)
        w.assign(np.asarray(value, np.float32))


def case_inputs(shape: tuple[int, ...], count: int, seed: int) -> np.ndarray:
    """`count` float32 samples N(0, 1) clipped to +-INPUT_CLIP (the ops' typical activations)."""
    x = np.random.default_rng(seed).standard_normal((count, *shape))
    return np.clip(x, -INPUT_CLIP, INPUT_CLIP).astype(np.float32)


def _layer(model: keras.Model, name: str) -> keras.Layer:
    return model.get_layer(name)


# -- shift --


def _shift_build(p: Params, override: LayerClass | None) -> keras.Layer:
    return (override or PartialShift)(p["num_div"], p["shift_pixel"], name="op")


def _shift_reference(model: keras.Model, p: Params, x: np.ndarray) -> np.ndarray:
    return ref.shift(x, p["num_div"], p["shift_pixel"])


def _hwc(p: Params) -> tuple[int, int, int]:
    return (p["h"], p["w"], p["c"])


def _shift(h: int, w: int, c: int) -> dict:
    return {"h": h, "w": w, "c": c, "num_div": 12, "shift_pixel": 1}


# -- shifted patches and SPT --


def _patches_build(p: Params, override: LayerClass | None) -> keras.Layer:
    return (override or ShiftedPatches)(p["patch"], name="op")


def _patches_reference(model: keras.Model, p: Params, x: np.ndarray) -> np.ndarray:
    return reference_shifted_patches(np.asarray(x, np.float64), p["patch"])


def _spt_build(p: Params, override: LayerClass | None) -> keras.Layer:
    return (override or ShiftedPatchTokenization)(p["patch"], p["dim"], name="op")


def _spt_reference(model: keras.Model, p: Params, x: np.ndarray) -> np.ndarray:
    layer = _layer(model, "op")
    tokens = reference_shifted_patches(np.asarray(x, np.float64), p["patch"])
    return ref.dense(ref.layer_norm(tokens, layer.layer_norm), layer.projection)


def _image_label(p: Params) -> str:
    text = f"{p['h']}x{p['w']}x{p['c']}"
    return text + "".join(f" {k[0]}{p[k]}" for k in ("patch", "dim") if k in p)


# -- LSA --


def _lsa_build(p: Params, override: LayerClass | None) -> keras.Layer:
    return (override or LocalitySelfAttention)(p["heads"], p["key_dim"], name="op")


def _lsa_reference(model: keras.Model, p: Params, x: np.ndarray) -> np.ndarray:
    return ref.attention(np.asarray(x, np.float64), _layer(model, "op"))


def _tokens(p: Params) -> tuple[int, int]:
    return (p["t"], p["dim"])


def _token_label(p: Params) -> str:
    return f"T{p['t']} D{p['dim']} h{p['heads']} k{p['key_dim']}"


def _lsa(t: int, dim: int, heads: int, key_dim: int) -> dict:
    return {"t": t, "dim": dim, "heads": heads, "key_dim": key_dim}


# -- whole blocks, built by the models' own code --

_SHIFTVIT_ARCH = ShiftViTArch(drop_path=0.0, dropout=0.0)
_VIT_ARCH = ViTArch(dropout=0.0, spt=True, lsa=True)


def _shift_block_build(p: Params, override: LayerClass | None) -> Callable:
    arch = replace(_SHIFTVIT_ARCH, dim=p["c"])
    return lambda x: shift_block(x, arch, 0.0, name="block")


def _shift_block_reference(model: keras.Model, p: Params, x: np.ndarray) -> np.ndarray:
    x = ref.shift(x, _SHIFTVIT_ARCH.num_div, _SHIFTVIT_ARCH.shift_pixel)
    y = ref.layer_norm(x, _layer(model, "block_norm"))
    return x + ref.mlp(y, _layer(model, "block_mlp"))


def _vit_block_build(p: Params, override: LayerClass | None) -> Callable:
    arch = replace(
        _VIT_ARCH,
        dim=p["dim"],
        num_heads=p["heads"],
        key_dim=p["key_dim"],
        mlp_units=(2 * p["dim"], p["dim"]),
    )
    return lambda x: transformer_block(x, arch, name="block")


def _vit_block_reference(model: keras.Model, p: Params, x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float64)
    x = x + ref.attention(
        ref.layer_norm(x, _layer(model, "block_norm1")), _layer(model, "block_attn")
    )
    return x + ref.mlp(ref.layer_norm(x, _layer(model, "block_norm2")), _layer(model, "block_mlp"))


# Token shapes shared by LSA and the ViT block: the seed and tiny presets, and an odd one.
_ATTENTION_SHAPES = {
    "full": (
        _lsa(144, 64, 4, 64),  # seed
        _lsa(64, 48, 2, 24),  # tiny
        _lsa(7, 10, 3, 5),  # odd
    ),
    "quick": (_lsa(7, 10, 3, 5),),
}

OP_CASES: dict[str, OpCase] = {
    c.name: c
    for c in (
        OpCase(
            SHIFT,
            "PartialShift (ShiftViT): four channel groups move by shift_pixel",
            "exact",
            "movement",
            _hwc,
            _shift_build,
            _shift_reference,
            _image_label,
            {
                "full": (
                    _shift(12, 12, 96),  # seed stage 1
                    _shift(6, 6, 192),  # seed stage 2
                    _shift(3, 3, 384),  # seed stage 3
                    _shift(2, 2, 768),  # seed stage 4
                    _shift(8, 8, 32),  # tiny stage 1
                    _shift(5, 7, 26),  # odd: C % 12 != 0, H != W
                    _shift(1, 3, 13),  # odd: shift >= H, only the zero fill
                ),
                "quick": (_shift(5, 7, 26), _shift(1, 3, 13)),
            },
            PartialShift,
        ),
        OpCase(
            SHIFTED_PATCHES,
            "shifted_patches (SPT, parameter-free part): 5 shifted copies cut into patches",
            "exact",
            "movement",
            _hwc,
            _patches_build,
            _patches_reference,
            _image_label,
            {
                "full": (
                    {"h": 72, "w": 72, "c": 3, "patch": 6},  # seed
                    {"h": 32, "w": 32, "c": 3, "patch": 4},  # tiny / small
                    {"h": 9, "w": 15, "c": 2, "patch": 3},  # odd patch, H != W
                ),
                "quick": ({"h": 9, "w": 15, "c": 2, "patch": 3},),
            },
            ShiftedPatches,
        ),
        OpCase(
            SPT,
            "ShiftedPatchTokenization: shifted patches -> LayerNorm -> Dense",
            "atol",
            "arithmetic",
            _hwc,
            _spt_build,
            _spt_reference,
            _image_label,
            {
                "full": (
                    {"h": 72, "w": 72, "c": 3, "patch": 6, "dim": 64},  # seed
                    {"h": 32, "w": 32, "c": 3, "patch": 4, "dim": 48},  # tiny / small
                    {"h": 9, "w": 15, "c": 2, "patch": 3, "dim": 10},  # odd
                ),
                "quick": ({"h": 9, "w": 15, "c": 2, "patch": 3, "dim": 10},),
            },
            ShiftedPatchTokenization,
        ),
        OpCase(
            LSA,
            "LocalitySelfAttention: learned temperature, diagonal masked",
            "atol",
            "arithmetic",
            _tokens,
            _lsa_build,
            _lsa_reference,
            _token_label,
            _ATTENTION_SHAPES,
            LocalitySelfAttention,
        ),
        OpCase(
            SHIFTVIT_BLOCK,
            "ShiftViT block: shift, LayerNorm, MLP(2C, C), residual add",
            "block",
            "arithmetic",
            _hwc,
            _shift_block_build,
            _shift_block_reference,
            _image_label,
            {
                "full": (
                    {"h": 12, "w": 12, "c": 96},  # seed stage 1
                    {"h": 2, "w": 2, "c": 768},  # seed stage 4
                    {"h": 5, "w": 7, "c": 26},  # odd
                ),
                "quick": ({"h": 5, "w": 7, "c": 26},),
            },
        ),
        OpCase(
            VIT_BLOCK,
            "ViT block: LayerNorm, LSA, add, LayerNorm, MLP(2D, D), add",
            "block",
            "arithmetic",
            _tokens,
            _vit_block_build,
            _vit_block_reference,
            _token_label,
            _ATTENTION_SHAPES,
        ),
    )
}
