"""The data a run is scored on: its own `--data` or a user-given spec, checked against the
run's classes (labels.txt) so that labels index the same class names the model learned.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from toolkit.common.errors import UsageError
from toolkit.data import Dataset, in_memory, load_data
from toolkit.runfiles.folder import CONFIG_FILE, LABELS_FILE, Run

PREVIEW = 4  # class names shown in a mismatch message
SPLITS = ("train", "val", "test")  # Dataset's x_/y_ attribute suffixes


def run_dataset(
    run: Run, spec: str | None = None, option: str | None = None
) -> tuple[Dataset, str]:
    """(dataset, spec) of `spec` (default: the run's data), split as the run split it (its
    seed and validation share); its classes unchecked, for images used without their labels
    (int8 calibration). `option`: the command's flag for other data, offered when the run's
    own data cannot be loaded (moved, deleted)."""
    if spec and spec != run.config.data:
        return load_data(spec, seed=run.seed, val_fraction=run.val_fraction), spec
    spec = run.config.data
    try:
        return load_data(spec, seed=run.seed, val_fraction=run.val_fraction), spec
    except UsageError as exc:  # the loader's way out names a --data the user never typed
        problem = str(exc).split(": ", 1)[0]
        way_out = f", or pass {option} with data of the run's classes" if option else ""
        raise UsageError(
            f"{problem} (the run's data, as {run.path / CONFIG_FILE} names it): put it back "
            f"there{way_out}"
        ) from None


def load_run_data(
    run: Run, spec: str | None = None, option: str | None = "--data"
) -> tuple[Dataset, str]:
    """(dataset, spec) of `spec` (default: the run's data), split with the run's seed.

    Its labels index the run's classes: data with the run's class names in another order (a
    folder's are sorted) is relabelled by name; other classes are a UsageError, as a label is
    an index and would be scored against the wrong names.
    """
    data, spec = run_dataset(run, spec, option)
    return match_class_names(run, data, spec), spec


def load_split(
    run: Run, split: str, spec: str | None = None, option: str | None = "--data"
) -> tuple[np.ndarray, np.ndarray, str]:
    """(images, labels, spec) of `split` (train, val or test) of the run's data or `spec`,
    checked as `load_run_data` checks it; images float32 0-255, as every runtime takes them.
    An empty split is a UsageError. `option`: as `run_dataset`'s (None: the command has none)."""
    if split not in SPLITS:
        raise ValueError(f"unknown split '{split}': one of {', '.join(SPLITS)}")
    data, spec = load_run_data(run, spec, option)
    images, labels = getattr(data, f"x_{split}"), np.asarray(getattr(data, f"y_{split}"))
    if len(labels) == 0:
        raise UsageError(f"data {spec} has an empty {split} split: use data with {split} images")
    images = in_memory(images, f"the {split} split of {spec}")  # a streamed folder's, decoded
    return images.astype(np.float32), labels, spec


def match_class_names(run: Run, data: Dataset, spec: str) -> Dataset:
    """`data` with labels indexing the run's classes: as is when its class names are the
    run's, relabelled when they are the same names in another order; else a UsageError."""
    expected, found = run.class_names, list(data.class_names)  # labels.txt checked there
    if found == expected:
        return data
    if sorted(found) == sorted(expected) and len(set(expected)) == len(expected):
        index = np.array([expected.index(name) for name in found], np.int64)  # data's -> run's
        relabelled = {f"y_{split}": index[getattr(data, f"y_{split}")] for split in SPLITS}
        return replace(data, class_names=list(expected), **relabelled)
    if len(found) != len(expected):
        detail = (
            f"{spec} has {len(found)} classes ({_preview(found)}) but the run has "
            f"{len(expected)} ({_preview(expected)})"
        )
    elif set(found) != set(expected):
        extra = [name for name in found if name not in expected]
        missing = [name for name in expected if name not in found]
        detail = f"{spec} has classes {_preview(extra)} where the run has {_preview(missing)}"
    else:  # the same names, some repeated: which is which is ambiguous
        i = next(i for i, (a, b) in enumerate(zip(found, expected, strict=True)) if a != b)
        detail = f"class {i} is '{found[i]}' in {spec} but '{expected[i]}' in the run"
    raise UsageError(f"{detail}: score the run on data with its classes ({run.path / LABELS_FILE})")


def _preview(names: list[str]) -> str:
    shown = ", ".join(names[:PREVIEW])
    return shown + (", ..." if len(names) > PREVIEW else "")
