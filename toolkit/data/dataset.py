"""The dataset every loader returns: uint8 NHWC RGB images and int64 labels, in memory (or
streamed from files, a `toolkit.data.stream.FolderImages`, for folders too large for it)."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from toolkit.common.errors import UsageError

if TYPE_CHECKING:
    from toolkit.data.stream import FolderImages


@dataclass
class Dataset:
    """Train/validation/test splits of uint8 (N, H, W, 3) RGB images with int64 labels."""

    name: str
    x_train: np.ndarray | FolderImages
    y_train: np.ndarray
    x_val: np.ndarray | FolderImages
    y_val: np.ndarray
    x_test: np.ndarray | FolderImages
    y_test: np.ndarray
    class_names: list[str]
    synthetic: bool = False

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """(H, W, 3) of every image."""
        return tuple(int(d) for d in self.x_train.shape[1:])

    @property
    def num_classes(self) -> int:
        """Number of classes, one per entry of `class_names`."""
        return len(self.class_names)


# Unicode categories of control characters and line/paragraph separators: labels.txt holds one
# class name per line, and str.splitlines() breaks a line at any of them.
CONTROL_CATEGORIES = ("Cc", "Zl", "Zp")


def check_class_name_characters(names: Sequence[str], where: str, fix: str) -> None:
    """UsageError naming the first class whose name holds a control character (a newline
    would split it across two lines of labels.txt), `where` it comes from and the `fix`."""
    for index, name in enumerate(names):
        bad = next((c for c in name if unicodedata.category(c) in CONTROL_CATEGORIES), None)
        if bad is not None:
            raise UsageError(
                f"{where}: class {index} name {name!r} holds control character "
                f"U+{ord(bad):04X}: {fix}"
            )


def check_stored_class_names(names: Sequence[str], where: str) -> None:
    """UsageError for class names a file stores (an npz's class_names) that cannot name
    classes: a control character, an empty or blank name (a blank line of labels.txt, a blank
    prediction), or one name twice (two classes no one can tell apart)."""
    fix = "store one distinct, non-blank name per class without line breaks or control characters"
    check_class_name_characters(names, where, fix)
    for index, name in enumerate(names):
        if not name.strip():
            raise UsageError(f"{where}: class {index} name {name!r} is blank: {fix}")
        if name in names[:index]:
            raise UsageError(
                f"{where}: class {index} name {name!r} is class {names.index(name)}'s too: {fix}"
            )


def check_labels(ds: Dataset, num_classes: int) -> None:
    """Raise UsageError when a label of `ds` does not fit a model with `num_classes` outputs."""
    splits = (ds.y_train, ds.y_val, ds.y_test)
    top = max((int(y.max()) for y in splits if y.size), default=-1)
    if top >= num_classes:
        raise UsageError(
            f"labels out of range: found label {top} but the model has {num_classes} classes; "
            f"build the model with at least {top + 1} classes or relabel the data"
        )
