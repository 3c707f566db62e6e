"""`folder:` train/val/test layouts, the decoded-image cache, and the run's history.png."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from toolkit.common.errors import UsageError
from toolkit.data import decode_cache
from toolkit.data.folder import load_folder
from toolkit.training.history_plot import plot_history

CLASSES = ("cat", "dog", "ship")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv(decode_cache.CACHE_ENV, str(tmp_path / "cache"))


def _write(root: Path, split: str, per_class: int, classes=CLASSES) -> None:
    """`per_class` 8x8 PNGs per class whose red channel encodes (class, index)."""
    for label, name in enumerate(classes):
        folder = root / split / name
        folder.mkdir(parents=True)
        for i in range(per_class):
            pixels = np.full((8, 8, 3), (label * 50 + i, 0, 0), np.uint8)
            Image.fromarray(pixels).save(folder / f"{i:03d}.png")


def test_train_and_test_are_used_as_given_and_validation_is_carved_from_train(tmp_path):
    _write(tmp_path, "train", 10)
    _write(tmp_path, "test", 4)
    ds = load_folder(f"{tmp_path}@8", seed=0)
    assert ds.class_names == list(CLASSES)
    assert len(ds.x_test) == 12 and np.bincount(ds.y_test).tolist() == [4, 4, 4]
    # test images are exactly the test folder's: red values i < 4 of every class
    assert sorted(ds.x_test[:, 0, 0, 0] - ds.y_test * 50) == sorted([0, 1, 2, 3] * 3)
    # 20% of train, stratified: 2 of each class's 10; train and validation disjoint
    assert np.bincount(ds.y_val).tolist() == [2, 2, 2]
    assert np.bincount(ds.y_train).tolist() == [8, 8, 8]
    seen = {(int(y), int(x[0, 0, 0])) for x, y in zip(ds.x_train, ds.y_train, strict=True)}
    assert not seen & {(int(y), int(x[0, 0, 0])) for x, y in zip(ds.x_val, ds.y_val, strict=True)}
    again = load_folder(f"{tmp_path}@8", seed=0)
    assert np.array_equal(again.x_val, ds.x_val)  # seeded
    other = load_folder(f"{tmp_path}@8", seed=1)
    assert not np.array_equal(other.x_val, ds.x_val)


def test_a_val_folder_is_the_validation_split(tmp_path):
    _write(tmp_path, "train", 5)
    _write(tmp_path, "val", 3)
    _write(tmp_path, "test", 2)
    ds = load_folder(f"{tmp_path}@8")
    assert (len(ds.x_train), len(ds.x_val), len(ds.x_test)) == (15, 9, 6)


def test_splits_with_different_classes_are_refused_in_one_line(tmp_path):
    _write(tmp_path, "train", 5)
    _write(tmp_path, "test", 2, classes=("cat", "dog", "truck"))
    with pytest.raises(UsageError, match=r"test/ differ .* lacks ship and adds truck") as err:
        load_folder(str(tmp_path))
    assert "\n" not in str(err.value)


def test_train_without_test_is_refused(tmp_path):
    _write(tmp_path, "train", 5)
    with pytest.raises(UsageError, match="has train/ but no test/"):
        load_folder(str(tmp_path))


def test_decoded_images_are_cached_by_file_list_and_sizes(tmp_path, monkeypatch):
    _write(tmp_path / "data", "train", 5)
    _write(tmp_path / "data", "test", 2)
    first = load_folder(f"{tmp_path / 'data'}@8")
    assert len(list((tmp_path / "cache").glob("*.npz"))) == 2  # one entry per split

    def no_decoding(*_args, **_kwargs):
        raise AssertionError("decoded although cached")

    monkeypatch.setattr(decode_cache, "load_image", no_decoding)
    second = load_folder(f"{tmp_path / 'data'}@8")
    assert np.array_equal(first.x_train, second.x_train)
    # a rewritten image of another byte size is a new entry, decoded again
    image = tmp_path / "data" / "test" / "cat" / "000.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (8, 8, 3), np.uint8)).save(image)
    with pytest.raises(AssertionError, match="decoded although cached"):
        load_folder(f"{tmp_path / 'data'}@8")


def test_history_png_plots_every_epoch(tmp_path):
    csv = tmp_path / "history.csv"
    csv.write_text(
        "epoch,accuracy,loss,val_accuracy,val_loss\n0,0.3,1.9,0.35,1.7\n1,0.5,1.4,0.52,1.3\n"
    )
    assert plot_history(csv, tmp_path / "history.png", "shiftvit tiny")
    with Image.open(tmp_path / "history.png") as png:
        assert png.format == "PNG" and png.size[0] > 400
    empty = tmp_path / "empty.csv"
    empty.write_text("epoch,accuracy,loss\n")
    assert not plot_history(empty, tmp_path / "none.png", "x")
    assert not (tmp_path / "none.png").exists()
