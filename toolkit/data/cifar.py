"""CIFAR-10 / CIFAR-100 through keras.datasets: first 40,000 train, last 10,000 validation, or
with a preset's `val_fraction` that share of the 50,000 held out (stratified, seeded)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import keras
import numpy as np

from toolkit.common.errors import UsageError
from toolkit.data.dataset import Dataset
from toolkit.data.split import carve_validation

NUM_TRAIN = 40_000

CIFAR10_CLASSES = [
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck",
]  # fmt: skip

CIFAR100_CLASSES = [
    "apple", "aquarium_fish", "baby", "bear", "beaver", "bed", "bee", "beetle", "bicycle",
    "bottle", "bowl", "boy", "bridge", "bus", "butterfly", "camel", "can", "castle",
    "caterpillar", "cattle", "chair", "chimpanzee", "clock", "cloud", "cockroach", "couch",
    "crab", "crocodile", "cup", "dinosaur", "dolphin", "elephant", "flatfish", "forest", "fox",
    "girl", "hamster", "house", "kangaroo", "keyboard", "lamp", "lawn_mower", "leopard", "lion",
    "lizard", "lobster", "man", "maple_tree", "motorcycle", "mountain", "mouse", "mushroom",
    "oak_tree", "orange", "orchid", "otter", "palm_tree", "pear", "pickup_truck", "pine_tree",
    "plain", "plate", "poppy", "porcupine", "possum", "rabbit", "raccoon", "ray", "road",
    "rocket", "rose", "sea", "seal", "shark", "shrew", "skunk", "skyscraper", "snail", "snake",
    "spider", "squirrel", "streetcar", "sunflower", "sweet_pepper", "table", "tank",
    "telephone", "television", "tiger", "tractor", "train", "trout", "tulip", "turtle", "wardrobe",
    "whale", "willow_tree", "wolf", "woman", "worm",
]  # fmt: skip


def keras_cache_dir() -> Path:
    """The folder keras.datasets downloads into: $KERAS_HOME/datasets or ~/.keras/datasets."""
    base = Path(os.environ.get("KERAS_HOME") or Path.home() / ".keras").expanduser()
    if not os.access(base, os.W_OK):
        base = Path("/tmp/.keras")  # keras.utils.get_file falls back here too
    return base / "datasets"


def load_cifar10(arg: str | None, seed: int = 0, val_fraction: float | None = None) -> Dataset:
    """CIFAR-10 with its 10 class names; `seed` splits only with a `val_fraction`."""
    return _load(
        "cifar10",
        arg,
        lambda: keras.datasets.cifar10.load_data(),
        CIFAR10_CLASSES,
        title="CIFAR-10",
        url="https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
        # keras 3 caches the tar.gz under this name (get_file fname without a dot + "_archive")
        archive="cifar-10-batches-py-target_archive",
        seed=seed,
        val_fraction=val_fraction,
    )


def load_cifar100(arg: str | None, seed: int = 0, val_fraction: float | None = None) -> Dataset:
    """CIFAR-100 fine labels with its 100 class names; `seed` splits only with a
    `val_fraction`."""
    return _load(
        "cifar100",
        arg,
        lambda: keras.datasets.cifar100.load_data(label_mode="fine"),
        CIFAR100_CLASSES,
        title="CIFAR-100",
        url="https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",
        archive="cifar-100-python-target_archive",
        seed=seed,
        val_fraction=val_fraction,
    )


def _load(
    name: str,
    arg: str | None,
    fetch: Callable[[], tuple],
    class_names: list[str],
    title: str,
    url: str,
    archive: str,
    seed: int = 0,
    val_fraction: float | None = None,
) -> Dataset:
    """Fetch through keras, turn any download failure into a UsageError naming the cache file."""
    if arg:
        raise UsageError(f"{name} takes no argument (got '{name}:{arg}'): use --data {name}")
    try:
        (x_train, y_train), (x_test, y_test) = fetch()
    except Exception as e:  # keras raises a bare Exception for URL fetch failures
        reason = " ".join(str(e).split(" -- ")[-1].split())[:120]
        folder = keras_cache_dir()
        raise UsageError(
            f"cannot download {title} (offline? {reason}): put {url.rsplit('/', 1)[-1]} "
            f"from {url} in {folder}/ renamed to {archive}, or use --data npz:PATH"
        ) from e
    y_train = np.asarray(y_train, np.int64).reshape(-1)
    y_test = np.asarray(y_test, np.int64).reshape(-1)
    if val_fraction is None:
        keep, carve = np.arange(NUM_TRAIN), np.arange(NUM_TRAIN, len(y_train))
    else:
        keep, carve = carve_validation(y_train, val_fraction, seed)
    return Dataset(
        name=name,
        x_train=x_train[keep],
        y_train=y_train[keep],
        x_val=x_train[carve],
        y_val=y_train[carve],
        x_test=x_test,
        y_test=y_test,
        class_names=list(class_names),
    )
