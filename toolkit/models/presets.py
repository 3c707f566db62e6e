"""Presets are data: one architecture and one training recipe per (model, preset) pair.

`seed` keeps the keras.io examples' hyperparameters exactly; `small` and `tiny` shrink them
for quick experiments and tests on a CPU; `cpu60` is tuned for an hour on 2 CPU cores.
`shift-t-light`, `shift-t`, `shift-s` and `shift-b` are the ImageNet-1k models of the ShiftViT
paper (Wang et al., AAAI 2022) as the official code builds them (microsoft/SPACH,
models/registry.py), with as much of the paper's training recipe as the toolkit implements:
see `_PAPER_TRAIN`. `paper-cifar` is the SPT/LSA paper's CIFAR-10 ViT (Lee et al. 2021) as its
code builds and trains it (aanna0701/SPT_LSA_ViT), and a ShiftViT of as many MACs trained
the same way: see `_PAPER_CIFAR_TRAIN`.
"""

from __future__ import annotations

import typing
from dataclasses import MISSING, Field, asdict, dataclass, field, fields, replace

from toolkit.argtypes import comma_items, finite_number
from toolkit.data.augment import Augmentation
from toolkit.data.mixing import CUTMIX_ALPHAS
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


# metadata of an architecture field added after counts were first shipped: at its default the
# field is left out of the architecture's fingerprint (toolkit.models.counts), so presets that
# leave it unchanged keep theirs
ADDED_FIELD = {"fingerprint": "omit at default"}


@dataclass(frozen=True)
class ViTArch:
    """ViT for small datasets (Lee et al. 2021); spt/lsa off gives the vanilla ablation.

    The defaults are the keras.io example's; the fields after `lsa` are where the paper's own
    code (aanna0701/SPT_LSA_ViT, models/vit.py) builds otherwise: `head="class_token"` prepends
    a learned class token (before the position embedding) and classifies it with LayerNorm +
    Dense, where the keras.io head flattens every token into an MLP (`head_units`,
    `head_dropout`: the flatten head's only); `drop_path` is stochastic depth on both residual
    branches of every block, the same rate in each (the paper's code; ShiftViT's rises
    linearly); `mlp_activate_last=False` leaves GELU off the block MLP's last Dense; without
    `qkv_bias` the query, key and value projections have no bias; `lsa_temperature="per_head"`
    learns one scale per head multiplying the scores (init key_dim ** -0.5), where "shared" is
    keras.io's one temperature per block dividing them.
    """

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
    head: str = field(
        default="flatten", metadata={**ADDED_FIELD, "choices": ("flatten", "class_token")}
    )
    drop_path: float = field(default=0.0, metadata=ADDED_FIELD)
    mlp_activate_last: bool = field(default=True, metadata=ADDED_FIELD)
    qkv_bias: bool = field(default=True, metadata=ADDED_FIELD)
    lsa_temperature: str = field(
        default="shared", metadata={**ADDED_FIELD, "choices": ("shared", "per_head")}
    )


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
    # the share of the non-test images held out for validation where the data has no val split
    # of its own (`toolkit.data.specs.load_data`); None: the data's (80/10/10, 20% of train/)
    val_fraction: float | None = None
    # the pieces below are off by default: `toolkit train --recipe KEY=VALUE` switches them on
    label_smoothing: float = 0.0  # Keras' categorical cross-entropy label_smoothing
    ema: float | None = None  # momentum of the weights' moving average (AdamW use_ema)
    mixup: float = 0.0  # Mixup's Beta alpha (keras.layers.MixUp), 0: off
    cutmix: float = 0.0  # CutMix's factor (keras.layers.CutMix: Beta alpha from U(0, factor))
    mix_prob: float = 1.0  # the probability a batch is mixed (both on: one of them, half each)
    rand_augment: tuple[int, float] | None = None  # keras.layers.RandAugment (num_ops, factor)
    repeat_augment: int = 1  # each image N times an epoch, differently augmented (1: off)
    # CutMix's Beta alpha: "uniform" from U(0, cutmix) (Keras), "fixed" = cutmix (mixing.py)
    cutmix_alpha: str = field(default="uniform", metadata={"choices": tuple(CUTMIX_ALPHAS)})


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
    # 86.1% test top-1 on CIFAR-10 (JPEG q75 copy) in 51 min (records/notes/accuracy.md).
    # Patch 2 gives 16x16 tokens; dropout is left out because its masks cost more than the MLPs
    # on a CPU (drop path, one draw per image, regularises instead). It over-fitted, so 48,000
    # images train (2,000 validate) where 40,000 did (75 epochs are the 3.6 M images of 90
    # before), drop path rises to 0.2 where it rose to 0.1, and the crop is the CIFAR recipes'
    # (4 pixels of zero padding: shifts at the test images' scale) where a resize to 36 and a
    # crop trained on objects 1.125x larger than the test's: +3.5 points.
    "cpu60": (
        ShiftViTArch(
            image_size=32, patch_size=2, dim=32, depths=(2, 2, 4, 2), drop_path=0.2, dropout=0.0
        ),
        replace(
            _SHIFTVIT_SEED_TRAIN,
            batch_size=128,
            epochs=75,
            val_fraction=0.04,
            lr_max=2e-3,
            weight_decay=0.05,
            augmentation=Augmentation(flip=True, erasing=0.25, pad_crop=4),
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
    # 81.4% test top-1 on CIFAR-10 (JPEG q75 copy) in 54 min (records/notes/accuracy.md). The
    # 4-pixel padded crop regularises enough that head dropout (0.3 before) and drop path (0.1)
    # only slowed it: off, +2.4 points. `--model vit` (no SPT, no LSA) was trained with the
    # earlier recipe only (dropout 0.1, rotation + zoom, 46 epochs): 76.0% against 77.7%
    "cpu60": (
        ViTArch(
            image_size=32,
            patch_size=4,
            dim=64,
            depth=4,
            num_heads=4,
            key_dim=16,
            mlp_units=(128, 64),
            dropout=0.0,
            head_units=(256,),
            head_dropout=0.0,
        ),
        replace(
            _VIT_SEED_TRAIN,
            batch_size=128,
            epochs=65,
            lr_max=2e-3,
            weight_decay=0.05,
            augmentation=Augmentation(flip=True, erasing=0.25, pad_crop=4),
            label_smoothing=0.1,
        ),
    ),
}


# The paper's ImageNet-1k recipe: that of Swin and DeiT, as the official code's main.py sets it
# (microsoft/SPACH: --epochs 300, --lr 5e-4 per 512 images scaled linearly with the global
# batch, --warmup-epochs 20, --warmup-lr 1e-6, --sched cosine, --opt adamw, --weight-decay
# 0.05, --reprob 0.25) at the paper's global batch of 1024 (8 GPUs x 128): lr 1e-3.
# `batch_size` is the global batch: N data-parallel processes take 1024 / N images each.
# Implemented here: AdamW, linear warm-up from 1e-6 over 20 of 300 epochs, cosine decay,
# horizontal flip, random erasing (p = 0.25) and stochastic depth (each preset's drop_path).
# Implemented but off here (TrainRecipe fields, `toolkit train --recipe`): label smoothing
# (0.1), model EMA (decay 0.99996), Mixup (alpha 0.8), CutMix (1.0), RandAugment (Keras' ops,
# not timm's rand-m9-mstd0.5-inc1), repeated augmentation (x3). NOT implemented by the
# toolkit, so NOT part of these presets (training with them does not reproduce the paper's
# accuracy): RandomResizedCrop with bicubic resampling (crop_resize (256, 224), a resize and
# a random 224 crop, stands in for it), the cosine's floor (min lr 1e-5; here it decays to 0)
# and weight decay left off biases and norms (AdamW here decays every weight).
_PAPER_TRAIN = TrainRecipe(
    batch_size=1024,
    epochs=300,
    lr_start=1e-6,
    lr_max=1e-3,
    weight_decay=0.05,
    warmup_fraction=20 / 300,
    augmentation=Augmentation(flip=True, crop_resize=(256, 224), erasing=0.25),
)
# The paper's ImageNet models as the official registry builds them (shiftvit_light_tiny,
# shiftvit_r2_tiny, shiftvit_r2_small, shiftvit_r2_base): patch 4, no dropout, GELU MLPs.
# The official code also normalises the patch embedding's output (a GroupNorm: 2 x dim
# weights this model does not have) and uses GroupNorm(1 group) where this model uses
# LayerNormalization over channels (the same weights, statistics over H, W and C there).
_PAPER_ARCH = ShiftViTArch(image_size=224, patch_size=4, epsilon=1e-5, dropout=0.0)
_SHIFTVIT_PAPER = {
    "shift-t-light": (
        replace(_PAPER_ARCH, dim=96, depths=(2, 2, 6, 2), mlp_ratio=4.0, num_div=12, drop_path=0.2),
        _PAPER_TRAIN,
    ),
    "shift-t": (
        replace(
            _PAPER_ARCH, dim=96, depths=(6, 8, 18, 6), mlp_ratio=2.0, num_div=12, drop_path=0.2
        ),
        _PAPER_TRAIN,
    ),
    "shift-s": (
        replace(
            _PAPER_ARCH, dim=96, depths=(10, 18, 36, 10), mlp_ratio=2.0, num_div=12, drop_path=0.4
        ),
        _PAPER_TRAIN,
    ),
    "shift-b": (
        replace(
            _PAPER_ARCH, dim=128, depths=(10, 18, 36, 10), mlp_ratio=2.0, num_div=16, drop_path=0.6
        ),
        _PAPER_TRAIN,
    ),
}


# The SPT/LSA paper's CIFAR recipe as its code runs it (aanna0701/SPT_LSA_ViT, main.py's
# defaults): AdamW, lr 1e-3, weight decay 0.05 on every weight (torch's AdamW on all
# parameters, as here), batch 128, linear warm-up from 1e-6 over the first 10% of the steps,
# then cosine; random crop after 4 pixels of zero padding (pad_crop=4), horizontal flip,
# AutoAugment's CIFAR-10 policy (auto_augment="cifar10": its 25 sub-policies with the code's
# Pillow ops, toolkit/data/autoaugment.py), random erasing (p 0.25, area 0.02-0.4, aspect
# 0.3-3.3) filled with the mean pixel (erasing_fill="mean"), label smoothing 0.1, and half of
# the batches mixed, each by Mixup (alpha 1) or CutMix (beta 1: cutmix_alpha="fixed"), half
# each; stochastic depth 0.1 (the arch's drop_path).
# Epochs: `--epochs 100 --ra 3` there builds RASampler(len, batch, 1, 3), whose positional
# arguments are repetitions=1 and len_factor=3: no image repeated, each "epoch" three shuffled
# passes over the data. So 300 epochs here, with repeat_augment off: the same passes over the
# training images (300), warm-up (30 passes) and steps per pass.
# Where the pieces depart from the code: erasing's mean is the batch's mean pixel before
# augmentation (the code writes the dataset mean's values into the normalised image, a lighter
# grey), and a box larger than the image is clipped where the code draws again; Mixup and
# CutMix draw a weight per image (the code: one per batch), and CutMix's box lies inside the
# image (the code's is centred at random and cut by the edges); the cosine ends at 0, the
# code's at 1e-6.
# Stochastic depth and all of the above are off at inference: the exported model is the same.
_PAPER_CIFAR_TRAIN = TrainRecipe(
    batch_size=128,
    epochs=300,
    lr_start=1e-6,
    lr_max=1e-3,
    weight_decay=0.05,
    warmup_fraction=0.1,
    augmentation=Augmentation(
        flip=True, erasing=0.25, pad_crop=4, auto_augment="cifar10", erasing_fill="mean"
    ),
    label_smoothing=0.1,
    mixup=1.0,
    cutmix=1.0,
    mix_prob=0.5,
    cutmix_alpha="fixed",
)
# The paper's CIFAR ViT as models/create_model.py builds it (`vit`: patch 4 at 32x32, dim 192,
# depth 9, 12 heads x 16, MLP ratio 2): a class token and LayerNorm + Linear head on it,
# pre-norm blocks with GELU MLPs (none after the second Linear), q/k/v projections without
# bias, stochastic depth 0.1 in every block, LSA's scale learned per head, torch's LayerNorm
# epsilon (1e-5), no dropout. SPT and LSA on (vit-lsa) or off (vit, the paper's baseline).
# Parameters and MACs equal the code's (tests/test_paper_cifar.py); its initialisation is not
# copied (the code: class token and position table N(0, 1), xavier-normal kernels).
_PAPER_CIFAR_VIT = ViTArch(
    image_size=32,
    patch_size=4,
    dim=192,
    depth=9,
    num_heads=12,
    key_dim=16,
    mlp_units=(384, 192),
    dropout=0.0,
    head_units=(),
    head_dropout=0.0,
    epsilon=1e-5,
    head="class_token",
    drop_path=0.1,
    mlp_activate_last=False,
    qkv_bias=False,
    lsa_temperature="per_head",
)
_VIT_PAPER = {"paper-cifar": (_PAPER_CIFAR_VIT, _PAPER_CIFAR_TRAIN)}
# A ShiftViT of the paper ViT's compute (190 M MACs) with the same recipe: the SPT/LSA paper's
# CIFAR Swin layout (patch 2, three stages, widths 96-384, MLP ratio 2) with its depths 2-6-4
# scaled to 3-10-6 (a shift block has no attention: ShiftViT trades it for depth); stochastic
# depth rising to 0.1 (ShiftViT's rule), no dropout. 5.5 M parameters, 189 M MACs.
_SHIFTVIT_PAPER_CIFAR = {
    "paper-cifar": (
        ShiftViTArch(
            image_size=32,
            patch_size=2,
            dim=96,
            depths=(3, 10, 6),
            num_div=12,
            shift_pixel=1,
            mlp_ratio=2.0,
            epsilon=1e-5,
            drop_path=0.1,
            dropout=0.0,
        ),
        _PAPER_CIFAR_TRAIN,
    )
}


def _vit_variant(presets: dict, spt: bool, lsa: bool) -> dict:
    return {name: (replace(arch, spt=spt, lsa=lsa), tr) for name, (arch, tr) in presets.items()}


# what each preset name is for (the "for" column of docs/presets.md's table)
PRESET_PURPOSES = {
    "seed": "the keras.io example's hyperparameters: the results to compare",
    "small": "quick experiments on a CPU",
    "tiny": "tests and `toolkit demo`: minutes on a CPU",
    "cpu60": "the most accuracy from 60 minutes of training on 2 CPU cores",
    "shift-t-light": "the paper's Shift-T/light on ImageNet-1k (Swin-T's depths, MLP ratio 4)",
    "shift-t": "the paper's Shift-T on ImageNet-1k",
    "shift-s": "the paper's Shift-S on ImageNet-1k",
    "shift-b": "the paper's Shift-B on ImageNet-1k",
    "paper-cifar": "the SPT/LSA paper's CIFAR-10 ViT and recipe, for a GPU (ShiftViT: as many "
    "MACs)",
}


@dataclass(frozen=True)
class Workload:
    """The images a preset is made for: what `toolkit presets` and docs/presets.md build it at."""

    title: str
    input_shape: tuple[int, int, int]
    num_classes: int


SMALL_IMAGES = Workload("32x32 RGB images, 10 classes (CIFAR-10)", (32, 32, 3), 10)
IMAGENET = Workload("224x224 RGB images, 1000 classes (ImageNet-1k)", (224, 224, 3), 1000)
# preset name -> its workload; a name not here is made for SMALL_IMAGES. Tests that build or
# train every preset on small images leave out the presets made for larger workloads.
PRESET_WORKLOADS: dict[str, Workload] = dict.fromkeys(_SHIFTVIT_PAPER, IMAGENET)


def workload(name: str) -> Workload:
    """The workload preset `name` is made for (SMALL_IMAGES unless PRESET_WORKLOADS says)."""
    return PRESET_WORKLOADS.get(name, SMALL_IMAGES)


@dataclass(frozen=True)
class PaperFigures:
    """A preset's row in its paper's table: the model's name there, parameters in millions
    (None: the table gives none), FLOPs in billions (multiply-accumulates, as Swin and ShiftViT
    count them) and top-1 (%)."""

    name: str
    params_m: float | None
    gflops: float
    top1: float


# (model, preset) -> its paper's figures.
# The ShiftViT paper's ImageNet-1k table (224x224 input); Shift-T/light, Shift-T and Shift-S
# are also in the official README's table (microsoft/SPACH), with their checkpoints.
# The SPT/LSA paper's CIFAR-10 top-1 and FLOPs, from its code's README (aanna0701/SPT_LSA_ViT:
# "ViT" and "SL-ViT"; no parameter counts there). Those FLOPs are its Tiny-ImageNet model's
# (64x64, patch 8, 200 classes): the code's matmul MACs there are 189.5 M and 199.0 M, at
# CIFAR-10's 32x32 187.7 M and 190.1 M (tests/test_paper_cifar.py).
PAPER_FIGURES: dict[tuple[str, str], PaperFigures] = {
    ("shiftvit", "shift-t-light"): PaperFigures("Shift-T/light", 20, 3.0, 79.4),
    ("shiftvit", "shift-t"): PaperFigures("Shift-T", 29, 4.5, 81.7),
    ("shiftvit", "shift-s"): PaperFigures("Shift-S", 50, 8.8, 82.8),
    ("shiftvit", "shift-b"): PaperFigures("Shift-B", 89, 15.6, 83.3),
    ("vit", "paper-cifar"): PaperFigures("ViT", None, 0.1898, 93.58),
    ("vit-lsa", "paper-cifar"): PaperFigures("SL-ViT", None, 0.1992, 94.53),
}

PRESETS: dict[str, dict[str, tuple[ShiftViTArch | ViTArch, TrainRecipe]]] = {
    "shiftvit": {**_SHIFTVIT, **_SHIFTVIT_PAPER, **_SHIFTVIT_PAPER_CIFAR},
    "vit-lsa": _vit_variant({**_VIT, **_VIT_PAPER}, spt=True, lsa=True),
    "vit": _vit_variant({**_VIT, **_VIT_PAPER}, spt=False, lsa=False),
}


# each model's architecture class (config.json's `preset.arch` is rebuilt as one)
ARCH_CLASSES: dict[str, type] = {"shiftvit": ShiftViTArch, "vit-lsa": ViTArch, "vit": ViTArch}
# architecture fields `--arch` may not set: `--model` chooses them (vit-lsa or vit)
_MODEL_FIELDS = {"spt", "lsa"}


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
    arch_cls = ARCH_CLASSES[data["model"]]
    arch = arch_cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data["arch"].items()})
    train = dict(data["train"])
    train["augmentation"] = Augmentation.from_dict(train["augmentation"])
    if train.get("rand_augment") is not None:  # a JSON list
        num_ops, factor = train["rand_augment"]
        train["rand_augment"] = (int(num_ops), float(factor))
    # config.json files older than a recipe piece lack its field: TrainRecipe's default (off)
    return Preset(model=data["model"], name=data["name"], arch=arch, train=TrainRecipe(**train))


# TrainRecipe fields `--recipe` may not set: --epochs and --batch-size set these two
_OWN_FLAGS = {"epochs": "--epochs", "batch_size": "--batch-size"}


def recipe_keys() -> list[str]:
    """The TrainRecipe fields `toolkit train --recipe KEY=VALUE` sets, then its augmentation's
    (flip, crop_resize, rotation, zoom, erasing, pad_crop: no name is in both)."""
    own = [f.name for f in fields(TrainRecipe) if f.name not in {"augmentation", *_OWN_FLAGS}]
    return own + [f.name for f in fields(Augmentation)]


def with_recipe(recipe: TrainRecipe, values: dict[str, object]) -> TrainRecipe:
    """`recipe` with the `parse_recipe` values set, the augmentation's fields in its
    `augmentation`."""
    augment = {f.name for f in fields(Augmentation)}
    augmentation = replace(recipe.augmentation, **{k: v for k, v in values.items() if k in augment})
    own = {k: v for k, v in values.items() if k not in augment}
    return replace(recipe, **own, augmentation=augmentation)


# a numeric or boolean field's value that switches it off, by type: `none` or `off` give it
# (X | None fields: None, which `0` gives too); the type's word and example for messages
OFF_WORDS = ("none", "off")
OFF_VALUES: dict[type, object] = {bool: False, int: 0, float: 0.0}
TYPE_WORDS: dict[type, tuple[str, str]] = {
    int: ("a whole number", "2"),
    float: ("a finite number", "0.1"),
    bool: ("true or false", "true"),
}


def _boolean(text: str) -> bool:
    """`true`/`on`/`1` or `false`/`off`/`0`; ValueError otherwise."""
    if text.lower() not in ("true", "false", "1", "0", "on", "off"):
        raise ValueError(text)
    return text.lower() in ("true", "1", "on")


# field type -> its converter from text (ValueError when the text is not one)
SCALARS: dict[type, typing.Callable[[str], object]] = {
    int: int,
    float: finite_number,
    bool: _boolean,
}


def _convert(text: str, kind: object, choices: tuple[str, ...] | None = None) -> object:
    """`text` as a value of the field type `kind` (None, int, float, bool, str or a tuple of
    them: N:M, or N:N:... for a variable-length tuple); ValueError when it is not one."""
    args = typing.get_args(kind)
    if type(None) in args:  # X | None: "none", "off" or 0 is None (the piece off)
        if text.lower() in (*OFF_WORDS, "0", "0.0"):
            return None
        kind = next(a for a in args if a is not type(None))
    if typing.get_origin(kind) is tuple:  # N:M, or N:N:... for tuple[int, ...]
        parts, types = text.split(":"), typing.get_args(kind)
        if len(types) == 2 and types[1] is Ellipsis:
            types = (types[0],) * len(parts)
        if len(parts) != len(types):
            raise ValueError(text)
        return tuple(SCALARS[t](part) for t, part in zip(types, parts, strict=True))
    if kind in OFF_VALUES and text.lower() in OFF_WORDS:
        return OFF_VALUES[kind]
    if kind is str and choices and text in choices:
        return text
    if kind in SCALARS:
        return SCALARS[kind](text)
    raise ValueError(text)


def _takes(key: str, kind: object, spec: Field) -> str:
    """What field `key` of type `kind` takes, with an example (its default where that is on):
    'mixup takes a finite number, e.g. mixup=0.1, or none (off)'."""
    args = typing.get_args(kind)
    optional = type(None) in args
    base = next(a for a in args if a is not type(None)) if optional else kind
    choices = spec.metadata.get("choices")
    if choices:
        what, example = " or ".join(choices), choices[0]
    elif typing.get_origin(base) is tuple:  # tuple[int, int], tuple[int, float], tuple[int, ...]
        types = typing.get_args(base)
        types = (types[0],) * 3 if types[-1] is Ellipsis else types
        what = "numbers joined by colons"
        example = ":".join(TYPE_WORDS.get(t, ("", "2"))[1] for t in types)
    else:
        what, example = TYPE_WORDS.get(base, (f"a {getattr(base, '__name__', base)}", "..."))
    default = None if spec.default is MISSING else spec.default
    if isinstance(default, tuple) and default:
        example = ":".join(map(str, default))
    elif default not in (None, (), *OFF_VALUES.values()):  # a default that is on
        example = str(default).lower() if isinstance(default, bool) else str(default)
    off = optional or (base in OFF_VALUES and default == OFF_VALUES[base])
    return f"{key} takes {what}, e.g. {key}={example}{', or none (off)' if off else ''}"


def _parse_fields(
    text: str | None, classes: tuple[type, ...], keys: list[str], flag: str
) -> dict[str, object]:
    """`KEY=VALUE[,KEY=VALUE...]` as values of the fields `keys` of the dataclasses `classes`:
    each key once, each value of its field's type (`_convert`). None: {} (the flag not given);
    an empty text is a UsageError."""
    if text is None:
        return {}
    if not text.strip():
        raise UsageError(
            f"{flag} is empty: leave {flag} out to keep the preset's values, or pass "
            "KEY=VALUE[,KEY=VALUE...]"
        )
    hints = {k: v for cls in classes for k, v in typing.get_type_hints(cls).items()}
    specs = {f.name: f for cls in classes for f in fields(cls)}
    values: dict[str, object] = {}
    for item in comma_items(text, flag):
        key, sep, value = (part.strip() for part in item.partition("="))
        if key in _OWN_FLAGS:
            raise UsageError(f"{flag} {key}: pass {_OWN_FLAGS[key]} instead")
        if not sep or key not in keys:
            raise UsageError(f"{flag} takes KEY=VALUE[,KEY=VALUE...], KEY one of {', '.join(keys)}")
        if key in values:
            raise UsageError(f"{flag} sets {key} twice ({text}): give each key once")
        try:
            values[key] = _convert(value, hints[key], specs[key].metadata.get("choices"))
        except ValueError:
            raise UsageError(
                f"{flag} {key}={value}: {_takes(key, hints[key], specs[key])}"
            ) from None
    return values


def parse_recipe(text: str | None) -> dict[str, object]:
    """`KEY=VALUE[,KEY=VALUE...]` (`toolkit train --recipe`) as TrainRecipe and Augmentation
    field values (`with_recipe` sets them)."""
    return _parse_fields(text, (TrainRecipe, Augmentation), recipe_keys(), "--recipe")


def arch_keys(model: str) -> list[str]:
    """The architecture fields `toolkit train --model MODEL --arch KEY=VALUE` sets."""
    return [f.name for f in fields(ARCH_CLASSES[model]) if f.name not in _MODEL_FIELDS]


def parse_arch(model: str, text: str | None) -> dict[str, object]:
    """`KEY=VALUE[,KEY=VALUE...]` (`toolkit train --arch`) as `model`'s architecture fields:
    stochastic depth, dropout, width, depth, ... over the preset's."""
    return _parse_fields(text, (ARCH_CLASSES[model],), arch_keys(model), "--arch")


def check_arch(arch: ShiftViTArch | ViTArch) -> None:
    """UsageError naming the way out when an architecture field cannot build a model: rates
    from 0 to below 1, sizes and counts 1 or more, other numbers above 0."""
    for f in fields(arch):
        value = getattr(arch, f.name)
        if isinstance(value, (bool, str)):
            continue
        if f.name == "drop_path" or f.name.endswith("dropout"):
            if not 0.0 <= value < 1.0:
                raise UsageError(
                    f"{f.name} {value} is a rate: pass --arch {f.name}=0.1, say (0 to below 1)"
                )
        elif isinstance(value, tuple) and not all(v >= 1 for v in value):
            raise UsageError(
                f"{f.name} {':'.join(map(str, value))} needs counts of 1 or more: pass --arch "
                f"{f.name}={':'.join(['2'] * len(value))}, say"
            )
        elif isinstance(value, int) and value < 1:
            raise UsageError(f"{f.name} {value} must be 1 or more: pass --arch {f.name}=2, say")
        elif isinstance(value, float) and value <= 0:
            raise UsageError(f"{f.name} {value} must be above 0: pass --arch {f.name}=2, say")
    if getattr(arch, "num_div", 4) < 4:  # four groups of C // num_div channels shift
        raise UsageError(
            f"num_div {arch.num_div}: 4 groups of channels / num_div shift, so it must be 4 or "
            "more: pass --arch num_div=12, say"
        )


def check_recipe(recipe: TrainRecipe) -> None:
    """UsageError naming the way out when a recipe piece has a value it cannot train with."""
    if recipe.lr_max <= 0 or recipe.lr_start < 0 or recipe.weight_decay < 0:
        raise UsageError(
            "lr_max must be above 0, lr_start and weight_decay 0 or more: pass --recipe "
            "lr_max=1e-3, say"
        )
    if not 0.0 <= recipe.warmup_fraction <= 1.0:
        raise UsageError(
            f"warmup_fraction {recipe.warmup_fraction} is the share of steps that warm up: "
            "pass --recipe warmup_fraction=0.1, say (0 to 1)"
        )
    if recipe.val_fraction is not None and not 0.0 < recipe.val_fraction < 1.0:
        raise UsageError(
            f"val_fraction {recipe.val_fraction} is the share of the training images held out "
            "for validation: pass --recipe val_fraction=0.1, say (above 0, below 1), or none "
            "(the data's own split)"
        )
    if recipe.early_stopping_patience is not None and recipe.early_stopping_patience < 0:
        raise UsageError(
            "early_stopping_patience is a number of epochs: pass --recipe "
            "early_stopping_patience=5, say, or none (off)"
        )
    if not 0.0 <= recipe.label_smoothing < 1.0:
        raise UsageError(
            f"label_smoothing {recipe.label_smoothing} must be from 0 (off) to below 1: "
            "pass --recipe label_smoothing=0.1, say"
        )
    if recipe.mixup < 0 or not 0.0 <= recipe.cutmix <= 1.0 or not 0.0 <= recipe.mix_prob <= 1.0:
        raise UsageError(
            f"mixup {recipe.mixup}, cutmix {recipe.cutmix}, mix_prob {recipe.mix_prob}: mixup is "
            "0 (off) or more, cutmix (Keras' CutMix factor) and mix_prob 0 to 1: pass --recipe "
            "mixup=0.8,cutmix=1,mix_prob=0.5, say"
        )
    if recipe.rand_augment is not None and (
        recipe.rand_augment[0] < 1 or not 0.0 <= recipe.rand_augment[1] <= 1.0
    ):
        raise UsageError(
            f"rand_augment {recipe.rand_augment} is (num_ops >= 1, factor 0 to 1): pass --recipe "
            "rand_augment=2:0.9, say, or rand_augment=none (off)"
        )
    if recipe.rand_augment is not None and recipe.augmentation.auto_augment is not None:
        raise UsageError(
            f"rand_augment and auto_augment={recipe.augmentation.auto_augment} are two augment "
            "policies, one at a time: pass --recipe rand_augment=none, or auto_augment=none"
        )
    if recipe.repeat_augment < 0:
        raise UsageError(
            f"repeat_augment {recipe.repeat_augment} is how many copies of each image an epoch "
            "holds: pass --recipe repeat_augment=3, say, or 1 (off)"
        )
    if recipe.ema is not None and not 0.0 < recipe.ema < 1.0:
        raise UsageError(
            f"ema {recipe.ema} must be between 0 and 1 (the moving average's momentum): "
            "pass --recipe ema=0.999, say, or ema=none (off)"
        )
    aug = recipe.augmentation
    if not 0.0 <= aug.erasing <= 1.0 or aug.rotation < 0 or aug.zoom < 0:
        raise UsageError(
            f"erasing {aug.erasing}, rotation {aug.rotation}, zoom {aug.zoom}: erasing is a "
            "probability (0 to 1), rotation and zoom Keras' factors (0: off, or more): pass "
            "--recipe erasing=0.25, say"
        )
    if aug.crop_resize is not None and not aug.crop_resize[0] >= aug.crop_resize[1] >= 1:
        raise UsageError(
            f"crop_resize {aug.crop_resize[0]}:{aug.crop_resize[1]} resizes by the first over "
            "the second, then crops back: the first must be at least the second: pass --recipe "
            "crop_resize=36:32, say, or crop_resize=none (off)"
        )
    if aug.pad_crop < 0 or (aug.pad_crop and aug.crop_resize is not None):
        raise UsageError(
            f"pad_crop {aug.pad_crop} with crop_resize {aug.crop_resize}: pad_crop is the pixels "
            "of zero padding per side before a random crop (0: off), and one crop at a time: "
            "pass --recipe crop_resize=none,pad_crop=4, say"
        )
