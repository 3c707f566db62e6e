"""Streamed image folders: `FolderImages`, an array-like source that decodes images when a
batch asks for them, and the choice between it and the in-memory array.

A folder whose decoded images (N x SIZE x SIZE x 3 bytes) fit comfortably in memory is decoded
once into one uint8 array (and cached, `toolkit.data.decode_cache`); a larger one is streamed:
the Dataset holds file paths, and the input pipeline's threads decode each batch ahead of the
step (tf.data on TensorFlow, `toolkit.data.tf_pipeline`; the PyDataset's workers elsewhere,
`toolkit.data.array_pipeline`), so memory stays bounded by the batches queued, not the folder.
`folder:PATH[@SIZE],MODE` forces a mode (auto, memory, stream).

Every file's byte size and modification time are recorded when the folder is listed; a file
removed or rewritten while streaming is a UsageError naming it, raised before anything of the
run is written (`stream_errors` turns the pipeline's wrapped error back into it).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NoReturn

import numpy as np
from PIL import Image

from toolkit.common.errors import UsageError
from toolkit.data.images import load_image

AUTO, MEMORY, STREAM = "auto", "memory", "stream"
MODES = (AUTO, MEMORY, STREAM)
# In-memory loading holds a folder's images up to three times at its peak (the decoded list,
# the stacked array, the split copies): stream when one copy is over this share of MemAvailable.
MEMORY_SHARE = 0.25
# pipeline threads decoding batches (Pillow releases the GIL while decoding): 224 px JPEGs on 2
# cores, 1/2/4 threads ~3,000/4,600/4,500 img/s (records/README.md#stream-memory-epyc-2core);
# 4 costs nothing there and leaves room where there are more cores
STREAM_WORKERS = 4
LISTING_NOTE = 10_000  # files from which listing a folder prints a line first
STATS_SAMPLE = 2000  # streamed images the normalize statistics are computed on
GB = 1e9


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation (Linux MemAvailable), None if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


def choose_mode(mode: str, count: int, size: int, where: str) -> str:
    """MEMORY or STREAM for `count` images of SIZE x SIZE: `mode` itself unless AUTO, which
    streams when the decoded images are over MEMORY_SHARE of the available memory."""
    if mode != AUTO:
        return mode
    needed = count * size * size * 3
    available = available_memory()
    if available is None or needed <= MEMORY_SHARE * available:
        return MEMORY
    print(
        f"toolkit: streaming {where} from disk: its {count} images are {needed / GB:.1f} GB "
        f"decoded, over {MEMORY_SHARE:.0%} of the {available / GB:.1f} GB of available memory "
        f"(add ,memory to the folder spec to decode it into memory anyway)",
        file=sys.stderr,
        flush=True,
    )
    return STREAM


class FolderImages:
    """uint8 (N, SIZE, SIZE, 3) images of image files, decoded on indexing.

    Quacks like the in-memory array where the pipelines use one: `len`, `shape`, `dtype`,
    `ndim`, and `x[indices]` -> a decoded uint8 array. `subset(indices)` selects files without
    decoding them (the splits). A file whose size or modification time changed since listing
    is a UsageError; so is one that no longer decodes. The first such error is kept in
    `failure`, as a pipeline may hand its callers a wrapped copy.
    """

    dtype = np.dtype(np.uint8)
    ndim = 4
    workers = STREAM_WORKERS

    def __init__(
        self,
        root: Path,
        paths: Sequence[Path | str],
        size: int,
        stamps: np.ndarray | None = None,
    ) -> None:
        self.root = Path(root)
        self.paths = np.asarray([str(p) for p in paths], dtype=object)
        self.size = int(size)
        self.stamps = _stamps(self.paths) if stamps is None else np.asarray(stamps, np.int64)
        self.failure: UsageError | None = None

    def __len__(self) -> int:
        return len(self.paths)

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """(N, SIZE, SIZE, 3), as the decoded array's."""
        return (len(self.paths), self.size, self.size, 3)

    def subset(self, indices: np.ndarray | Sequence[int]) -> FolderImages:
        """The files at `indices`, in that order; nothing is decoded."""
        idx = np.asarray(indices, np.int64)
        return FolderImages(self.root, self.paths[idx], self.size, self.stamps[idx])

    def __getitem__(self, index: int | slice | np.ndarray | Sequence[int]) -> np.ndarray:
        if isinstance(index, (int, np.integer)):
            return self._decode(int(index))
        idx = np.arange(len(self))[index] if isinstance(index, slice) else np.asarray(index)
        if idx.dtype == bool:
            idx = np.flatnonzero(idx)
        out = np.empty((len(idx), self.size, self.size, 3), np.uint8)
        for row, i in enumerate(idx):
            out[row] = self._decode(int(i))
        return out

    def to_array(self, workers: int = STREAM_WORKERS) -> np.ndarray:
        """Every image decoded into one uint8 array (threads; Pillow releases the GIL)."""
        out = np.empty(self.shape, np.uint8)

        def one(i: int) -> None:
            out[i] = self._decode(i)

        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(one, range(len(self))))
        return out

    def check(self, indices: np.ndarray) -> np.ndarray:
        """`indices` themselves once every file there is as listed (else the UsageError):
        for a reader that decodes the files itself."""
        for i in np.asarray(indices).reshape(-1):
            self._checked(int(i))
        return indices

    def _checked(self, i: int) -> str:
        """File `i`'s path, once its size and modification time are still those listed."""
        path = self.paths[i]
        try:
            stat = os.stat(path)
            changed = (stat.st_size, stat.st_mtime_ns) != tuple(self.stamps[i])
            how = "rewritten"
        except OSError:
            changed, how = True, "removed"
        if changed:
            self._fail(
                UsageError(
                    f"folder {self.root} changed while streaming: {path} was {how} after it was "
                    "listed; leave the folder as it is while a command reads it, then rerun"
                )
            )
        return path

    def _decode(self, i: int) -> np.ndarray:
        path = self._checked(i)
        try:
            return load_image(path, self.size)
        except UsageError as e:
            self._fail(e)

    def _fail(self, error: UsageError) -> NoReturn:
        """Keep the first failure (a pipeline may wrap what it raises) and raise `error`."""
        self.failure = self.failure or error
        raise error

    def __getstate__(self) -> dict:
        return {**self.__dict__, "failure": None}  # picklable for worker processes


def _stamps(paths: np.ndarray) -> np.ndarray:
    """(N, 2) int64 byte size and modification time (ns) of every file."""
    stamps = np.zeros((len(paths), 2), np.int64)
    for i, path in enumerate(paths):
        stat = os.stat(path)
        stamps[i] = (stat.st_size, stat.st_mtime_ns)
    return stamps


def is_streamed(x: object) -> bool:
    """Whether `x` is decoded on indexing (a FolderImages), not an in-memory array."""
    return isinstance(x, FolderImages)


def select(x: np.ndarray | FolderImages, indices: np.ndarray) -> np.ndarray | FolderImages:
    """`x[indices]` for an array; the subset of files, not decoded, for a FolderImages."""
    return x.subset(indices) if is_streamed(x) else x[indices]


def stats_images(x: np.ndarray | FolderImages, seed: int = 0) -> np.ndarray:
    """The images normalize statistics are computed on: all of an in-memory array, or a
    seeded sample of STATS_SAMPLE images of a streamed one (said on stderr)."""
    if not is_streamed(x) or len(x) <= STATS_SAMPLE:
        return x if not is_streamed(x) else x.to_array()
    index = np.sort(np.random.default_rng(seed).choice(len(x), STATS_SAMPLE, replace=False))
    print(
        f"toolkit: normalize statistics from a seeded sample of {STATS_SAMPLE} of the "
        f"{len(x)} streamed training images",
        file=sys.stderr,
        flush=True,
    )
    return x.subset(index).to_array()


def in_memory(x: np.ndarray | FolderImages, what: str, bytes_per_pixel: int = 5) -> np.ndarray:
    """`x` as one array (decoded when streamed); a UsageError when `what` (its name in the
    message) would take over half the available memory at `bytes_per_pixel` (uint8 + float32)."""
    if not is_streamed(x):
        return x
    needed = int(np.prod(x.shape)) * bytes_per_pixel
    available = available_memory()
    if available is not None and needed > available / 2:
        raise UsageError(
            f"{what} is streamed and needs {needed / GB:.1f} GB decoded, over half the "
            f"{available / GB:.1f} GB of available memory: pass --data with a smaller folder"
        )
    return x.to_array()


@contextlib.contextmanager
def stream_errors(*sources: object) -> Iterator[None]:
    """Raise a streamed source's UsageError (a folder changed, an image no longer decodes)
    in place of whatever the pipeline wrapped it in (tf.data, for one)."""
    try:
        yield
    except UsageError:
        raise
    except Exception as e:
        failure = next((s.failure for s in sources if is_streamed(s) and s.failure), None)
        if failure is None:
            raise
        raise failure from e


def readable_headers(paths: Sequence[Path], workers: int = STREAM_WORKERS) -> np.ndarray:
    """Bool mask of the files Pillow recognises as images from their header (not decoded):
    what a streamed folder skips up front, as the in-memory path skips undecodable files."""

    def ok(path: Path) -> bool:
        try:
            with Image.open(path):
                return True
        except (OSError, ValueError, SyntaxError, Image.DecompressionBombError):
            return False

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return np.fromiter(pool.map(ok, paths, chunksize=64), bool, count=len(paths))


def stream_folder_images(
    root: Path, paths: list[Path], size: int
) -> tuple[FolderImages, np.ndarray]:
    """(FolderImages of the files that read as images, bool mask over `paths`): the streamed
    counterpart of `decode_folder_images`, which decodes them all."""
    if len(paths) >= LISTING_NOTE:  # ~13 s per 100,000 files on 2 cores: say what runs
        print(f"folder {root}: reading the headers of {len(paths):,} files", flush=True)
    ok = readable_headers(paths)
    return FolderImages(root, [p for p, good in zip(paths, ok, strict=True) if good], size), ok
