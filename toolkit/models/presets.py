"""Presets are data: one architecture and one training recipe per (model, preset) pair.

`seed` keeps the keras.io examples' hyperparameters exactly; `small` and `tiny` shrink them
for quick experiments and tests on a CPU.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from toolkit.data.augment import Augmentation
from toolkit.errors import UsageError


@dataclass(frozen=True)
class ShiftViTArch:
    """ShiftViT (Wang et al. 2022): patch conv, stages of shift blocks, patch merging, head."""

    image_size: int = 48
    patch_size: int = 4
    dim: int = 96
    depths: tuple[int, ...] = (2, 4, 8, 2)
    num_div: int = 12
    shift_pixel: int = 1
    mlp_ratio: float = 2.0
    epsilon: float = 1e-5
    drop_path: float = 0.2
    dropout: float = 0.2


@dataclass(frozen=True)
class ViTArch:
    """ViT for small datasets (Lee et al. 2021); spt/lsa off gives the vanilla ablation."""

    image_size: int = 72
    patch_size: int = 6
    dim: int = 64
    depth: int = 8
    num_heads: int = 4
    key_dim: int = 64
    mlp_units: tuple[int, ...] = (128, 64)
    dropout: float = 0.1
    head_units: tuple[int, ...] = (2048, 1024)
    head_dropout: float = 0.5
    epsilon: float = 1e-6
    spt: bool = True
    lsa: bool = True


@dataclass(frozen=True)
class TrainRecipe:
    """Optimiser, schedule, augmentation and stopping rule of a preset."""

    batch_size: int
    epochs: int
    lr_start: float
    lr_max: float
    weight_decay: float
    warmup_fraction: float
    augmentation: Augmentation = field(default_factory=Augmentation)
    early_stopping_patience: int | None = None


@dataclass(frozen=True)
class Preset:
    """A named architecture plus training recipe for one model."""

    model: str
    name: str
    arch: ShiftViTArch | ViTArch
    train: TrainRecipe

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "name": self.name,
            "arch": asdict(self.arch),
            "train": {**asdict(self.train), "augmentation": self.train.augmentation.to_dict()},
        }


_SHIFTVIT_SEED_TRAIN = TrainRecipe(
    batch_size=256,
    epochs=100,
    lr_start=1e-5,
    lr_max=1e-3,
    weight_decay=1e-4,
    warmup_fraction=0.15,
    augmentation=Augmentation(flip=True, crop_resize=(52, 48)),
    early_stopping_patience=5,
)
_VIT_SEED_TRAIN = TrainRecipe(
    batch_size=256,
    epochs=50,
    lr_start=0.0,
    lr_max=1e-3,
    weight_decay=1e-4,
    warmup_fraction=0.10,
    augmentation=Augmentation(flip=True, rotation=0.02, zoom=0.2),
)
_SHIFTVIT = {
    "seed": (ShiftViTArch(), _SHIFTVIT_SEED_TRAIN),
    "small": (
        ShiftViTArch(image_size=32, dim=48, depths=(1, 2, 4, 1), drop_path=0.1, dropout=0.1),
        replace(_SHIFTVIT_SEED_TRAIN, batch_size=128, epochs=30, lr_max=2e-3),
    ),
    "tiny": (
        ShiftViTArch(image_size=32, dim=32, depths=(1, 1, 2, 1), drop_path=0.0, dropout=0.0),
        replace(
            _SHIFTVIT_SEED_TRAIN,
            batch_size=64,
            epochs=5,
            lr_max=3e-3,
            warmup_fraction=0.1,
            augmentation=Augmentation(flip=True),
            early_stopping_patience=None,
        ),
    ),
    # `toolkit train --model shiftvit --preset cpu60 --data folder:CIFAR10 --jit` on 2 CPU cores:
    # 80.0% test top-1 on CIFAR-10 (JPEG q75 copy) in 58 min (records/notes/accuracy.md)
    "cpu60": (
        ShiftViTArch(image_size=32, dim=48, depths=(2, 2, 4, 2), drop_path=0.2, dropout=0.1),
        replace(
            _SHIFTVIT_SEED_TRAIN,
            batch_size=128,
            epochs=100,
            lr_max=2e-3,
            weight_decay=0.05,
            augmentation=Augmentation(flip=True, crop_resize=(36, 32), erasing=0.5),
            early_stopping_patience=None,
        ),
    ),
}
_VIT = {
    "seed": (ViTArch(), _VIT_SEED_TRAIN),
    "small": (
        ViTArch(
            image_size=32,
            patch_size=4,
            dim=48,
            depth=4,
            num_heads=4,
            key_dim=24,
            mlp_units=(96, 48),
            head_units=(256,),
            head_dropout=0.3,
        ),
        replace(_VIT_SEED_TRAIN, batch_size=128, epochs=30),
    ),
    "tiny": (
        ViTArch(
            image_size=32,
            patch_size=4,
            dim=48,
            depth=2,
            num_heads=2,
            key_dim=24,
            mlp_units=(96, 48),
            dropout=0.0,
            head_units=(128,),
            head_dropout=0.1,
        ),
        replace(
            _VIT_SEED_TRAIN,
            batch_size=64,
            epochs=5,
            lr_max=2e-3,
            augmentation=Augmentation(flip=True),
        ),
    ),
    # `toolkit train --model vit-lsa --preset cpu60 --data folder:CIFAR10 --jit` on 2 CPU cores:
    # 77.7% test top-1 on CIFAR-10 (JPEG q75 copy) in 62 min (records/notes/accuracy.md);
    # `--model vit` (no SPT, no LSA), same preset: 76.0% in 55 min
    "cpu60": (
        ViTArch(
            image_size=32,
            patch_size=4,
            dim=64,
            depth=4,
            num_heads=4,
            key_dim=16,
            mlp_units=(128, 64),
            dropout=0.1,
            head_units=(256,),
            head_dropout=0.3,
        ),
        replace(_VIT_SEED_TRAIN, batch_size=128, epochs=46, lr_max=2e-3),
    ),
}


def _vit_variant(presets: dict, spt: bool, lsa: bool) -> dict:
    return {name: (replace(arch, spt=spt, lsa=lsa), tr) for name, (arch, tr) in presets.items()}


# what each preset name is for (the README's presets table)
PRESET_PURPOSES = {
    "seed": "the keras.io example's hyperparameters: the results to compare",
    "small": "quick experiments on a CPU",
    "tiny": "tests and `toolkit demo`: minutes on a CPU",
    "cpu60": "the most accuracy from 60 minutes of training on 2 CPU cores",
}

PRESETS: dict[str, dict[str, tuple[ShiftViTArch | ViTArch, TrainRecipe]]] = {
    "shiftvit": _SHIFTVIT,
    "vit-lsa": _vit_variant(_VIT, spt=True, lsa=True),
    "vit": _vit_variant(_VIT, spt=False, lsa=False),
}


def get_preset(model: str, name: str) -> Preset:
    """The preset `name` of `model`; UsageError naming the valid choices otherwise."""
    if model not in PRESETS:
        raise UsageError(f"unknown model '{model}': choose one of {', '.join(PRESETS)}")
    if name not in PRESETS[model]:
        raise UsageError(
            f"unknown preset '{name}' for {model}: choose one of {', '.join(PRESETS[model])}"
        )
    arch, train = PRESETS[model][name]
    return Preset(model=model, name=name, arch=arch, train=train)


def preset_from_dict(data: dict) -> Preset:
    """Rebuild a Preset written by `Preset.to_dict` (the run folder's config.json)."""
    arch_cls = ShiftViTArch if data["model"] == "shiftvit" else ViTArch
    arch = arch_cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data["arch"].items()})
    train = dict(data["train"])
    train["augmentation"] = Augmentation.from_dict(train["augmentation"])
    return Preset(model=data["model"], name=data["name"], arch=arch, train=TrainRecipe(**train))
