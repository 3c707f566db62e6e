"""Streamed `folder:` data: the same images as the in-memory path, the choice by size and by
`,MODE`, a folder that changes while streaming, and training on a streamed folder."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from toolkit.cli.main import main
from toolkit.common.errors import UsageError
from toolkit.data import (
    Augmentation,
    augments_in_pipeline,
    decode_cache,
    eval_dataset,
    stream,
    stream_errors,
    train_dataset,
)
from toolkit.data.array_pipeline import ArrayBatches
from toolkit.data.folder import load_folder
from toolkit.data.images import load_image
from toolkit.data.stream import FolderImages, in_memory, stats_images
from toolkit.runfiles.data import SPLITS
from toolkit.runfiles.folder import CONFIG_FILE, METRICS_FILE, MODEL_FILE
from toolkit.training import train as train_module

CLASSES = ("cat", "dog", "ship")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv(decode_cache.CACHE_ENV, str(tmp_path / "cache"))


def _folder(root: Path, per_class: int = 12, size: int = 20, junk: bool = False) -> Path:
    """`root`/<class>/NNN.jpg|png: noise images of `size` px (JPEG and PNG, resized on load)."""
    rng = np.random.default_rng(0)
    for label, name in enumerate(CLASSES):
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            pixels = rng.integers(0, 256, (size, size + label, 3), np.uint8)
            suffix = ".jpg" if i % 2 else ".png"
            Image.fromarray(pixels).save(root / name / f"{i:03d}{suffix}")
    if junk:
        (root / CLASSES[0] / "notes.jpg").write_text("not an image")
    return root


def test_a_streamed_folder_gives_the_in_memory_images_and_labels(tmp_path, capsys):
    root = _folder(tmp_path / "data", junk=True)
    memory = load_folder(f"{root}@16,memory", seed=3)
    streamed = load_folder(f"{root}@16,stream", seed=3)
    warnings = capsys.readouterr().err.strip().splitlines()
    assert len(warnings) == 2 and all("notes.jpg" in line for line in warnings)  # both skip it
    assert isinstance(streamed.x_train, FolderImages)
    assert not isinstance(memory.x_train, FolderImages)
    assert streamed.class_names == memory.class_names
    for split in SPLITS:
        x_mem, x_str = getattr(memory, f"x_{split}"), getattr(streamed, f"x_{split}")
        assert x_str.shape == x_mem.shape and x_str.dtype == np.uint8
        np.testing.assert_array_equal(
            getattr(streamed, f"y_{split}"), getattr(memory, f"y_{split}")
        )
        np.testing.assert_array_equal(x_str[np.arange(len(x_str))], x_mem)
        np.testing.assert_array_equal(in_memory(x_str, split), x_mem)
    # what the pipeline gathers: the same batches, in the same seeded order
    for a, b in zip(ArrayBatches(memory.x_train, memory.y_train, 8, shuffle_seed=1),
                    ArrayBatches(streamed.x_train, streamed.y_train, 8, shuffle_seed=1),
                    strict=True):  # fmt: skip
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])


@pytest.mark.parametrize(
    "aug", [Augmentation(), Augmentation(flip=True, crop_resize=(20, 16), erasing=0.5)]
)
def test_on_tensorflow_a_streamed_folder_gives_the_in_memory_tf_data_batches(tmp_path, aug):
    root = _folder(tmp_path / "data")
    memory = load_folder(f"{root}@16,memory", seed=3)
    streamed = load_folder(f"{root}@16,stream", seed=3)
    assert augments_in_pipeline(streamed.x_train)  # tf.data augments it, not the step
    mem = train_dataset(memory.x_train, memory.y_train, 8, aug, seed=4)
    st = train_dataset(streamed.x_train, streamed.y_train, 8, aug, seed=4)
    assert isinstance(st, tf.data.Dataset) and len(st) == len(mem) == -(-len(memory.y_train) // 8)
    assert st.element_spec == mem.element_spec  # static (None, 16, 16, 3) float32, int64
    first_epochs = []
    for _ in range(2):  # a new seeded order each epoch, the same in both
        pairs = list(zip(mem, st, strict=True))
        for (mx, my), (sx, sy) in pairs:
            np.testing.assert_array_equal(sx.numpy(), mx.numpy())
            np.testing.assert_array_equal(sy.numpy(), my.numpy())
        first_epochs.append(pairs[0][1][1].numpy())
    assert not np.array_equal(*first_epochs)
    for (mx, my), (sx, sy) in zip(
        eval_dataset(memory.x_val, memory.y_val, 4),
        eval_dataset(streamed.x_val, streamed.y_val, 4),
        strict=True,
    ):
        np.testing.assert_array_equal(sx.numpy(), mx.numpy())
        np.testing.assert_array_equal(sy.numpy(), my.numpy())
    images = np.concatenate([b.numpy() for b in eval_dataset(streamed.x_test, None, 4)])
    np.testing.assert_array_equal(images, memory.x_test.astype(np.float32))


@pytest.mark.parametrize("mode", ["memory", "stream"])
@pytest.mark.parametrize("pipeline", ["train", "eval"])
def test_tf_data_pipelines_run_without_autotuning_and_give_autotunes_batches(
    tmp_path, mode, pipeline
):
    """Autotune's model thread stalled epochs idle (toolkit.data.tf_pipeline): every pipeline,
    in memory and streamed, runs with it off, and yields the batches it gives with it on."""
    data = load_folder(f"{_folder(tmp_path / 'data')}@16,{mode}", seed=3)
    aug = Augmentation(flip=True, crop_resize=(20, 16), erasing=0.5)

    def make() -> tf.data.Dataset:
        if pipeline == "train":
            return train_dataset(data.x_train, data.y_train, 8, aug, seed=4)
        return eval_dataset(data.x_val, data.y_val, 4)

    ours = make()
    assert ours.options().autotune.enabled is False
    autotune = tf.data.Options()
    autotune.autotune.enabled = True
    for (ox, oy), (tx, ty) in zip(ours, make().with_options(autotune), strict=True):
        np.testing.assert_array_equal(ox.numpy(), tx.numpy())
        np.testing.assert_array_equal(oy.numpy(), ty.numpy())


def _jpegs_at_size(root: Path, size: int = 16) -> None:
    """root/<class>/*: JPEGs already `size` px (every chroma subsampling, baseline and
    progressive, grey, CMYK) and a PNG."""
    rng = np.random.default_rng(1)
    for label, name in enumerate(CLASSES):
        (root / name).mkdir(parents=True)
        for sub in (0, 1, 2):
            for progressive in (False, True):
                pixels = rng.integers(0, 256, (size, size, 3), np.uint8)
                image = Image.fromarray(pixels)
                path = root / name / f"s{sub}p{int(progressive)}.jpg"
                image.save(path, quality=70 + 10 * label, subsampling=sub, progressive=progressive)
        image = Image.fromarray(rng.integers(0, 256, (size, size, 3), np.uint8))
        image.convert("L").save(root / name / "grey.jpg")
        image.convert("CMYK").save(root / name / "cmyk.jpg")
        image.save(root / name / "plain.png")


def test_jpegs_at_the_size_decode_in_tensorflow_to_pillows_pixels(tmp_path, monkeypatch):
    root = tmp_path / "data"
    _jpegs_at_size(root)
    memory = load_folder(f"{root}@16,memory", seed=2)
    streamed = load_folder(f"{root}@16,stream", seed=2)
    decoded_by_pillow = []
    monkeypatch.setattr(
        stream,
        "load_image",
        lambda path, size: decoded_by_pillow.append(path) or load_image(path, size),
    )
    for split in SPLITS:
        x_mem, x_str = getattr(memory, f"x_{split}"), getattr(streamed, f"x_{split}")
        batches = list(eval_dataset(x_str, None, 5))
        np.testing.assert_array_equal(np.concatenate(batches), x_mem.astype(np.float32))
    # only the grey and CMYK JPEGs and the PNGs went to Pillow: the rest TensorFlow decoded
    assert sorted({Path(p).name for p in decoded_by_pillow}) == [
        "cmyk.jpg",
        "grey.jpg",
        "plain.png",
    ]
    assert len(decoded_by_pillow) == 3 * len(CLASSES)


def test_a_truncated_jpeg_under_the_tf_data_pipeline_is_pillows_usage_error(tmp_path):
    root = tmp_path / "data"
    _jpegs_at_size(root)
    images = load_folder(f"{root}@16,stream").x_train
    path = Path(images.paths[2])
    data = path.read_bytes()
    stamp = path.stat()
    path.write_bytes(data[: len(data) // 2])  # the header still reads; the end marker is gone
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    images.stamps[2] = (len(data) // 2, stamp.st_mtime_ns)  # as if listed truncated
    with pytest.raises(UsageError, match=f"cannot decode image {path}"), stream_errors(images):
        list(eval_dataset(images, None, 4))


def test_a_file_removed_under_the_tf_data_pipeline_is_its_one_line_usage_error(tmp_path):
    root = _folder(tmp_path / "data")
    images = load_folder(f"{root}@16,stream").x_train
    labels = np.zeros(len(images), np.int64)
    Path(images.paths[3]).unlink()
    with pytest.raises(UsageError, match="changed while streaming") as caught:
        with stream_errors(images):
            list(train_dataset(images, labels, 4, Augmentation(flip=True), seed=0))
    assert f"{images.paths[3]} was removed" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_the_split_layout_streams_too(tmp_path):
    root = tmp_path / "data"
    _folder(root / "train")
    _folder(root / "test", per_class=4)
    memory = load_folder(f"{root}@16,memory")
    streamed = load_folder(f"{root}@16,stream")
    assert isinstance(streamed.x_val, FolderImages)
    for split in SPLITS:
        np.testing.assert_array_equal(
            in_memory(getattr(streamed, f"x_{split}"), split), getattr(memory, f"x_{split}")
        )


@pytest.mark.parametrize(
    ("available", "mode"),
    [(None, "memory"), (10**9, "memory"), (4 * 36 * 16 * 16 * 3, "memory"), (100_000, "stream")],
)
def test_auto_streams_when_the_decoded_folder_is_over_a_quarter_of_memory(
    tmp_path, monkeypatch, capsys, available, mode
):
    root = _folder(tmp_path / "data")  # 36 images, 16x16x3 bytes each decoded: 27,648 bytes
    monkeypatch.setattr(stream, "available_memory", lambda: available)
    for spec in (f"{root}@16", f"{root}@16,auto"):
        ds = load_folder(spec)
        assert isinstance(ds.x_train, FolderImages) == (mode == "stream")
    err = capsys.readouterr().err
    assert ("streaming folder" in err) == (mode == "stream")
    # a mode given is obeyed whatever the memory
    assert isinstance(load_folder(f"{root}@16,stream").x_train, FolderImages)
    assert not isinstance(load_folder(f"{root}@16,MEMORY").x_train, FolderImages)


def test_streaming_writes_no_decode_cache(tmp_path):
    root = _folder(tmp_path / "data")
    load_folder(f"{root}@16,stream")
    assert not (tmp_path / "cache").exists()
    load_folder(f"{root}@16,memory")
    assert len(list((tmp_path / "cache").glob("*.npz"))) == 1


def test_an_unknown_mode_is_refused_and_a_comma_in_an_existing_path_is_the_path(tmp_path):
    root = _folder(tmp_path / "data,stream")
    with pytest.raises(UsageError, match=r"unknown folder mode 'strem'.*auto, memory, stream"):
        load_folder(f"{root}@16,strem")
    assert len(load_folder(str(root)).x_train) > 0  # the folder named data,stream
    assert isinstance(load_folder(f"{root},stream").x_train, FolderImages)


def test_a_file_removed_or_rewritten_while_streaming_is_one_usage_error(tmp_path):
    root = _folder(tmp_path / "data")
    images = load_folder(f"{root}@16,stream").x_train
    first, second = Path(images.paths[0]), Path(images.paths[1])
    first.unlink()
    with pytest.raises(UsageError, match="changed while streaming") as caught:
        images[[1, 0]]
    assert f"{first} was removed" in str(caught.value) and "\n" not in str(caught.value)
    assert images.failure is caught.value
    stat = second.stat()
    os.utime(second, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    with pytest.raises(UsageError, match=f"{second} was rewritten"):
        images[1]


def test_normalize_statistics_of_a_streamed_set_come_from_a_seeded_sample(
    tmp_path, monkeypatch, capsys
):
    root = _folder(tmp_path / "data", per_class=20)
    images = load_folder(f"{root}@16,stream").x_train
    np.testing.assert_array_equal(stats_images(images), images.to_array())  # small: all of it
    monkeypatch.setattr(stream, "STATS_SAMPLE", 10)
    sample = stats_images(images, seed=1)
    assert sample.shape == (10, 16, 16, 3) and "seeded sample of 10" in capsys.readouterr().err
    np.testing.assert_array_equal(sample, stats_images(images, seed=1))
    assert not np.array_equal(sample, stats_images(images, seed=2))


def test_a_streamed_split_too_large_for_memory_is_refused_where_it_must_be_whole(
    tmp_path, monkeypatch
):
    images = load_folder(f"{_folder(tmp_path / 'data')}@16,stream").x_test
    monkeypatch.setattr(stream, "available_memory", lambda: 1000)
    with pytest.raises(UsageError, match="the test split of folder:X is streamed"):
        in_memory(images, "the test split of folder:X")


@pytest.mark.slow
def test_the_tiny_preset_trains_on_a_streamed_folder(tmp_path):
    root = _folder(tmp_path / "data", per_class=20)
    out = tmp_path / "run"
    argv = ["train", "--model", "vit", "--data", f"folder:{root}@16,stream", "--epochs", "1"]
    assert main([*argv, "--batch-size", "8", "--out", str(out)]) == 0
    assert (out / METRICS_FILE).is_file() and (out / MODEL_FILE).is_file()
    assert main(["eval", str(out)]) == 0  # the run's spec: streamed again


@pytest.mark.slow
def test_a_file_removed_while_training_stops_in_one_line_before_the_model_is_written(
    tmp_path, monkeypatch, capsys
):
    root = _folder(tmp_path / "data", per_class=20)
    load = train_module.load_data

    def load_then_remove(spec, seed=0, val_fraction=None):
        data = load(spec, seed, val_fraction)
        Path(data.x_train.paths[5]).unlink()  # listed, then gone before its batch
        return data

    monkeypatch.setattr(train_module, "load_data", load_then_remove)
    out = tmp_path / "run"
    argv = ["train", "--model", "shiftvit", "--data", f"folder:{root}@16,stream"]
    assert main([*argv, "--epochs", "1", "--batch-size", "8", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("toolkit: error: folder") and "changed while streaming" in err[-1]
    assert "was removed after it was listed" in err[-1]
    assert (out / CONFIG_FILE).is_file()  # the run folder can be resumed ...
    assert not (out / MODEL_FILE).exists() and not (out / METRICS_FILE).exists()  # ... unfinished
