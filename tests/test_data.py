"""Data layer: specs, loaders, split, augmentation and tf.data pipelines."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from toolkit.common.errors import UsageError
from toolkit.data import (
    DATA_KINDS,
    Augmentation,
    check_labels,
    decode_cache,
    eval_dataset,
    load_data,
    load_image,
    load_images,
    train_dataset,
)
from toolkit.data.cifar import CIFAR10_CLASSES, CIFAR100_CLASSES
from toolkit.data.shapes import generate_shapes
from toolkit.data.split import stratified_split

SAMPLE = Path(__file__).resolve().parents[2] / "shared/data/cifar10_train_sample.npz"


def _images(n: int, size: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, size, size, 3), dtype=np.uint8)


def _write_npz(path: Path, **arrays) -> str:
    np.savez(path, **arrays)
    return f"npz:{path}"


def _write_folder(root: Path, per_class: int = 6) -> Path:
    """Two classes of PNG/JPEG files in assorted sizes and modes."""
    rng = np.random.default_rng(0)
    for name in ("cat", "dog"):
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            h, w = 10 + 7 * i, 40 - 3 * i
            if i % 3 == 0:
                data = tf.io.encode_png(rng.integers(0, 256, (h, w, 1), dtype=np.uint8))
                (root / name / f"{i}_gray.png").write_bytes(data.numpy())
            elif i % 3 == 1:
                data = tf.io.encode_png(rng.integers(0, 256, (h, w, 4), dtype=np.uint8))
                (root / name / f"{i}_rgba.PNG").write_bytes(data.numpy())
            else:
                data = tf.io.encode_jpeg(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
                (root / name / f"{i}.jpg").write_bytes(data.numpy())
    return root


# --- registry and shapes ---------------------------------------------------------------


def test_registry_lists_every_kind():
    assert set(DATA_KINDS) == {"cifar10", "cifar100", "npz", "folder", "shapes"}
    assert len(CIFAR10_CLASSES) == 10 and len(CIFAR100_CLASSES) == 100
    assert CIFAR100_CLASSES[0] == "apple" and CIFAR100_CLASSES[-1] == "worm"
    assert CIFAR100_CLASSES[91] == "trout" and len(set(CIFAR100_CLASSES)) == 100


def test_shapes_deterministic_and_balanced():
    x, y = generate_shapes(3000, seed=0)
    assert x.shape == (3000, 32, 32, 3) and x.dtype == np.uint8 and y.dtype == np.int64
    assert np.all(np.bincount(y) == 300)
    x2, y2 = generate_shapes(3000, seed=0)
    x3, _ = generate_shapes(3000, seed=1)
    assert np.array_equal(x, x2) and np.array_equal(y, y2)
    assert not np.array_equal(x, x3)


def test_shapes_spec():
    ds = load_data("shapes:500", seed=3)
    assert ds.synthetic and ds.num_classes == 10 and ds.image_shape == (32, 32, 3)
    assert len(ds.x_train) + len(ds.x_val) + len(ds.x_test) == 500
    assert set(np.unique(ds.y_val)) == set(range(10))
    assert "circle" in ds.class_names
    same = load_data("shapes:500", seed=3)
    assert np.array_equal(ds.x_train, same.x_train)


# --- split -----------------------------------------------------------------------------


def test_stratified_split_deterministic_disjoint_and_complete():
    y = np.repeat(np.arange(5), [3, 10, 40, 7, 100])
    tr, va, te = stratified_split(y, seed=1)
    assert len(tr) + len(va) + len(te) == len(y)
    assert np.array_equal(np.sort(np.concatenate([tr, va, te])), np.arange(len(y)))
    for part in (tr, va, te):
        assert set(y[part]) == set(range(5))
    assert abs(len(tr) / len(y) - 0.8) < 0.05
    again = stratified_split(y, seed=1)
    other = stratified_split(y, seed=2)
    assert all(np.array_equal(a, b) for a, b in zip((tr, va, te), again, strict=True))
    assert not np.array_equal(va, other[1])


# --- npz -------------------------------------------------------------------------------


def test_npz_round_trip(tmp_path):
    x, y = _images(50), np.arange(50) % 5
    ds = load_data(_write_npz(tmp_path / "d.npz", x=x, y=y), seed=0)
    assert ds.class_names == ["0", "1", "2", "3", "4"] and not ds.synthetic
    assert ds.x_train.dtype == np.uint8 and ds.y_train.dtype == np.int64
    parts = [(ds.x_train, ds.y_train), (ds.x_val, ds.y_val), (ds.x_test, ds.y_test)]
    got = {(xi.tobytes(), int(yi)) for xs, ys in parts for xi, yi in zip(xs, ys, strict=True)}
    assert got == {(xi.tobytes(), int(yi)) for xi, yi in zip(x, y, strict=True)}


def test_npz_grayscale_column_labels_and_names(tmp_path):
    x = np.random.default_rng(0).integers(0, 256, (30, 6, 6), dtype=np.uint8)
    y = (np.arange(30) % 3).reshape(-1, 1).astype(np.int32)
    spec = _write_npz(tmp_path / "g.npz", x=x, y=y, class_names=np.array(["a", "b", "c"]))
    ds = load_data(spec)
    assert ds.image_shape == (6, 6, 3) and ds.class_names == ["a", "b", "c"]
    assert np.array_equal(ds.x_train[..., 0], ds.x_train[..., 2])
    assert ds.y_train.ndim == 1


def test_npz_named_cifar10_gets_index_names(tmp_path):
    """No names guessed from the file name (tests/test_class_names.py: said once)."""
    spec = _write_npz(tmp_path / "my_cifar10.npz", x=_images(40), y=np.arange(40) % 10)
    assert load_data(spec).class_names == [str(i) for i in range(10)]


# --- folder and images -----------------------------------------------------------------


def test_folder_loader_mixed_formats(tmp_path):
    root = _write_folder(tmp_path / "imgs")
    ds = load_data(f"folder:{root}@16", seed=0)
    assert ds.class_names == ["cat", "dog"] and ds.image_shape == (16, 16, 3)
    assert len(ds.x_train) + len(ds.x_val) + len(ds.x_test) == 12
    assert load_data(f"folder:{root}").image_shape == (32, 32, 3)


def test_folder_skips_links_that_leave_it_with_one_warning(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TOOLKIT_CACHE_DIR", str(tmp_path / "cache"))
    root = _write_folder(tmp_path / "imgs")
    elsewhere = _write_folder(tmp_path / "elsewhere")
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\n")
    (root / "cat" / "outside.png").symlink_to(elsewhere / "cat" / "0_gray.png")
    (root / "cat" / "passwd.png").symlink_to(secret)
    (root / "dog" / "linked").symlink_to(elsewhere / "dog", target_is_directory=True)
    (root / "dog" / "inside.jpg").symlink_to(root / "cat" / "2.jpg")  # within: followed
    opened = []
    monkeypatch.setattr(
        decode_cache, "load_image", lambda f, s: opened.append(f) or load_image(f, s)
    )
    ds = load_data(f"folder:{root}")
    assert len(ds.y_train) + len(ds.y_val) + len(ds.y_test) == 13  # 12 files + the inner link
    assert not [f for f in opened if "secret" in str(f) or "elsewhere" in str(f)]
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"toolkit: warning: skipped 2 files in {root} that link out of {root}")
    assert "cat/outside.png" in err and "cat/passwd.png" in err and "\n" not in err


def test_folder_class_of_only_links_out_of_it_is_refused(tmp_path):
    root = _write_folder(tmp_path / "imgs")
    _write_folder(tmp_path / "elsewhere")
    (root / "bird").symlink_to(tmp_path / "elsewhere" / "cat", target_is_directory=True)
    with pytest.raises(UsageError, match="bird has no images .*only 6 links out of") as info:
        load_data(f"folder:{root}")
    assert "copies, not links" in str(info.value)


def test_load_image_modes(tmp_path):
    gray16 = (np.arange(20 * 30).reshape(20, 30, 1) * 100).astype(np.uint16)
    (tmp_path / "g16.png").write_bytes(tf.io.encode_png(gray16).numpy())
    rgb = _images(1, 24)[0]
    (tmp_path / "rgb.png").write_bytes(tf.io.encode_png(rgb).numpy())
    img = load_image(tmp_path / "g16.png", 12)
    assert img.shape == (12, 12, 3) and img.dtype == np.uint8
    assert np.array_equal(load_image(tmp_path / "rgb.png", 24), rgb)
    assert load_images([tmp_path / "rgb.png"] * 3, 8).shape == (3, 8, 8, 3)


@pytest.mark.parametrize(("height", "width", "size"), [(20, 30, 12), (7, 9, 32), (64, 64, 32)])
def test_load_image_resize_matches_tensorflow_within_a_grey_level(tmp_path, height, width, size):
    image = np.random.default_rng(height).integers(0, 256, (height, width, 3), dtype=np.uint8)
    (tmp_path / "x.png").write_bytes(tf.io.encode_png(image).numpy())
    resized = tf.image.resize(image, (size, size), method="bilinear", antialias=True)
    want = tf.cast(tf.clip_by_value(tf.round(resized), 0, 255), tf.uint8).numpy()
    got = load_image(tmp_path / "x.png", size)
    assert np.abs(got.astype(int) - want.astype(int)).max() <= 1


def test_corrupt_image_names_file(tmp_path):
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not an image at all")
    with pytest.raises(UsageError, match="bad.png"):
        load_image(bad, 32)


# --- errors ----------------------------------------------------------------------------


ERROR_CASES = {  # case -> (spec with {tmp} for the fixture folder, word the message must hold)
    "unknown kind": ("imagenet", "cifar10, cifar100, npz"),
    "npz no path": ("npz", "path"),
    "npz missing": ("npz:{tmp}/nope.npz", "not found"),
    "npz is dir": ("npz:{tmp}", "not a file"),
    "npz unreadable": ("npz:{tmp}/junk.npz", "cannot read"),
    "npz no x": ("npz:{tmp}/nox.npz", "no key 'x'"),
    "npz no y": ("npz:{tmp}/noy.npz", "no key 'y'"),
    "npz bad shape": ("npz:{tmp}/shape.npz", "shape"),
    "npz float x": ("npz:{tmp}/float.npz", "uint8"),
    "npz length": ("npz:{tmp}/length.npz", "labels"),
    "npz negative": ("npz:{tmp}/negative.npz", "negative"),
    "npz non-integer": ("npz:{tmp}/fraction.npz", "non-integer"),
    "npz few": ("npz:{tmp}/few.npz", "too few"),
    "folder no path": ("folder:", "path"),
    "folder missing": ("folder:{tmp}/nope", "not found"),
    "folder is file": ("folder:{tmp}/junk.npz", "not a folder"),
    "folder empty": ("folder:{tmp}/empty", "empty"),
    "folder flat": ("folder:{tmp}/flat", "no class subfolders"),
    "folder class no images": ("folder:{tmp}/noimg", "zebra has no images"),
    "folder few": ("folder:{tmp}/few", "too few"),
    "folder control char": ("folder:{tmp}/control", "class 1 name 'do\\tg' holds control"),
    "npz control char": ("npz:{tmp}/control.npz", "class 1 name 'do\\ng' holds control"),
    "npz blank name": ("npz:{tmp}/blank.npz", "class 1 name '  ' is blank"),
    "npz empty name": ("npz:{tmp}/empty_name.npz", "class 0 name '' is blank"),
    "npz repeated name": ("npz:{tmp}/twice.npz", "class 1 name 'cat' is class 0's too"),
    "folder bad size": ("folder:{tmp}/few@big", "positive integer"),
    "shapes zero": ("shapes:0", "positive integer"),
    "shapes text": ("shapes:many", "positive integer"),
    "cifar arg": ("cifar10:x", "no argument"),
}


@pytest.fixture(scope="module")
def error_dir(tmp_path_factory) -> Path:
    """Every bad npz file and folder the error cases point at."""
    tmp = tmp_path_factory.mktemp("errors")
    x, y = _images(20), np.arange(20) % 2
    _write_npz(tmp / "nox.npz", y=y)
    _write_npz(tmp / "noy.npz", x=x)
    _write_npz(tmp / "shape.npz", x=x[..., :2], y=y)
    _write_npz(tmp / "float.npz", x=x / 255.0, y=y)
    _write_npz(tmp / "length.npz", x=x, y=y[:-1])
    _write_npz(tmp / "negative.npz", x=x, y=y - 1)
    _write_npz(tmp / "fraction.npz", x=x, y=y + 0.5)
    _write_npz(tmp / "few.npz", x=x[:5], y=y[:5])
    (tmp / "junk.npz").write_bytes(b"garbage")
    (tmp / "empty").mkdir()
    (tmp / "flat").mkdir()
    (tmp / "flat" / "a.png").write_bytes(tf.io.encode_png(_images(1)[0]).numpy())
    _write_folder(tmp / "noimg", per_class=6)
    (tmp / "noimg" / "zebra").mkdir()
    _write_folder(tmp / "few", per_class=2)
    _write_folder(tmp / "control", per_class=6)
    (tmp / "control" / "dog").rename(tmp / "control" / "do\tg")
    _write_npz(tmp / "control.npz", x=x, y=y, class_names=np.array(["cat", "do\ng"]))
    _write_npz(tmp / "blank.npz", x=x, y=y, class_names=np.array(["cat", "  "]))
    _write_npz(tmp / "empty_name.npz", x=x, y=y, class_names=np.array(["", "dog"]))
    _write_npz(tmp / "twice.npz", x=x, y=y, class_names=np.array(["cat", "cat"]))
    return tmp


@pytest.mark.parametrize("spec, word", ERROR_CASES.values(), ids=list(ERROR_CASES))
def test_bad_specs_raise_usage_error(error_dir, spec, word):
    with pytest.raises(UsageError) as info:
        load_data(spec.format(tmp=error_dir))
    assert word in str(info.value)
    assert "\n" not in str(info.value)


def test_cifar10_offline_names_cache_folder(monkeypatch, tmp_path):
    def offline(*args, **kwargs):
        raise Exception(
            "URL fetch failure on https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz: "
            "None -- [Errno -2] Name or service not known"
        )

    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    monkeypatch.setattr(keras.datasets.cifar10, "load_data", offline)
    monkeypatch.setattr(keras.datasets.cifar100, "load_data", offline)
    for spec, archive in (("cifar10", "cifar-10-python.tar.gz"), ("cifar100", "cifar-100")):
        with pytest.raises(UsageError) as info:
            load_data(spec)
        message = str(info.value)
        assert f"{tmp_path / 'datasets'}/" in message and archive in message
        assert "npz:PATH" in message


def test_cifar_split_from_keras_arrays(monkeypatch):
    x = np.zeros((50_000, 2, 2, 3), np.uint8)
    y = (np.arange(50_000) % 10).astype(np.uint8).reshape(-1, 1)
    fake = (x, y), (x[:10_000], y[:10_000])
    monkeypatch.setattr(keras.datasets.cifar10, "load_data", lambda: fake)
    ds = load_data("cifar10")
    assert (len(ds.x_train), len(ds.x_val), len(ds.x_test)) == (40_000, 10_000, 10_000)
    assert ds.y_val[0] == 0 and ds.y_train.ndim == 1 and ds.class_names == CIFAR10_CLASSES
    x[:, 0, 0, :2] = np.stack([np.arange(50_000) % 256, np.arange(50_000) // 256], axis=1)
    held = load_data("cifar10", seed=1, val_fraction=0.04)  # a preset's share, stratified
    assert (len(held.y_train), len(held.y_val), len(held.y_test)) == (48_000, 2_000, 10_000)
    assert np.all(np.bincount(held.y_val) == 200)
    np.testing.assert_array_equal(held.x_val, load_data("cifar10", 1, 0.04).x_val)  # seeded
    assert not np.array_equal(held.x_val, load_data("cifar10", 2, 0.04).x_val)


@pytest.mark.parametrize("spec", ["shapes:1000", "npz", "folder-flat", "folder-split"])
def test_val_fraction_holds_that_share_of_the_non_test_images_out(tmp_path, spec):
    """A preset's val_fraction moves images between train and val only: test is the data's
    own (10% of a pool, or test/), and None keeps the data's split."""
    if spec == "npz":
        spec = _write_npz(tmp_path / "d.npz", x=_images(400), y=np.arange(400) % 4)
    elif spec.startswith("folder"):
        root = tmp_path / "data"
        for split, count in (("train", 50), ("test", 10)) if spec.endswith("split") else [("", 60)]:
            for j, label in enumerate(("a", "b")):
                folder = root / split / label
                folder.mkdir(parents=True)
                for i in range(count):
                    Image.new("RGB", (4, 4), (i, 3 * i, 7 + 100 * j)).save(folder / f"{i}.png")
        spec = f"folder:{root}@4"
    own = load_data(spec, seed=0)
    held = load_data(spec, seed=0, val_fraction=0.1)
    non_test = len(own.y_train) + len(own.y_val)
    assert len(held.y_test) == len(own.y_test)
    np.testing.assert_array_equal(held.x_test, own.x_test)
    assert len(held.y_train) + len(held.y_val) == non_test
    assert len(held.y_val) == pytest.approx(0.1 * non_test, abs=len(own.class_names))
    assert len(held.y_val) < len(own.y_val)  # 10% where the data's own split holds 11-20%
    assert set(held.y_val.tolist()) == set(range(len(own.class_names)))
    if not spec.startswith("shapes"):  # every image distinct: val and train disjoint
        seen = {x.tobytes() for x in held.x_train}
        assert not any(x.tobytes() in seen for x in held.x_val)


def test_check_labels():
    ds = load_data("shapes:100")
    check_labels(ds, 10)
    with pytest.raises(UsageError, match="found label 9 but the model has 5 classes"):
        check_labels(ds, 5)


# --- augmentation and pipelines --------------------------------------------------------


def test_augmentation_dict_round_trip():
    aug = Augmentation(flip=True, crop_resize=(52, 48), rotation=0.02, zoom=0.2, erasing=0.5)
    data = aug.to_dict()
    assert data["crop_resize"] == [52, 48]
    assert Augmentation.from_dict(data) == aug
    assert Augmentation.from_dict(Augmentation().to_dict()) == Augmentation()
    del data["erasing"]  # a run folder written before random erasing existed
    assert Augmentation.from_dict(data) == replace(aug, erasing=0.0)


@pytest.mark.parametrize(
    "aug",
    [
        Augmentation(flip=True),
        Augmentation(crop_resize=(52, 48)),
        Augmentation(rotation=0.02, zoom=0.2),
        Augmentation(flip=True, crop_resize=(52, 48), rotation=0.1, zoom=0.2),
        Augmentation(erasing=1.0),
        Augmentation(flip=True, pad_crop=4),
    ],
)
def test_augmentation_keeps_shape_dtype_range(aug):
    from toolkit.data.tf_augment import augment_fn

    images = tf.constant(_images(16, 32), tf.float32)
    out = augment_fn(aug, 32, seed=0)(images)
    assert out.shape == images.shape and out.dtype == tf.float32
    assert float(tf.reduce_min(out)) >= 0 and float(tf.reduce_max(out)) <= 255
    assert not np.array_equal(out.numpy(), images.numpy())


def test_flip_mirrors_some_images():
    from toolkit.data.tf_augment import augment_fn

    images = _images(32, 8).astype(np.float32)
    out = augment_fn(Augmentation(flip=True), 8, seed=0)(images).numpy()
    same = [np.array_equal(o, i) for o, i in zip(out, images, strict=True)]
    mirrored = [np.array_equal(o, i[:, ::-1]) for o, i in zip(out, images, strict=True)]
    assert all(s or m for s, m in zip(same, mirrored, strict=True))
    assert any(mirrored) and any(same)


def test_tf_pad_crop_is_a_shifted_window_drawn_per_image():
    from toolkit.data.pad_crop import reference_windows
    from toolkit.data.tf_augment import augment_fn

    images, padding = _images(24, 8).astype(np.float32), 2
    out = augment_fn(Augmentation(pad_crop=padding), 8, seed=0)(images).numpy()
    windows = reference_windows(out, images, padding)
    assert None not in windows  # the same crop as RandomAugment's (test_augment.py)
    assert len(set(windows)) > 4


def test_tf_erasing_erases_a_rectangle_of_about_its_probability_of_images():
    from toolkit.data.tf_augment import augment_fn

    images = _images(200, 16).astype(np.float32)
    out = augment_fn(Augmentation(erasing=0.5), 16, seed=0)(images).numpy()
    erased = (out != images).any(axis=-1)
    assert 70 <= erased.any(axis=(1, 2)).sum() <= 130
    for mask in erased[erased.any(axis=(1, 2))]:
        rows, cols = np.nonzero(mask)
        assert len(rows) == (np.ptp(rows) + 1) * (np.ptp(cols) + 1)  # one solid rectangle


def test_adding_erasing_keeps_the_other_augmentation_draws():
    from toolkit.data.tf_augment import augment_fn

    images, seed = _images(16, 16).astype(np.float32), tf.constant([3, 4])
    plain = augment_fn(Augmentation(flip=True, crop_resize=(20, 16)), 16)(images, seed=seed)
    erased = augment_fn(Augmentation(flip=True, crop_resize=(20, 16), erasing=1.0), 16)(
        images, seed=seed
    )
    kept = (erased.numpy() == plain.numpy()).all(axis=-1)
    assert kept.mean() > 0.5 and not kept.all()  # same flips and crops outside the rectangles


def test_train_pipeline_batches_and_reproducibility():
    x, y = _images(70, 16), np.arange(70) % 7
    aug = Augmentation(flip=True, crop_resize=(52, 48))
    ds = train_dataset(x, y, 32, aug, seed=5)
    batches = list(ds)
    assert [b[0].shape[0] for b in batches] == [32, 32, 6]
    images, labels = batches[0]
    assert images.shape[1:] == (16, 16, 3) and images.dtype == tf.float32
    assert labels.dtype == tf.int64
    second_epoch = list(ds)
    assert not np.array_equal(batches[0][1].numpy(), second_epoch[0][1].numpy())
    again = list(train_dataset(x, y, 32, aug, seed=5))
    assert all(
        np.array_equal(a[0].numpy(), b[0].numpy()) for a, b in zip(batches, again, strict=True)
    )
    assert sorted(np.concatenate([b[1].numpy() for b in batches])) == sorted(y)


@pytest.mark.parametrize(
    "aug",
    [Augmentation(), Augmentation(crop_resize=(20, 16)), Augmentation(rotation=0.02, zoom=0.2)],
)
def test_train_pipeline_keeps_the_static_image_size(aug):
    # a model without a Resizing layer (e.g. ViT at its input size) needs static H and W
    spec = train_dataset(_images(8, 16), np.arange(8) % 2, 4, aug, seed=0).element_spec[0]
    assert tuple(spec.shape) == (None, 16, 16, 3)


def test_eval_pipeline_keeps_order():
    x, y = _images(10, 4), np.arange(10)
    batches = list(eval_dataset(x, y, 4))
    assert [b[0].shape[0] for b in batches] == [4, 4, 2]
    assert np.array_equal(np.concatenate([b[1].numpy() for b in batches]), y)
    assert np.array_equal(batches[0][0].numpy(), x[:4].astype(np.float32))


# --- the shared real sample ------------------------------------------------------------


def test_shared_cifar10_sample():
    if not SAMPLE.is_file():
        pytest.skip(f"shared sample {SAMPLE} not present")
    ds = load_data(f"npz:{SAMPLE}", seed=0)
    total = len(ds.y_train) + len(ds.y_val) + len(ds.y_test)
    assert total == 5085 and ds.num_classes == 10
    assert ds.class_names == [str(i) for i in range(10)] and ds.image_shape == (32, 32, 3)
    assert set(np.unique(ds.y_test)) == set(range(10))


# -- images as a phone or a hostile file gives them ---------------------------------------------


def _exif_rotated_jpeg(path: Path, orientation: int = 6) -> np.ndarray:
    """A 32x32 JPEG whose Exif says Orientation=`orientation`; returns its pixels as stored
    (decoded without the Exif turn)."""
    pixels = np.zeros((32, 32, 3), np.uint8)
    pixels[:8, :, 0] = 255  # a red band along the top: where it ends up shows the turn
    pixels[:, :4, 2] = 255  # a blue band down the left
    exif = Image.Exif()
    exif[0x0112] = orientation  # Orientation
    Image.fromarray(pixels).save(path, quality=95, exif=exif)
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB"))


def _huge_png(path: Path, side: int = 30_000) -> None:
    """A PNG whose header says side x side pixels (no image data): what Pillow refuses to
    decode as a decompression bomb, read from the header alone."""
    import struct
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IEND", b""))


def test_an_exif_orientation_is_applied_as_browsers_apply_it(tmp_path):
    """Orientation=6 (turn 90 degrees clockwise to view): load_image returns the turned
    pixels, as the shipped web app's browser shows them; Orientation=1 leaves them."""
    stored = _exif_rotated_jpeg(tmp_path / "photo.jpg", 6)
    np.testing.assert_array_equal(load_image(tmp_path / "photo.jpg", 32), np.rot90(stored, k=-1))
    upright = _exif_rotated_jpeg(tmp_path / "upright.jpg", 1)
    np.testing.assert_array_equal(load_image(tmp_path / "upright.jpg", 32), upright)


def test_a_streamed_jpeg_with_exif_goes_to_pillow_not_the_fast_decoder(tmp_path):
    """The streamed folder's TF decoder ignores Exif: a JPEG carrying it is decoded by Pillow
    (which turns it upright); a plain JFIF JPEG, as Pillow and cameras-off write, stays fast."""
    from toolkit.data.tf_pipeline import _plain_jpeg

    _exif_rotated_jpeg(tmp_path / "photo.jpg", 6)
    Image.fromarray(np.zeros((32, 32, 3), np.uint8)).save(tmp_path / "plain.jpg")
    fast = {
        name: bool(_plain_jpeg(tf.constant((tmp_path / name).read_bytes()), 32))
        for name in ("photo.jpg", "plain.jpg")
    }
    assert fast == {"photo.jpg": False, "plain.jpg": True}


def test_a_decompression_bomb_is_one_line_and_skipped_in_a_folder(tmp_path, capsys):
    """A 30000x30000 PNG: load_image (predict) refuses it in one line; a folder dataset skips
    it with the undecodable images' warning instead of a traceback."""
    _huge_png(tmp_path / "huge.png")
    with pytest.raises(UsageError) as caught:
        load_image(tmp_path / "huge.png")
    message = str(caught.value)
    assert message.startswith(f"cannot decode image {tmp_path / 'huge.png'}: Image size (")
    assert "\n" not in message and message.endswith("pixels, or remove it")
    root = tmp_path / "folder"
    for name in ("a", "b"):
        (root / name).mkdir(parents=True)
        for i in range(6):
            Image.fromarray(np.full((32, 32, 3), 40 * i, np.uint8)).save(root / name / f"{i}.png")
    _huge_png(root / "a" / "huge.png")
    data = load_data(f"folder:{root}")
    assert len(data.y_train) + len(data.y_val) + len(data.y_test) == 12
    err = capsys.readouterr().err.strip()
    assert err.startswith("toolkit: warning: skipped 1 of 13 images") and "a/huge.png" in err
