"""The training augmentation in TensorFlow (tf.image, stateless random ops), for the tf.data
pipeline of the TensorFlow backend."""

from __future__ import annotations

import math
from collections.abc import Callable

import tensorflow as tf

from toolkit.data import autoaugment, erasing
from toolkit.data.augment import Augmentation, crop_size

AugmentFn = Callable[..., tf.Tensor]


def augment_fn(aug: Augmentation, image_size: int, seed: int = 0) -> AugmentFn:
    """fn(images (B,R,R,3) float32 0-255, seed=None) -> same shape/range, R = image_size.

    Random draws are stateless: pass a shape-[2] int seed per batch for exact reproducibility
    (the pipeline does); without one a tf.random.Generator seeded with `seed` supplies it.
    """
    generator = tf.random.Generator.from_seed(seed)
    crop_from = crop_size(aug, image_size)

    def apply(images: tf.Tensor, seed: tf.Tensor | None = None) -> tf.Tensor:
        images = tf.convert_to_tensor(images, tf.float32)
        shape = images.shape  # the crop and the warp lose the static size; the model needs it
        mean = erasing.mean_pixel(images)  # before the padded crop brings zeros in
        if seed is None:
            seed = generator.make_seeds(1)[:, 0]
        seed = tf.cast(seed, tf.int64)
        flip_seed, crop_seed, rot_seed, zoom_seed = tf.unstack(
            tf.random.experimental.stateless_split(seed, num=4)
        )
        if aug.flip:
            images = tf.image.stateless_random_flip_left_right(images, flip_seed)
        if aug.crop_resize and crop_from > image_size:
            images = tf.image.resize(images, (crop_from, crop_from), method="bilinear")
            images = _random_crop(images, image_size, crop_seed)
        if aug.pad_crop > 0:  # zero padding, as torchvision's RandomCrop(padding=N)
            pad = aug.pad_crop
            images = tf.pad(images, [[0, 0], [pad, pad], [pad, pad], [0, 0]])
            images = _random_crop(images, image_size, crop_seed)
        if aug.rotation > 0 or aug.zoom > 0:
            images = _rotate_zoom(images, aug.rotation, aug.zoom, rot_seed, zoom_seed)
        if aug.auto_augment is not None:  # after the crops, before erasing: the paper's order
            draws = tf.random.stateless_uniform(
                (tf.shape(images)[0], autoaugment.DRAWS),
                tf.random.experimental.stateless_fold_in(seed, 5),
            )
            images = autoaugment.auto_augment(images, draws, aug.auto_augment)
        if aug.erasing > 0:  # its own seed, so adding it leaves the other draws as they were
            fold = tf.random.experimental.stateless_fold_in(seed, 4)
            images = _erase(images, aug.erasing, aug.erasing_fill, mean, fold)
        return tf.ensure_shape(tf.clip_by_value(images, 0.0, 255.0), shape)

    return apply


def _random_crop(images: tf.Tensor, size: int, seed: tf.Tensor) -> tf.Tensor:
    """An independent random size x size window per image (keras RandomCrop uses one per batch)."""
    batch, full = tf.shape(images)[0], tf.shape(images)[1]
    offsets = tf.random.stateless_uniform(
        (2, batch), seed, minval=0, maxval=full - size + 1, dtype=tf.int32
    )
    window = tf.range(size)
    rows = offsets[0][:, None] + window
    cols = offsets[1][:, None] + window
    images = tf.gather(images, rows, axis=1, batch_dims=1)
    return tf.gather(images, cols, axis=2, batch_dims=1)


def _erase(
    images: tf.Tensor, probability: float, fill: str, mean: tf.Tensor, seed: tf.Tensor
) -> tf.Tensor:
    """Random erasing (toolkit/data/erasing.py) with stateless draws, filled with noise or
    with `mean` (the batch's mean pixel) as `fill` says."""
    draw_seed, noise_seed = tf.unstack(tf.random.experimental.stateless_split(seed, num=2))
    draws = tf.random.stateless_uniform((tf.shape(images)[0], erasing.DRAWS), draw_seed)
    if fill == "mean":
        return erasing.erase(images, draws, mean, probability)
    noise = tf.random.stateless_uniform(tf.shape(images), noise_seed, 0.0, 255.0)
    return erasing.erase(images, draws, noise, probability)


def _rotate_zoom(
    images: tf.Tensor, rotation: float, zoom: float, rot_seed: tf.Tensor, zoom_seed: tf.Tensor
) -> tf.Tensor:
    """keras RandomRotation(rotation) then RandomZoom(zoom, zoom) as one reflect-filled warp."""
    batch = tf.shape(images)[0]
    height = tf.cast(tf.shape(images)[1], tf.float32)
    width = tf.cast(tf.shape(images)[2], tf.float32)
    limit = rotation * 2.0 * math.pi
    angle = tf.random.stateless_uniform((batch,), rot_seed, -limit, limit)
    zooms = tf.random.stateless_uniform((2, batch), zoom_seed, 1.0 - zoom, 1.0 + zoom)
    zx, zy = zooms[0], zooms[1]
    cos, sin = tf.cos(angle), tf.sin(angle)
    cx, cy = (width - 1.0) / 2.0, (height - 1.0) / 2.0
    # output (x, y) -> zoomed about the centre -> rotated about the centre -> input point
    a0, a1 = cos * zx, -sin * zy
    b0, b1 = sin * zx, cos * zy
    a2 = cx - a0 * cx - a1 * cy
    b2 = cy - b0 * cx - b1 * cy
    zeros = tf.zeros_like(angle)
    transforms = tf.stack([a0, a1, a2, b0, b1, b2, zeros, zeros], axis=1)
    return tf.raw_ops.ImageProjectiveTransformV3(
        images=images,
        transforms=transforms,
        output_shape=tf.shape(images)[1:3],
        fill_value=0.0,
        interpolation="BILINEAR",
        fill_mode="REFLECT",
    )
