"""Data layer: `--data` specs to Dataset, augmentation, and input pipelines per backend."""

from toolkit.data.augment import Augmentation
from toolkit.data.dataset import Dataset, check_labels
from toolkit.data.images import load_image, load_images
from toolkit.data.pipeline import (
    augments_in_pipeline,
    eval_dataset,
    train_dataset,
    training_model,
)
from toolkit.data.specs import DATA_KINDS, load_data

__all__ = [
    "DATA_KINDS",
    "Augmentation",
    "Dataset",
    "augments_in_pipeline",
    "check_labels",
    "eval_dataset",
    "load_data",
    "load_image",
    "load_images",
    "train_dataset",
    "training_model",
]
