"""Data layer: `--data` specs to Dataset, augmentation, and input pipelines per backend.

The pipelines and the `--data` loaders need Keras; they load on first use, so that image
decoding (`toolkit predict`) imports on a device with only numpy, pillow and the runtimes.
"""

from __future__ import annotations

import importlib

from toolkit.data.augment import Augmentation
from toolkit.data.dataset import Dataset, check_labels
from toolkit.data.images import load_image, load_images
from toolkit.data.stream import FolderImages, in_memory, stats_images, stream_errors

# name -> the module of this package that defines it, imported when the name is first used
_KERAS_BACKED = {
    "augments_in_pipeline": "input_pipeline",
    "eval_dataset": "input_pipeline",
    "train_dataset": "input_pipeline",
    "training_model": "input_pipeline",
    "DATA_KINDS": "specs",
    "load_data": "specs",
}

__all__ = [
    "DATA_KINDS",
    "Augmentation",
    "Dataset",
    "FolderImages",
    "augments_in_pipeline",
    "check_labels",
    "eval_dataset",
    "in_memory",
    "load_data",
    "load_image",
    "load_images",
    "stats_images",
    "stream_errors",
    "train_dataset",
    "training_model",
]


def __getattr__(name: str) -> object:
    """The Keras-backed names, imported from their module on first use (PEP 562)."""
    if name not in _KERAS_BACKED:
        raise AttributeError(f"module 'toolkit.data' has no attribute {name!r}")
    return getattr(importlib.import_module(f"toolkit.data.{_KERAS_BACKED[name]}"), name)
