"""`folder:PATH[@SIZE][,MODE]`: class subfolders of images, resized to SIZE x SIZE.

Two layouts, those of torchvision's ImageFolder and Ultralytics' classification datasets:
- flat: `PATH/<class>/<image>`, split 80/10/10 (stratified, seeded; a preset's
  `val_fraction` keeps 10% for test and holds that share of the rest out for validation);
- split: `PATH/train/<class>/...` and `PATH/test/<class>/...`, used as given, with
  `PATH/val/<class>/...` as the validation split when it exists, else 20% of train carved
  out (stratified, seeded: 10,000 of CIFAR-10's 50,000, as the keras.io examples do), or the
  preset's `val_fraction` of it. Every split must have the same class folders.

SIZE is at most MAX_SIZE (4096): a larger side is refused before anything is read.

Hidden files and folders (a name starting with '.', e.g. `.ipynb_checkpoints/`) are skipped,
with one warning on stderr per kind (hidden class folders, hidden images) giving their count.
Images that cannot be read or decoded are skipped too, with one warning on stderr giving their
count and naming the first few; a class left with no image, or too few images overall, is an
error. Decoded images are cached (see `toolkit.data.decode_cache`), so only the first command
on a folder pays for decoding.

A folder too large for memory is streamed instead (`toolkit.data.stream`): the pipeline decodes
each batch from the files. MODE forces the choice: `memory`, `stream`, or `auto` (the default:
by the decoded size against the available memory). A streamed folder skips the files whose
header is not an image's; a file that fails later, or changes, stops the command in one line.

Symbolic links that lead out of PATH (data from elsewhere, e.g. a link to /etc/passwd named
x.png) are skipped before anything opens them, with one warning giving their count; links
within PATH are followed. Class folder names with control characters are refused: labels.txt
holds one class name per line.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

from toolkit.common.errors import UsageError
from toolkit.data.dataset import Dataset, check_class_name_characters
from toolkit.data.decode_cache import decode_folder_images
from toolkit.data.images import IMAGE_SUFFIXES
from toolkit.data.split import carve_validation, require_images, split_dataset
from toolkit.data.stream import (
    AUTO,
    MEMORY,
    MODES,
    STREAM,
    choose_mode,
    select,
    stream_folder_images,
)

DEFAULT_SIZE = 32
# the largest SIZE of folder:PATH@SIZE: one 4096x4096 RGB image is 50 MB decoded, a batch of
# them gigabytes; a larger side is a typo (an extra zero), and would stall decoding for minutes
MAX_SIZE = 4096
LAYOUT = "expected PATH/<class_name>/<image>.png|jpg"
NAMED_BAD = 3  # undecodable files named in the warning
TRAIN, VAL, TEST = "train", "val", "test"
VAL_FRACTION = 0.2  # of train, when there is no val/ folder
# mode -> (root, paths, size) -> (images of the decodable paths, bool mask over the paths)
DECODERS = {MEMORY: decode_folder_images, STREAM: stream_folder_images}


def load_folder(arg: str | None, seed: int = 0, val_fraction: float | None = None) -> Dataset:
    """Load a flat or train/test folder (sorted subfolder names = class names) and split it;
    `val_fraction`: the share of the non-test images held out for validation (None: 80/10/10
    or 20% of train/, as above), unless a val/ folder gives the split."""
    if not arg:
        raise UsageError(
            f"folder needs a path: use --data folder:PATH or folder:PATH@32 ({LAYOUT})"
        )
    path, size, mode = _parse(arg)
    if not path.exists():
        raise UsageError(f"folder {path} not found: check the path in --data folder:PATH")
    if not path.is_dir():
        hint = f"use --data npz:{path}" if path.suffix == ".npz" else LAYOUT
        raise UsageError(f"folder path {path} is not a folder: {hint}")
    if (path / TRAIN).is_dir():
        return _load_split_layout(path, size, mode, seed, val_fraction)
    class_names, paths, labels = _class_files(path, path)
    require_images(f"folder {path}", len(paths))  # before decoding anything
    mode = choose_mode(mode, len(paths), size, f"folder {path}")
    x, y = _decode(path, paths, labels, class_names, size, mode)
    require_images(f"folder {path}", len(y))
    return split_dataset(path.name, x, y, class_names, seed, val_fraction=val_fraction)


def _load_split_layout(
    path: Path, size: int, mode: str, seed: int, val_fraction: float | None
) -> Dataset:
    """train/ and test/ as given; val/ when present, else `val_fraction` (default 20%) of
    train, stratified."""
    if not (path / TEST).is_dir():
        raise UsageError(
            f"folder {path} has {TRAIN}/ but no {TEST}/: add {path}/{TEST}/<class_name>/ "
            f"images, or move the class folders up to {path}/ for an 80/10/10 split"
        )
    names = [TRAIN, TEST] + ([VAL] if (path / VAL).is_dir() else [])
    found = {name: _class_files(path / name, path) for name in names}
    class_names = found[TRAIN][0]
    for name in names[1:]:
        if found[name][0] != class_names:
            raise UsageError(_class_mismatch(path, name, class_names, found[name][0]))
    mode = choose_mode(mode, sum(len(found[n][1]) for n in names), size, f"folder {path}")
    splits = {
        name: _decode(path / name, *found[name][1:], class_names, size, mode) for name in names
    }
    x_train, y_train = splits[TRAIN]
    if VAL in splits:
        x_val, y_val = splits[VAL]
    else:
        fraction = VAL_FRACTION if val_fraction is None else val_fraction
        keep, carve = carve_validation(y_train, fraction, seed)
        (x_train, y_train), (x_val, y_val) = (
            (select(x_train, keep), y_train[keep]),
            (select(x_train, carve), y_train[carve]),
        )
    x_test, y_test = splits[TEST]
    return Dataset(path.name, x_train, y_train, x_val, y_val, x_test, y_test, class_names)


def _class_mismatch(path: Path, split: str, expected: list[str], got: list[str]) -> str:
    missing = sorted(set(expected) - set(got))
    extra = sorted(set(got) - set(expected))
    parts = [
        f"lacks {', '.join(missing)}" if missing else "",
        f"adds {', '.join(extra)}" if extra else "",
    ]
    what = " and ".join(p for p in parts if p)
    return (
        f"class folders of {path}/{split}/ differ from {path}/{TRAIN}/: it {what}; "
        "every split needs the same class folders"
    )


def _class_files(root: Path, base: Path) -> tuple[list[str], list[Path], list[int]]:
    """(class names, image paths, labels) of `root`/<class>/ folders, checked before decoding;
    images whose links lead out of `base` (the --data folder) are skipped with one warning."""
    every = list(root.iterdir())
    entries = [p for p in every if not _hidden(p.name)]
    hidden_dirs = sorted(p for p in every if _hidden(p.name) and p.is_dir())
    if hidden_dirs:  # a class folder renamed `.cat` would vanish unnoticed
        what = f"{len(hidden_dirs)} hidden class folders in {root} (names starting with '.')"
        _warn_skipped(root, hidden_dirs, what, " (rename them without the '.' to use them)")
    if not entries:
        raise UsageError(f"folder {root} is empty: {LAYOUT}")
    class_dirs = sorted((p for p in entries if p.is_dir()), key=lambda p: p.name)
    if not class_dirs:
        raise UsageError(
            f"folder {root} has no class subfolders: move the images into "
            f"{root}/<class_name>/ ({LAYOUT})"
        )
    check_class_name_characters(
        [d.name for d in class_dirs],
        f"folder {root}",
        "rename the class folder without line breaks or control characters",
    )
    inside = _Inside(base)
    paths: list[Path] = []
    labels: list[int] = []
    outside: list[Path] = []
    hidden: list[Path] = []
    for label, class_dir in enumerate(class_dirs):
        files, hidden_files = _image_files(class_dir)
        hidden += hidden_files
        stays = [inside(p) for p in files]
        kept = [p for p, ok in zip(files, stays, strict=True) if ok]
        outside += [p for p, ok in zip(files, stays, strict=True) if not ok]
        if not kept:
            left = f", only {len(files)} links out of {base}" if files else ""
            raise UsageError(
                f"class folder {class_dir} has no images ({', '.join(IMAGE_SUFFIXES)}{left}): "
                f"add images{' (copies, not links)' if files else ''} or remove the folder"
            )
        paths += kept
        labels += [label] * len(kept)
    if hidden:
        what = f"{len(hidden)} hidden images in {root} (a name or folder starting with '.')"
        _warn_skipped(root, hidden, what, " (rename them without the '.' to use them)")
    if outside:
        _warn_skipped(
            root,
            outside,
            f"{len(outside)} files in {root} that link out of {base}",
            f" (copy them into {base} to use them)",
        )
    return [d.name for d in class_dirs], paths, labels


def _warn_skipped(root: Path, skipped: list[Path], what: str, way_out: str = "") -> None:
    """One warning line: `skipped WHAT: the first NAMED_BAD of them and N more WAY_OUT`."""
    named = ", ".join(str(p.relative_to(root)) for p in skipped[:NAMED_BAD])
    more = f" and {len(skipped) - NAMED_BAD} more" if len(skipped) > NAMED_BAD else ""
    print(f"toolkit: warning: skipped {what}: {named}{more}{way_out}", file=sys.stderr)


class _Inside:
    """Whether a path found under `base` resolves into it (links followed): each folder is
    resolved once, and a file itself only when it is a link."""

    def __init__(self, base: Path) -> None:
        self.base = Path(os.path.realpath(base))
        self.folders: dict[Path, bool] = {}

    def __call__(self, path: Path) -> bool:
        """True when `path` and every link on the way to it stay inside the base folder."""
        if path.is_symlink():
            return Path(os.path.realpath(path)).is_relative_to(self.base)
        folder = path.parent
        if folder not in self.folders:
            self.folders[folder] = Path(os.path.realpath(folder)).is_relative_to(self.base)
        return self.folders[folder]


def _decode(
    root: Path,
    paths: list[Path],
    labels: list[int],
    class_names: list[str],
    size: int,
    mode: str = MEMORY,
) -> tuple[np.ndarray, np.ndarray]:
    """Decode every image (cached), or list them for streaming (`mode`); those that fail are
    skipped and reported in one warning."""
    x, ok = DECODERS[mode](root, paths, size)
    y = np.asarray(labels, np.int64)[ok]
    bad = [p for p, good in zip(paths, ok, strict=True) if not good]
    if bad:
        what = f"{len(bad)} of {len(paths)} images in {root} that cannot be read or decoded"
        _warn_skipped(root, bad, what)
    for label, name in enumerate(class_names):
        if not np.any(y == label):
            raise UsageError(
                f"class folder {root / name} has no image that can be decoded: "
                "fix its images or remove the folder"
            )
    return x, y


def _parse(arg: str) -> tuple[Path, int, str]:
    """Split PATH@SIZE,MODE; an '@' or ',' belongs to the path when the whole argument (before
    the mode) is an existing path."""
    if Path(arg).expanduser().exists():
        return Path(arg).expanduser(), DEFAULT_SIZE, AUTO
    head, sep, tail = arg.rpartition(",")
    if not sep or "/" in tail:
        return (*_parse_size(arg), AUTO)
    if tail.strip().lower() not in MODES:
        raise UsageError(
            f"unknown folder mode '{tail}': use --data folder:PATH@SIZE,MODE with MODE one of "
            f"{', '.join(MODES)}"
        )
    return (*_parse_size(head), tail.strip().lower())


def _parse_size(arg: str) -> tuple[Path, int]:
    """Split PATH@SIZE; an '@' belongs to the path when the whole argument is an existing path."""
    head, sep, tail = arg.rpartition("@")
    if not sep or Path(arg).expanduser().exists():
        return Path(arg).expanduser(), DEFAULT_SIZE
    if not tail.isdigit() or int(tail) <= 0:
        raise UsageError(
            f"folder image size '{tail}' is not a positive integer: use --data folder:PATH@32"
        )
    size = int(tail)
    if size > MAX_SIZE:
        raise UsageError(
            f"folder image size {size} is too large ({size}x{size} RGB is "
            f"{size * size * 3 / 1e9:.1f} GB per decoded image): use at most {MAX_SIZE}, e.g. "
            f"--data folder:{head}@224"
        )
    return Path(head).expanduser(), size


def _hidden(name: str) -> bool:
    """Whether a file or folder name is hidden (starts with '.'): skipped, with a warning."""
    return name.startswith(".")


def _image_files(class_dir: Path) -> tuple[list[Path], list[Path]]:
    """(image files, hidden image files) under `class_dir` (recursive, sorted): an image is
    hidden when its name or a folder on its way from `class_dir` starts with '.'."""
    images = sorted(
        p for p in class_dir.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file()
    )
    hidden = {p for p in images if any(map(_hidden, p.relative_to(class_dir).parts))}
    return [p for p in images if p not in hidden], [p for p in images if p in hidden]
