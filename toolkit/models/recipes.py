"""The training recipe: optimiser, schedule, augmentation and the pieces `toolkit train --recipe`
switches on, one frozen dataclass; `--recipe` values set on it, and the rule for values it
cannot train with."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from toolkit.common.errors import UsageError
from toolkit.data.augment import Augmentation
from toolkit.data.mixing import CUTMIX_ALPHAS


@dataclass(frozen=True)
class TrainRecipe:
    """Optimiser, schedule, augmentation and stopping rule of a preset."""

    batch_size: int
    epochs: int  # a fixed-epoch run's length; a timed run's first plan, before it measures
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
    # progressive resizing (START, UNTIL): START pixels at the first step, rising to the
    # model's own resolution at the fraction UNTIL of the steps (toolkit.training.resolution)
    progressive_resize: tuple[int, float] | None = None
    # seconds of wall clock the run may take (`toolkit train --time`; --epochs instead of it
    # trains `epochs`): the schedule is planned to end within them (toolkit.training.budget)
    time_budget: float | None = None


# TrainRecipe fields `--recipe` may not set: --epochs, --batch-size and --time set these
OWN_FLAGS = {"epochs": "--epochs", "batch_size": "--batch-size", "time_budget": "--time"}


def recipe_keys() -> list[str]:
    """The TrainRecipe fields `toolkit train --recipe KEY=VALUE` sets, then its augmentation's
    (flip, crop_resize, rotation, zoom, erasing, pad_crop: no name is in both)."""
    own = [f.name for f in fields(TrainRecipe) if f.name not in {"augmentation", *OWN_FLAGS}]
    return own + [f.name for f in fields(Augmentation)]


def with_recipe(recipe: TrainRecipe, values: dict[str, object]) -> TrainRecipe:
    """`recipe` with the `parse_recipe` values set, the augmentation's fields in its
    `augmentation`."""
    augment = {f.name for f in fields(Augmentation)}
    augmentation = replace(recipe.augmentation, **{k: v for k, v in values.items() if k in augment})
    own = {k: v for k, v in values.items() if k not in augment}
    if own.get("repeat_augment") == 0:  # `0`, `none` and `off` switch it off: each image once
        own["repeat_augment"] = 1
    return replace(recipe, **own, augmentation=augmentation)


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
    _check_progressive(recipe)
    aug = recipe.augmentation
    if not 0.0 <= aug.erasing <= 1.0 or aug.rotation < 0 or not 0 <= aug.zoom < 1:
        raise UsageError(
            f"erasing {aug.erasing}, rotation {aug.rotation}, zoom {aug.zoom}: erasing is a "
            "probability (0 to 1), rotation Keras' factor (0: off, or more), zoom Keras' factor "
            "below 1 (0: off; 1 or more would zoom by a negative scale): pass --recipe "
            "erasing=0.25,zoom=0.2, say"
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


def _check_progressive(recipe: TrainRecipe) -> None:
    """UsageError for a progressive_resize that cannot train: a resolution of 8 or more, a
    fraction above 0 to 1, and nothing that ends each phase's fit as the run's end (the moving
    average swapped in, early stopping)."""
    if recipe.progressive_resize is None:
        return
    start, until = recipe.progressive_resize
    if start < 8 or not 0.0 < until <= 1.0:
        raise UsageError(
            f"progressive_resize {start}:{until} is START:UNTIL, START pixels (8 or more) "
            "rising to the model's resolution at the fraction UNTIL (above 0, 1 at most) of the "
            "steps: pass --recipe progressive_resize=16:0.5, say"
        )
    if recipe.ema is not None or recipe.early_stopping_patience:
        raise UsageError(
            "progressive_resize trains each resolution in its own fit, which would swap in the "
            "weights' average or stop early at each change: pass --recipe ema=none,"
            "early_stopping_patience=none, or progressive_resize=none"
        )
