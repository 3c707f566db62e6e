"""AutoAugment's policies (Cubuk et al. 2019, "AutoAugment: Learning Augmentation Strategies
from Data") as data: each op's magnitude scale and the sub-policies of a search.

`cifar10` is the policy found on reduced CIFAR-10: 25 sub-policies, each two ops with (the
probability of applying it, a magnitude 0-9), one sub-policy drawn per image. The list and the
scales are those of the SPT/LSA paper's code (aanna0701/SPT_LSA_ViT, utils/autoaug.py, after
DeepVoltaire/AutoAugment), which torchvision's `AutoAugmentPolicy.CIFAR10` lists alike: a
magnitude m gives the level low + (high - low) * m / 9 (the code's np.linspace(low, high, 10)).
Shear, translation and the four enhancements take a random sign per application (the
enhancements' factor is 1 +- level: 0.1-1.9); the code's Rotate does not (it turns
anticlockwise only; after the horizontal flip both ways are alike up to a mirror).
`toolkit/data/autoaugment.py` applies a policy in keras.ops, `autoaugment_reference.py` in NumPy.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Op:
    """One op: the family of ops computing it (`autoaugment.FAMILIES`), its level at magnitude
    0 and 9, whether a random sign multiplies the level, whether the level is a whole number
    (rounded, as the code's posterize bits) and what the level is added to (the enhancements'
    factor is 1 + level)."""

    name: str
    family: str
    low: float = 0.0
    high: float = 0.0
    signed: bool = False
    whole: bool = False
    offset: float = 0.0

    def level(self, magnitude: int) -> float:
        """The level at `magnitude` 0-9 (the code's np.linspace(low, high, 10)[magnitude])."""
        value = self.low + (self.high - self.low) * magnitude / 9
        return float(round(value)) if self.whole else value

    def value(self, magnitude: int, negative: bool = False) -> float:
        """What the op takes at `magnitude`, its sign negative or not (computed in doubles,
        as the code does, before any cast to float32)."""
        sign = -1.0 if negative and self.signed else 1.0
        return self.offset + sign * self.level(magnitude)


# every op the policies use; an op's index here is its id in the keras.ops implementation
OPS: tuple[Op, ...] = (
    Op("shearX", "affine", 0.0, 0.3, signed=True),  # PIL: x + level * y, bicubic
    Op("shearY", "affine", 0.0, 0.3, signed=True),
    Op("translateX", "affine", 0.0, 150 / 331, signed=True),  # a share of the width, nearest
    Op("translateY", "affine", 0.0, 150 / 331, signed=True),
    Op("rotate", "affine", 0.0, 30.0),  # degrees anticlockwise about the centre, nearest
    Op("color", "blend", 0.0, 0.9, signed=True, offset=1.0),  # ImageEnhance factor 1 +- level
    Op("contrast", "blend", 0.0, 0.9, signed=True, offset=1.0),
    Op("brightness", "blend", 0.0, 0.9, signed=True, offset=1.0),
    Op("sharpness", "blend", 0.0, 0.9, signed=True, offset=1.0),
    Op("posterize", "point", 8.0, 4.0, whole=True),  # bits kept
    Op("solarize", "point", 256.0, 0.0),  # pixels at or above the level inverted
    Op("invert", "point"),
    Op("autocontrast", "autocontrast"),
    Op("equalize", "equalize"),
)
OP_IDS = {op.name: i for i, op in enumerate(OPS)}

# (probability, op, magnitude) twice per sub-policy
SubPolicy = tuple[tuple[float, str, int], tuple[float, str, int]]

CIFAR10: tuple[SubPolicy, ...] = (
    ((0.1, "invert", 7), (0.2, "contrast", 6)),
    ((0.7, "rotate", 2), (0.3, "translateX", 9)),
    ((0.8, "sharpness", 1), (0.9, "sharpness", 3)),
    ((0.5, "shearY", 8), (0.7, "translateY", 9)),
    ((0.5, "autocontrast", 8), (0.9, "equalize", 2)),
    ((0.2, "shearY", 7), (0.3, "posterize", 7)),
    ((0.4, "color", 3), (0.6, "brightness", 7)),
    ((0.3, "sharpness", 9), (0.7, "brightness", 9)),
    ((0.6, "equalize", 5), (0.5, "equalize", 1)),
    ((0.6, "contrast", 7), (0.6, "sharpness", 5)),
    ((0.7, "color", 7), (0.5, "translateX", 8)),
    ((0.3, "equalize", 7), (0.4, "autocontrast", 8)),
    ((0.4, "translateY", 3), (0.2, "sharpness", 6)),
    ((0.9, "brightness", 6), (0.2, "color", 8)),
    ((0.5, "solarize", 2), (0.0, "invert", 3)),
    ((0.2, "equalize", 0), (0.6, "autocontrast", 0)),
    ((0.2, "equalize", 8), (0.6, "equalize", 4)),
    ((0.9, "color", 9), (0.6, "equalize", 6)),
    ((0.8, "autocontrast", 4), (0.2, "solarize", 8)),
    ((0.1, "brightness", 3), (0.7, "color", 0)),
    ((0.4, "solarize", 5), (0.9, "autocontrast", 3)),
    ((0.9, "translateY", 9), (0.7, "translateY", 9)),
    ((0.9, "autocontrast", 2), (0.8, "solarize", 3)),
    ((0.8, "equalize", 8), (0.1, "invert", 3)),
    ((0.7, "translateY", 9), (0.9, "autocontrast", 1)),
)

# policy name (Augmentation.auto_augment) -> its sub-policies
POLICIES: dict[str, tuple[SubPolicy, ...]] = {"cifar10": CIFAR10}

FILL = 128.0  # what the geometric ops bring in from outside the image (the code's fillcolor)
DRAWS = 5  # uniforms per image: the sub-policy, apply op 1?, apply op 2?, sign 1, sign 2
