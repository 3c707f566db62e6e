"""Decoded image folders, cached: one array file per (file list, sizes, image size).

Decoding 60,000 JPEGs costs a minute in one thread; every command that reads a run's data
(train, eval, export's calibration, verify, bench) would pay it again. The first decode runs
on a thread pool (Pillow releases the GIL while decoding) and saves the uint8 array and the
mask of decodable files under the cache folder (`$TOOLKIT_CACHE_DIR`, default
`~/.cache/toolkit/images`); later loads read that file. The key hashes every file's path
relative to the folder and its byte size, and the image size: adding, removing, renaming or
rewriting (to a new size) any image makes a new entry. A cache that cannot be written is
skipped silently: it only saves time.
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from toolkit.common.errors import UsageError
from toolkit.data.images import load_image

CACHE_ENV = "TOOLKIT_CACHE_DIR"
VERSION = 2  # bump when decoding or resizing changes (2: Exif Orientation applied)


def cache_dir() -> Path:
    """The folder of decoded arrays: $TOOLKIT_CACHE_DIR or ~/.cache/toolkit/images."""
    base = os.environ.get(CACHE_ENV)
    return Path(base) if base else Path.home() / ".cache" / "toolkit" / "images"


def cache_key(root: Path, paths: list[Path], size: int) -> str:
    """sha256 of the image size and every file's relative path and byte size, in order."""
    digest = hashlib.sha256(f"v{VERSION} size={size}\n".encode())
    for path in paths:
        digest.update(f"{path.relative_to(root).as_posix()}\t{path.stat().st_size}\n".encode())
    return digest.hexdigest()[:32]


def decode_folder_images(
    root: Path, paths: list[Path], size: int, workers: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(N_ok, size, size, 3) uint8 images of the decodable `paths`, and a bool mask over `paths`.

    Reads the cached array when the same file list (paths and sizes) was decoded before.
    """
    key = cache_key(root, paths, size)
    file = cache_dir() / f"{key}.npz"
    if file.is_file():
        try:
            with np.load(file) as cached:
                return cached["x"], cached["ok"]
        except (OSError, ValueError, KeyError):
            pass  # a damaged entry is decoded again and replaced
    x, ok = _decode(paths, size, workers or min(8, (os.cpu_count() or 1) * 2))
    _save(file, x, ok)
    return x, ok


def _decode(paths: list[Path], size: int, workers: int) -> tuple[np.ndarray, np.ndarray]:
    def one(path: Path) -> np.ndarray | None:
        try:
            return load_image(path, size)
        except UsageError:  # unreadable or not an image
            return None

    with ThreadPoolExecutor(max_workers=workers) as pool:
        images = list(pool.map(one, paths, chunksize=64))
    ok = np.array([im is not None for im in images], bool)
    kept = [im for im in images if im is not None]
    x = np.stack(kept) if kept else np.zeros((0, size, size, 3), np.uint8)
    return x, ok


def _save(file: Path, x: np.ndarray, ok: np.ndarray) -> None:
    """Write the entry atomically; any failure leaves the cache as it was."""
    tmp = file.with_name(f".{file.name}.{os.getpid()}.tmp")
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as out:
            np.savez(out, x=x, ok=ok)
        os.replace(tmp, file)
    except OSError:
        tmp.unlink(missing_ok=True)
