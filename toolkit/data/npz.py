"""`npz:PATH`: arrays x (N,H,W,3 or N,H,W uint8) and y (N,) labels, optional class_names."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import numpy as np

from toolkit.common.errors import UsageError
from toolkit.data.dataset import Dataset, check_stored_class_names
from toolkit.data.split import require_images, split_dataset

EXPECTED = "expected keys x (N,H,W,3 uint8) and y (N,) int labels"
_SAID: set[str] = set()  # npz files whose index names were said in this process


def load_npz(arg: str | None, seed: int = 0, val_fraction: float | None = None) -> Dataset:
    """Load an npz file and split it 80/10/10, stratified and seeded (`val_fraction`: see
    `toolkit.data.split.flat_fractions`)."""
    if not arg:
        raise UsageError(f"npz needs a path: use --data npz:PATH ({EXPECTED})")
    path = Path(arg).expanduser()
    if not path.exists():
        raise UsageError(f"npz file {path} not found: check the path in --data npz:PATH")
    if not path.is_file():
        raise UsageError(
            f"npz path {path} is not a file: pass an .npz file, or use --data folder:{path} "
            "for a folder of class subfolders"
        )
    if not zipfile.is_zipfile(path):
        raise UsageError(
            f"cannot read npz file {path}: not an npz (zip) archive; "
            f"write it with np.savez(path, x=x, y=y) ({EXPECTED})"
        )
    try:
        with np.load(path, allow_pickle=False) as data:
            keys = set(data.files)
            for key in ("x", "y"):
                if key not in keys:
                    raise UsageError(
                        f"npz file {path} has no key '{key}' (found {sorted(keys)}): {EXPECTED}"
                    )
            x, y = data["x"], data["y"]
            names = data["class_names"] if "class_names" in keys else None
    except UsageError:
        raise
    except (OSError, ValueError, EOFError, AttributeError, zipfile.BadZipFile) as e:
        reason = " ".join(str(e).split())[:120]
        raise UsageError(f"cannot read npz file {path} ({reason}): {EXPECTED}") from e
    x = _images(x, path)
    y = _labels(y, path)
    if len(x) != len(y):
        raise UsageError(
            f"npz file {path}: x has {len(x)} images but y has {len(y)} labels; "
            "they must have one label per image"
        )
    require_images(f"npz file {path}", len(x))
    names = _class_names(names, y, path)
    return split_dataset(path.stem, x, y, names, seed, val_fraction=val_fraction)


def _images(x: np.ndarray, path: Path) -> np.ndarray:
    """x as uint8 (N, H, W, 3); grayscale (N, H, W) or (N, H, W, 1) is repeated to RGB."""
    if x.ndim == 4 and x.shape[-1] == 1:
        x = x[..., 0]
    if x.ndim == 3:
        x = np.repeat(x[..., None], 3, axis=-1)
    if x.ndim != 4 or x.shape[-1] != 3 or min(x.shape) == 0:
        raise UsageError(f"npz file {path}: x has shape {x.shape}, {EXPECTED}")
    if x.dtype == np.uint8:
        return x
    ok = np.issubdtype(x.dtype, np.integer) or np.issubdtype(x.dtype, np.floating)
    if not ok or not np.all((x >= 0) & (x <= 255) & (x == np.round(x))):
        raise UsageError(
            f"npz file {path}: x ({x.dtype}) is not convertible to uint8 0-255 pixels; "
            "scale float images in [0, 1] by 255 and store x as uint8"
        )
    return x.astype(np.uint8)


def _labels(y: np.ndarray, path: Path) -> np.ndarray:
    """y as int64 (N,); (N, 1) is flattened; negative or non-integer labels are refused."""
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise UsageError(f"npz file {path}: y has shape {y.shape}, {EXPECTED}")
    numeric = np.issubdtype(y.dtype, np.integer) or np.issubdtype(y.dtype, np.floating)
    if not numeric or not np.all(np.isfinite(y) & (y == np.round(y))):
        raise UsageError(
            f"npz file {path}: y ({y.dtype}) holds non-integer labels; "
            "store class indices 0..K-1 as integers"
        )
    if y.size and y.min() < 0:
        raise UsageError(
            f"npz file {path}: y holds negative label {int(y.min())}; store class indices 0..K-1"
        )
    return y.astype(np.int64)


def _class_names(names: np.ndarray | None, y: np.ndarray, path: Path) -> list[str]:
    """Stored names, else "0".."K-1" (said once, never guessed from the file name).

    Without stored names every label 0..K-1 must have an image (UsageError otherwise).
    """
    k = int(y.max()) + 1 if y.size else 0
    if names is not None:
        names = [str(n) for n in np.asarray(names).reshape(-1)]
        if len(names) < k:
            raise UsageError(
                f"npz file {path}: class_names has {len(names)} names but labels go up to "
                f"{k - 1}; store one name per class"
            )
        check_stored_class_names(names, f"npz file {path}")
        return names
    missing = np.setdiff1d(np.arange(k), y)
    if missing.size:  # e.g. labels 1..10: without names, a gap is almost always a mistake
        shown = ", ".join(str(i) for i in missing[:5]) + (", ..." if missing.size > 5 else "")
        raise UsageError(
            f"npz file {path}: y has no image of {missing.size} of the labels 0..{k - 1} "
            f"({shown}), so the model would get {missing.size} classes it never sees: relabel "
            f"y to 0..{k - missing.size - 1}, or store class_names (one per index) to keep them"
        )
    say_index_names(path, k)
    return [str(i) for i in range(k)]


def say_index_names(path: Path, k: int) -> None:
    """Say, once per file and process, that an npz without class_names has classes 0..K-1 (its
    names are never guessed from its file name)."""
    key = str(path.resolve())
    if key in _SAID:
        return
    _SAID.add(key)
    print(
        f"toolkit: npz file {path} has no class_names: its {k} classes are named 0..{k - 1} "
        "(store class_names in it, one per index, to name them)",
        file=sys.stderr,
        flush=True,
    )
