"""What the training augmentation applies (horizontal flip, resize + random crop, padded random
crop, rotation, zoom, AutoAugment, random erasing); `tf_augment` (tf.data) and
`random_augment` (a Keras layer) apply it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from toolkit.data.autoaugment_policies import POLICIES

# what random erasing fills its box with (Augmentation.erasing_fill; toolkit/data/erasing.py):
# uniform noise 0-255 (torchvision's and timm's random value), or the mean pixel (the SPT/LSA
# paper's code fills the per-channel mean; here the batch's mean pixel before augmentation)
ERASING_FILLS = ("noise", "mean")


@dataclass(frozen=True)
class Augmentation:
    """What to apply; crop_resize=(52, 48) means Resizing(52) + RandomCrop(48) scaled to R;
    pad_crop=4 zero-pads 4 pixels per side, then crops back at random (torchvision's
    RandomCrop(R, padding=4), the CIFAR recipes' crop: it shifts without rescaling);
    erasing is the probability of random erasing per image (toolkit/data/erasing.py), and
    erasing_fill what the erased box holds (one of ERASING_FILLS); auto_augment names an AutoAugment
    policy (a key of POLICIES: toolkit/data/autoaugment.py), applied after the crops, rotation
    and zoom and before erasing, as the SPT/LSA paper's code orders them."""

    flip: bool = False
    crop_resize: tuple[int, int] | None = None
    rotation: float = 0.0
    zoom: float = 0.0
    erasing: float = 0.0
    pad_crop: int = 0
    auto_augment: str | None = field(default=None, metadata={"choices": tuple(POLICIES)})
    erasing_fill: str = field(default="noise", metadata={"choices": ERASING_FILLS})

    def to_dict(self) -> dict:
        """JSON-ready dict (crop_resize as a list or None)."""
        data = asdict(self)
        data["crop_resize"] = list(self.crop_resize) if self.crop_resize else None
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Augmentation:
        """Inverse of `to_dict`."""
        crop = data.get("crop_resize")
        return cls(
            flip=bool(data.get("flip", False)),
            crop_resize=(int(crop[0]), int(crop[1])) if crop else None,
            rotation=float(data.get("rotation", 0.0)),
            zoom=float(data.get("zoom", 0.0)),
            erasing=float(data.get("erasing", 0.0)),
            pad_crop=int(data.get("pad_crop", 0)),
            # run folders written before these pieces: off, noise (what they trained with)
            auto_augment=data.get("auto_augment"),
            erasing_fill=str(data.get("erasing_fill", "noise")),
        )

    @property
    def active(self) -> bool:
        """Whether any transform is enabled."""
        return (
            self.flip
            or bool(self.crop_resize)
            or self.rotation > 0
            or self.zoom > 0
            or self.erasing > 0
            or self.pad_crop > 0
            or self.auto_augment is not None
        )


def crop_size(aug: Augmentation, image_size: int) -> int:
    """The size images are resized to before the random image_size crop (0: no crop)."""
    if not aug.crop_resize:
        return 0
    return round(image_size * aug.crop_resize[0] / aug.crop_resize[1])
