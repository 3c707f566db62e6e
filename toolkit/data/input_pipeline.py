"""Input pipelines by Keras backend: tf.data on TensorFlow (augmenting in parallel with the
step), NumPy batches from a PyDataset elsewhere (augmenting inside the compiled step).

Batches are (float32 images 0-255, integer labels); the training stream is shuffled with a new
seeded order every epoch, evaluation keeps the stored order. tf.data stays TensorFlow's: with
--jit it trained the seed presets with ~10% more images per CPU-second than the NumPy batches
and in-step augmentation there (2-core EPYC: ShiftViT 101 vs 92, ViT-LSA 34 vs 31).

Streamed images (a folder too large for memory, `toolkit.data.stream`) take the same pipeline:
tf.data decodes their batches in its threads, the PyDataset's workers elsewhere.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import keras
import numpy as np

from toolkit.data.augment import Augmentation
from toolkit.data.mixing import Mixing

# backend -> module with train_batches, eval_batches and AUGMENTS; others use DEFAULT_PIPELINE
PIPELINES = {"tensorflow": "toolkit.data.tf_pipeline"}
DEFAULT_PIPELINE = "toolkit.data.array_pipeline"


def _pipeline(x: object = None) -> ModuleType:
    """The backend's pipeline module (for in-memory and streamed images `x` alike)."""
    return importlib.import_module(PIPELINES.get(keras.backend.backend(), DEFAULT_PIPELINE))


def augments_in_pipeline(x: object = None) -> bool:
    """Whether `train_dataset` of images `x` applies the augmentation (else `training_model`
    does, in-step)."""
    return bool(_pipeline(x).AUGMENTS)


def train_dataset(
    x: np.ndarray,
    y: np.ndarray,
    batch_size: int,
    aug: Augmentation,
    seed: int = 0,
    mix: Mixing | None = None,
    rand_augment: tuple[int, float] | None = None,
    repeats: int = 1,
):
    """Training batches for `fit`, seeded; augmented (and RandAugment-ed) only where
    `augments_in_pipeline()`; with an active `mix`, Mixup/CutMix in the pipeline and soft
    (one-hot based) labels; `repeats` > 1: repeated augmentation (DeiT's RASampler), an
    epoch of len(x) images holding len(x) / repeats of them, each `repeats` times."""
    extra: dict = {"mix": mix} if mix is not None and mix.active else {}
    if repeats > 1:  # repeated augmentation: each drawn image `repeats` times, consecutively
        extra["repeats"] = repeats
    if rand_augment and augments_in_pipeline(x):
        extra["rand_augment"] = rand_augment
    return _pipeline(x).train_batches(x, y, batch_size, aug, seed, **extra)


def eval_dataset(x: np.ndarray, y: np.ndarray | None, batch_size: int):
    """Batches in the stored order, not augmented; images only when `y` is None."""
    return _pipeline(x).eval_batches(x, y, batch_size)


def training_model(
    model: keras.Model,
    aug: Augmentation,
    seed: int = 0,
    x: object = None,
    rand_augment: tuple[int, float] | None = None,
) -> keras.Model:
    """What `fit` trains on images `x`: `model` itself when the pipeline augments, else `model`
    behind a RandomAugment layer (same weights; identity at inference: validation unaugmented),
    which also runs keras.layers.RandAugment when `rand_augment` is (num_ops, factor)."""
    if augments_in_pipeline(x) or not (aug.active or rand_augment):
        return model
    from toolkit.data.random_augment import RandomAugment

    inputs = keras.Input(model.input_shape[1:], name="images")
    layer = RandomAugment.of(aug, seed=seed, rand_augment=rand_augment, name="augment")
    augmented = layer(inputs)
    return keras.Model(inputs, model(augmented), name=f"{model.name}_train")
