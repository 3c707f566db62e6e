"""tf.data input pipelines yielding (float32 images 0-255, int64 labels) batches: the TensorFlow
backend's, augmenting in parallel with the train step."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tensorflow as tf

from toolkit.data.augment import Augmentation
from toolkit.data.tf_augment import augment_fn

AUTOTUNE = tf.data.AUTOTUNE
AUGMENTS = True  # train_batches applies the augmentation (tf_augment), in parallel with the step


def train_batches(
    x: np.ndarray, y: np.ndarray, batch_size: int, aug: Augmentation, seed: int = 0
) -> tf.data.Dataset:
    """Seeded shuffle (new order each epoch), batch, augment in parallel, prefetch.

    Each batch gets its own stateless augmentation seed, so a given `seed` reproduces the
    whole stream, epoch after epoch, despite the parallel map.
    """
    images, labels = _tensors(x, y)
    fn = augment_fn(aug, int(x.shape[1]), seed)
    order = tf.data.Dataset.range(len(x)).shuffle(len(x), seed=seed, reshuffle_each_iteration=True)
    batches = order.batch(batch_size, drop_remainder=False)
    if not aug.active:
        return batches.map(_gather(images, labels), num_parallel_calls=AUTOTUNE).prefetch(AUTOTUNE)
    seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2)
    gather = _gather(images, labels)

    def load(idx: tf.Tensor, batch_seed: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        batch_x, batch_y = gather(idx)
        return fn(batch_x, seed=batch_seed), batch_y

    return (
        tf.data.Dataset.zip(batches, seeds)
        .map(load, num_parallel_calls=AUTOTUNE, deterministic=True)
        .prefetch(AUTOTUNE)
    )


def eval_batches(x: np.ndarray, y: np.ndarray | None, batch_size: int) -> tf.data.Dataset:
    """Batches in the stored order: no shuffle, no augmentation; images only when y is None."""
    labelled = y is not None
    images, labels = _tensors(x, y if labelled else np.zeros(len(x), np.int64))
    gather = _gather(images, labels)
    fn = gather if labelled else (lambda idx: gather(idx)[0])
    return (
        tf.data.Dataset.range(len(x))
        .batch(batch_size, drop_remainder=False)
        .map(fn, num_parallel_calls=AUTOTUNE, deterministic=True)
        .prefetch(AUTOTUNE)
    )


def _tensors(x: np.ndarray, y: np.ndarray) -> tuple[tf.Tensor, tf.Tensor]:
    """Images and labels as host-memory tensors held once; batches gather from them by index."""
    with tf.device("/cpu:0"):
        return tf.convert_to_tensor(x), tf.convert_to_tensor(np.asarray(y, np.int64).reshape(-1))


def _gather(images: tf.Tensor, labels: tf.Tensor) -> Callable[[tf.Tensor], tuple]:
    """idx batch -> (float32 images, int64 labels)."""

    def gather(idx: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return tf.cast(tf.gather(images, idx), tf.float32), tf.gather(labels, idx)

    return gather
