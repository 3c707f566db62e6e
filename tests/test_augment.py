"""The in-step augmentation (RandomAugment, affine_warp) and the NumPy-batch pipeline, against
NumPy references; backend-neutral (tests/test_backends.py runs this module on JAX too). On
TensorFlow the warp is also pinned to TF's own projective-transform op, which the tf.data
pipeline uses, so both pipelines augment alike."""

from __future__ import annotations

import keras
import numpy as np
import pytest
from backend_calls import augmented

from toolkit.data import Augmentation, erasing
from toolkit.data.array_pipeline import ArrayBatches
from toolkit.data.augment import crop_size
from toolkit.data.pad_crop import pad_crop, reference_pad_crop, reference_windows
from toolkit.data.random_augment import RandomAugment
from toolkit.data.warp import (
    affine_warp,
    crop_transforms,
    reference_affine_warp,
    rotate_zoom_transforms,
)

SHIFTVIT = Augmentation(flip=True, crop_resize=(52, 48))  # the seed presets' augmentations
VIT = Augmentation(flip=True, rotation=0.02, zoom=0.2)


def _images(n: int, size: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0, 255, (n, size, size, 3)).astype(np.float32)


def _np(x) -> np.ndarray:
    return keras.ops.convert_to_numpy(x)


def _random_transforms(n: int, height: int, width: int, seed: int) -> np.ndarray:
    """Rotation up to 40 degrees, zoom 0.6-1.4 and shifts up to 3 px: sources fall outside."""
    g = np.random.default_rng(seed)
    t = _np(
        rotate_zoom_transforms(
            g.uniform(-0.7, 0.7, n).astype("float32"),
            g.uniform(0.6, 1.4, n).astype("float32"),
            g.uniform(0.6, 1.4, n).astype("float32"),
            height,
            width,
        )
    )
    t[:, 2] += g.uniform(-3, 3, n)
    t[:, 5] += g.uniform(-3, 3, n)
    return t.astype(np.float32)


def _resize_crop_reference(images: np.ndarray, full: int, offsets: np.ndarray) -> np.ndarray:
    """Bilinear half-pixel resize to full x full (edges clamped, as tf.image.resize), then the
    window at `offsets` (row, col) of each image."""
    size = images.shape[1]
    centres = (np.arange(full) + 0.5) * size / full - 0.5
    low = np.floor(centres)
    frac = centres - low
    lo = np.clip(low, 0, size - 1).astype(int)
    hi = np.clip(low + 1, 0, size - 1).astype(int)
    x = images.astype(np.float64)
    rows = x[:, lo] * (1 - frac)[None, :, None, None] + x[:, hi] * frac[None, :, None, None]
    resized = (
        rows[:, :, lo] * (1 - frac)[None, None, :, None]
        + rows[:, :, hi] * frac[None, None, :, None]
    )
    return np.stack(
        [r[o[0] : o[0] + size, o[1] : o[1] + size] for r, o in zip(resized, offsets, strict=True)]
    )


# --- affine_warp ------------------------------------------------------------------------


@pytest.mark.parametrize("fill_mode", ["nearest", "reflect"])
@pytest.mark.parametrize("shape", [(3, 9, 11, 3), (2, 8, 8, 1)])
def test_affine_warp_matches_reference(shape, fill_mode):
    images = np.random.default_rng(1).uniform(0, 255, shape).astype(np.float32)
    transforms = _random_transforms(shape[0], shape[1], shape[2], seed=2)
    got = _np(affine_warp(images, transforms, fill_mode))
    want = reference_affine_warp(images, transforms, fill_mode)
    np.testing.assert_allclose(got, want, atol=2e-3, rtol=0)


def test_affine_warp_identity_and_integer_shift_are_exact():
    images = _images(2, 6)
    identity = np.tile(np.array([[1, 0, 0, 0, 1, 0]], np.float32), (2, 1))
    np.testing.assert_array_equal(_np(affine_warp(images, identity)), images)
    shift = np.tile(np.array([[1, 0, 2, 0, 1, -1]], np.float32), (2, 1))  # x + 2, y - 1
    out = _np(affine_warp(images, shift, "nearest"))
    np.testing.assert_array_equal(out[:, 1:, :4], images[:, :-1, 2:])
    np.testing.assert_array_equal(out[:, 0, :4], images[:, 0, 2:])  # clamped row above


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="TF's op is the oracle")
@pytest.mark.parametrize("fill_mode", ["NEAREST", "REFLECT"])
def test_affine_warp_equals_tensorflow_projective_transform(fill_mode):
    import tensorflow as tf

    images = _images(4, 12, seed=3)
    transforms = _random_transforms(4, 12, 12, seed=4)
    tf_transforms = np.concatenate([transforms, np.zeros((4, 2), np.float32)], axis=1)
    want = tf.raw_ops.ImageProjectiveTransformV3(
        images=images,
        transforms=tf_transforms,
        output_shape=[12, 12],
        fill_value=0.0,
        interpolation="BILINEAR",
        fill_mode=fill_mode,
    ).numpy()
    got = _np(affine_warp(images, transforms, fill_mode.lower()))
    np.testing.assert_allclose(got, want, atol=2e-3, rtol=0)


def test_crop_transforms_equal_resize_then_crop():
    images, full = _images(3, 8), 11
    offsets = np.array([[0, 0], [3, 1], [2, 3]], np.int32)
    got = _np(affine_warp(images, crop_transforms(offsets, 8 / full), "nearest"))
    np.testing.assert_allclose(got, _resize_crop_reference(images, full, offsets), atol=2e-3)


def test_pad_crop_matches_reference_at_every_offset():
    images, padding = _images(25, 6), 2
    offsets = np.array([(r, c) for r in range(5) for c in range(5)], np.int32)
    got = _np(pad_crop(images, offsets, padding))
    want = reference_pad_crop(images, offsets, padding)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(want[12], images[12])  # the middle window is the image
    assert (want[0, :2] == 0).all() and (want[0, :, :2] == 0).all()  # zeros, no rescale
    np.testing.assert_array_equal(want[0, 2:, 2:], images[0, :4, :4])


# --- random erasing ---------------------------------------------------------------------


def _erase_inputs(n: int, size: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    g = np.random.default_rng(seed)
    images = g.uniform(0, 255, (n, size, size, 3)).astype(np.float32)
    draws = g.uniform(0, 1, (n, erasing.DRAWS)).astype(np.float32)
    return images, draws, g.uniform(0, 255, images.shape).astype(np.float32)


@pytest.mark.parametrize("probability", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("size", [8, 32])
def test_erase_matches_reference(size, probability):
    images, draws, noise = _erase_inputs(64, size, seed=size)
    got = _np(erasing.erase(images, draws, noise, probability))
    np.testing.assert_array_equal(got, erasing.reference_erase(images, draws, noise, probability))
    erased = (got != images).any(axis=(1, 2, 3))
    np.testing.assert_array_equal(erased, draws[:, 0] < probability)


def test_erased_rectangles_span_the_papers_area_and_aspect():
    images, draws, noise = _erase_inputs(400, 32, seed=5)
    out = erasing.reference_erase(images, draws, noise, 1.0)
    areas, aspects = [], []
    for o, i in zip(out, images, strict=True):
        rows, cols = np.nonzero((o != i).any(axis=-1))
        height, width = rows.max() - rows.min() + 1, cols.max() - cols.min() + 1
        assert len(rows) == height * width  # one solid rectangle
        areas.append(height * width / 32**2)
        aspects.append(height / width)
    # s_e in [0.02, 0.4] of the image and r_e in (0.3, 3.33), up to rounding to whole pixels
    assert 0.015 <= min(areas) < 0.04 and 0.35 < max(areas) <= 0.45
    assert 0.25 <= min(aspects) < 0.4 and 2.5 < max(aspects) <= 4.0


def test_erase_fills_with_the_noise_inside_the_image():
    images, draws, noise = _erase_inputs(8, 16, seed=6)
    draws[:, 1:3] = [1.0, 0.0]  # the largest area, the widest rectangle: clipped to the width
    out = _np(erasing.erase(images, draws, noise, 1.0))
    changed = out != images
    np.testing.assert_array_equal(out[changed], noise[changed])
    assert changed.any(axis=(1, 3)).all(axis=1).all()  # every column of every image touched


# --- RandomAugment ----------------------------------------------------------------------


@pytest.mark.parametrize("aug", [SHIFTVIT, VIT, Augmentation(flip=True)], ids=str)
def test_random_augment_is_identity_at_inference(aug):
    images = _images(4, 16)
    layer = RandomAugment.of(aug, seed=1)
    np.testing.assert_array_equal(_np(layer(images)), images)
    np.testing.assert_array_equal(_np(layer(images, training=False)), images)


@pytest.mark.parametrize("aug", [SHIFTVIT, VIT], ids=["shiftvit", "vit"])
def test_random_augment_keeps_shape_dtype_and_range_and_changes_images(aug):
    images = _images(16, 32)
    out = augmented(RandomAugment.of(aug, seed=1), images)
    assert out.shape == images.shape and out.dtype == np.float32
    assert out.min() >= 0 and out.max() <= 255
    changed = [not np.allclose(o, i) for o, i in zip(out, images, strict=True)]
    assert sum(changed) >= 15  # a flip alone may leave an image unchanged only by chance 1/2


def test_random_flip_mirrors_about_half():
    images = _images(64, 8)
    out = augmented(RandomAugment(flip=True, seed=2), images)
    same = [np.array_equal(o, i) for o, i in zip(out, images, strict=True)]
    mirrored = [np.array_equal(o, i[:, ::-1]) for o, i in zip(out, images, strict=True)]
    assert all(s or m for s, m in zip(same, mirrored, strict=True))
    assert 16 <= sum(mirrored) <= 48


def test_random_crop_is_resize_then_an_independent_window_per_image():
    size, images = 8, _images(24, 8)
    aug = Augmentation(crop_resize=(52, 48))
    full = crop_size(aug, size)  # round(8 * 52 / 48) = 9: offsets 0 or 1 per axis
    out = augmented(RandomAugment.of(aug, seed=3), images)
    windows = {}
    for i, image in enumerate(out):
        for offset in [(r, c) for r in range(full - size + 1) for c in range(full - size + 1)]:
            ref = _resize_crop_reference(images[i : i + 1], full, np.array([offset]))[0]
            if np.allclose(image, ref, atol=2e-3):
                windows[i] = offset
    assert len(windows) == len(images)  # every output is the resized image at some window
    assert len(set(windows.values())) > 1  # windows drawn per image, not per batch


def test_random_pad_crop_is_a_shifted_window_drawn_per_image():
    images, padding = _images(24, 8), 2
    out = augmented(RandomAugment.of(Augmentation(pad_crop=padding), seed=3), images)
    windows = reference_windows(out, images, padding)
    assert None not in windows  # every output is its padded image at some window
    assert len(set(windows)) > 4  # windows drawn per image, not per batch


def test_random_rotation_zoom_stays_near_the_image():
    images = np.tile(np.linspace(0, 255, 32, dtype=np.float32)[None, None, :, None], (8, 32, 1, 3))
    out = augmented(RandomAugment(rotation=0.02, zoom=0.2, seed=4), images)
    assert out.shape == images.shape and out.min() >= 0 and out.max() <= 255
    # at most 7.2 degrees and 20% zoom about the centre: the centre pixel moves < 1 px
    np.testing.assert_allclose(out[:, 15:17, 15:17], images[:, 15:17, 15:17], atol=9.0)
    assert all(not np.allclose(o, images[0], atol=1.0) for o in out)


def test_random_erasing_erases_about_its_probability_of_images():
    images = _images(200, 16)
    out = augmented(RandomAugment(erasing=0.5, seed=8), images)
    erased = (out != images).any(axis=(1, 2, 3))
    assert 70 <= erased.sum() <= 130 and out.min() >= 0 and out.max() <= 255
    np.testing.assert_array_equal(out[~erased], images[~erased])


def test_random_augment_is_seeded_and_float32_under_mixed_precision():
    images = _images(4, 16)
    a = _np(RandomAugment.of(VIT, seed=7)(images, training=True))
    b = _np(RandomAugment.of(VIT, seed=7)(images, training=True))
    np.testing.assert_array_equal(a, b)
    layer = RandomAugment.of(SHIFTVIT, seed=7, dtype="mixed_bfloat16")
    assert keras.backend.standardize_dtype(layer(images, training=True).dtype) == "float32"


@pytest.mark.parametrize("aug", [VIT, Augmentation(flip=True, erasing=0.25, pad_crop=4)], ids=str)
def test_random_augment_config_round_trip(aug):
    layer = RandomAugment.of(aug, seed=3)
    config = layer.get_config()
    again = RandomAugment.from_config(config)
    assert again.augmentation == aug and again.get_config() == config


# --- ArrayBatches -----------------------------------------------------------------------


def test_array_batches_shuffle_per_epoch_reproducibly_and_cover_everything():
    x = (np.arange(70)[:, None, None, None] * np.ones((1, 2, 2, 3))).astype(np.uint8)
    y = np.arange(70)
    ds = ArrayBatches(x, y, 32, shuffle_seed=5)
    first = [ds[i] for i in range(len(ds))]
    assert [b[0].shape[0] for b in first] == [32, 32] and first[0][0].dtype == np.float32
    labels = np.concatenate([b[1] for b in first])
    assert len(set(labels)) == 64  # whole batches: 6 samples left out this epoch
    np.testing.assert_array_equal(first[0][0][:, 0, 0, 0], first[0][1])  # images match labels
    ds.on_epoch_end()
    assert not np.array_equal(ds[0][1], first[0][1])  # a new order each epoch
    again = ArrayBatches(x, y, 32, shuffle_seed=5)
    np.testing.assert_array_equal(again[0][1], first[0][1])
    seen = set()
    for _ in range(20):  # over epochs every sample is trained on
        seen.update(np.concatenate([ds[i][1] for i in range(len(ds))]).tolist())
        ds.on_epoch_end()
    assert seen == set(range(70))
    assert [len(b[1]) for b in ArrayBatches(x[:20], y[:20], 32, shuffle_seed=0)] == [20]


def test_array_batches_split_evenly_across_replicas():
    x, y = _images(11, 2).astype(np.uint8), np.arange(11)
    train = ArrayBatches(x[:7], y[:7], 8, shuffle_seed=0, multiple=2)
    assert [len(b[1]) for b in train] == [6]  # less than a batch: an even split of it
    evaluation = ArrayBatches(x, y, 4, multiple=2)
    images, labels, weights = evaluation[2]  # 3 left: padded with one copy weighted 0
    np.testing.assert_array_equal(labels, [8, 9, 10, 10])
    np.testing.assert_array_equal(weights, [1, 1, 1, 0])
    assert len(ArrayBatches(x, None, 4)[2]) == 1  # images only
