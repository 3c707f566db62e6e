"""`folder:PATH[@SIZE]`: one subfolder of images per class, resized to SIZE x SIZE.

Hidden files and folders (a name starting with '.', e.g. `.ipynb_checkpoints/`) are skipped.
Images that cannot be read or decoded are skipped too, with one warning on stderr giving their
count and naming the first few; a class left with no image, or too few images overall, is an
error. The split is seeded on the images that remain.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from toolkit.data.dataset import Dataset
from toolkit.data.images import IMAGE_SUFFIXES, load_image
from toolkit.data.split import require_images, split_dataset
from toolkit.errors import UsageError

DEFAULT_SIZE = 32
LAYOUT = "expected PATH/<class_name>/<image>.png|jpg"
NAMED_BAD = 3  # undecodable files named in the warning


def load_folder(arg: str | None, seed: int = 0) -> Dataset:
    """Load class subfolders (sorted names = class names) and split them 80/10/10."""
    if not arg:
        raise UsageError(
            f"folder needs a path: use --data folder:PATH or folder:PATH@32 ({LAYOUT})"
        )
    path, size = _parse(arg)
    if not path.exists():
        raise UsageError(f"folder {path} not found: check the path in --data folder:PATH")
    if not path.is_dir():
        hint = f"use --data npz:{path}" if path.suffix == ".npz" else LAYOUT
        raise UsageError(f"folder path {path} is not a folder: {hint}")
    entries = [p for p in path.iterdir() if not p.name.startswith(".")]
    if not entries:
        raise UsageError(f"folder {path} is empty: {LAYOUT}")
    class_dirs = sorted((p for p in entries if p.is_dir()), key=lambda p: p.name)
    if not class_dirs:
        raise UsageError(
            f"folder {path} has no class subfolders: move the images into "
            f"{path}/<class_name>/ ({LAYOUT})"
        )
    paths: list[Path] = []
    labels: list[int] = []
    for label, class_dir in enumerate(class_dirs):
        files = _image_files(class_dir)
        if not files:
            raise UsageError(
                f"class folder {class_dir} has no images ({', '.join(IMAGE_SUFFIXES)}): "
                "add images or remove the folder"
            )
        paths += files
        labels += [label] * len(files)
    require_images(f"folder {path}", len(paths))  # before decoding anything
    x, y = _decode(path, paths, labels, size)
    for label, class_dir in enumerate(class_dirs):
        if not np.any(y == label):
            raise UsageError(
                f"class folder {class_dir} has no image that can be decoded: "
                "fix its images or remove the folder"
            )
    require_images(f"folder {path}", len(y))
    return split_dataset(path.name, x, y, [d.name for d in class_dirs], seed)


def _decode(
    root: Path, paths: list[Path], labels: list[int], size: int
) -> tuple[np.ndarray, np.ndarray]:
    """Decode every image; those that fail are skipped and reported in one warning."""
    images, kept, bad = [], [], []
    for file, label in zip(paths, labels, strict=True):
        try:
            images.append(load_image(file, size))
        except UsageError:  # unreadable or not an image
            bad.append(file)
            continue
        kept.append(label)
    if bad:
        named = ", ".join(str(p.relative_to(root)) for p in bad[:NAMED_BAD])
        more = f" and {len(bad) - NAMED_BAD} more" if len(bad) > NAMED_BAD else ""
        print(
            f"toolkit: warning: skipped {len(bad)} of {len(paths)} images in {root} that "
            f"cannot be read or decoded: {named}{more}",
            file=sys.stderr,
        )
    x = np.stack(images) if images else np.zeros((0, size, size, 3), np.uint8)
    return x, np.asarray(kept, np.int64)


def _parse(arg: str) -> tuple[Path, int]:
    """Split PATH@SIZE; an '@' belongs to the path when the whole argument is an existing path."""
    head, sep, tail = arg.rpartition("@")
    if not sep or Path(arg).expanduser().exists():
        return Path(arg).expanduser(), DEFAULT_SIZE
    if not tail.isdigit() or int(tail) <= 0:
        raise UsageError(
            f"folder image size '{tail}' is not a positive integer: use --data folder:PATH@32"
        )
    return Path(head).expanduser(), int(tail)


def _image_files(class_dir: Path) -> list[Path]:
    """Image files under `class_dir` (recursive, sorted), hidden files and folders skipped."""
    return sorted(
        p
        for p in class_dir.rglob("*")
        if p.suffix.lower() in IMAGE_SUFFIXES
        and not any(part.startswith(".") for part in p.relative_to(class_dir).parts)
        and p.is_file()
    )
