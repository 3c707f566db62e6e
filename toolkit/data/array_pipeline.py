"""Backend-neutral input pipeline: batches gathered from the in-memory uint8 arrays by a
`keras.utils.PyDataset` whose worker threads prefetch while the step runs. Augmentation is
not done here but in the train step (`RandomAugment`), on the accelerator.

Every batch shape is compiled anew on JAX, so a training epoch is whole batches only: its
remainder (a different few samples each epoch) is dropped, unless there is less than one
batch. Under a keras.distribution (JAX `--strategy mirrored`) every batch must also split
evenly across the replicas: evaluation pads its last batch with copies weighted 0
(predictions for the copies are cut off by the caller, which knows how many images it passed).
A padded dataset gives weights with every batch, not only the padded one: Keras lays the data
out from the first batch's structure, and a multi-process run refuses a batch of another.

In a multi-process run (`--strategy multi-process`) every process draws the same seeded order
and feeds its own contiguous part of each global batch (process p of N: the p-th N-th), which
is what Keras' JAX trainer takes when it does not shard the data itself. Indexing `x` by an
index array is all the pipeline asks of it, so any array-like source works.
"""

from __future__ import annotations

import math

import keras
import numpy as np

from toolkit.data.mixing import Mixing, mix_batch

AUGMENTS = False  # the train step augments (RandomAugment)
WORKERS = 2  # threads gathering batches ahead of the step (numpy releases the GIL)
QUEUE = 8  # batches held ready


def replicas() -> int:
    """Devices the active keras.distribution splits a batch across (1 without one)."""
    distribution = keras.distribution.distribution()
    if distribution is None:
        return 1
    return int(np.prod(distribution.device_mesh.shape))


def shard() -> tuple[int, int]:
    """(this process's part, number of parts) of every global batch: (0, 1) in one process."""
    distribution = keras.distribution.distribution()
    if distribution is None:
        return 0, 1
    return int(distribution.data_shard_id), int(distribution.num_processes)


def epoch_order(seed: int, epoch: int, count: int, repeats: int = 1) -> np.ndarray:
    """The shuffled order of `count` images in `epoch` (seeded by seed and epoch); with repeated
    augmentation, 1 / repeats of the images, each `repeats` times in a row. The host pipelines
    and the device-resident index batches draw the same order from it."""
    order = np.random.default_rng([seed, epoch]).permutation(count)
    if repeats > 1:
        order = np.repeat(order[: -(-count // repeats)], repeats)[:count]
    return order


class ArrayBatches(keras.utils.PyDataset):
    """(float32 images 0-255, int32 labels[, weights]) batches of `x`, `y`.

    With a `shuffle_seed` (training): a new seeded order every epoch (the same stream for the
    same seed), whole batches only (or one batch of a multiple of `multiple` when there is
    less than a batch). Otherwise (evaluation): the stored order, the last batch padded to a
    multiple of `multiple` with 0-weight copies.
    """

    def __init__(
        self,
        x: np.ndarray,
        y: np.ndarray | None,
        batch_size: int,
        shuffle_seed: int | None = None,
        multiple: int = 1,
        part: tuple[int, int] = (0, 1),
        mix: Mixing | None = None,
        repeats: int = 1,
    ) -> None:
        workers = getattr(x, "workers", WORKERS)  # streamed images: more, as decoding blocks
        super().__init__(workers=workers, use_multiprocessing=False, max_queue_size=QUEUE)
        self.x = x
        self.y = None if y is None else np.asarray(y, np.int32).reshape(-1)
        self.batch_size = batch_size
        self.shuffle_seed = shuffle_seed
        self.multiple = multiple
        self.part = part
        self.mix = mix if mix is not None and mix.active else None
        self.repeats = max(repeats, 1)
        self.epoch = 0
        self.order = self._order()
        last = len(self.order) - (len(self) - 1) * batch_size  # the same size every epoch
        self.weighted = y is not None and last % multiple != 0  # (images, labels, weights)

    def _order(self) -> np.ndarray:
        if self.shuffle_seed is None:
            return np.arange(len(self.x))
        order = epoch_order(self.shuffle_seed, self.epoch, len(self.x), self.repeats)
        whole = self.batch_size if len(order) >= self.batch_size else self.multiple
        return order[: len(order) - len(order) % whole]

    def __len__(self) -> int:
        return math.ceil(len(self.order) / self.batch_size)

    def __getitem__(self, index: int) -> tuple[np.ndarray, ...]:
        if index >= len(self):
            raise IndexError(f"batch {index} of {len(self)}")
        idx = self.order[index * self.batch_size : (index + 1) * self.batch_size]
        pad = -len(idx) % self.multiple
        weights = np.ones(len(idx) + pad, np.float32)
        if pad:
            idx = np.concatenate([idx, np.full(pad, idx[-1])])
            weights[-pad:] = 0.0
        p, parts = self.part  # the same structure in every process: the pad is global
        size = len(idx) // parts
        idx, weights = idx[p * size : (p + 1) * size], weights[p * size : (p + 1) * size]
        images = self.x[idx].astype(np.float32)
        if self.y is None:
            return (images,)
        if self.weighted:  # every batch: one structure for the whole dataset
            return images, self.y[idx], weights
        if self.mix is not None:  # training only: each batch its own seeded draws
            rng = np.random.default_rng([self.shuffle_seed, self.epoch, index, p])
            return mix_batch(images, self.y[idx], self.mix, rng)
        return images, self.y[idx]

    def on_epoch_end(self) -> None:
        """Draw the next epoch's order (the workers are stopped by now)."""
        self.epoch += 1
        self.order = self._order()


def train_batches(
    x: np.ndarray,
    y: np.ndarray,
    batch_size: int,
    aug: object = None,
    seed: int = 0,
    mix: Mixing | None = None,
    repeats: int = 1,
) -> ArrayBatches:
    """Shuffled (seeded, new order each epoch) training batches; `aug` is applied in the step,
    `mix` (Mixup/CutMix, soft labels) here; `repeats` copies of each drawn image (consecutive)."""
    return ArrayBatches(
        x,
        y,
        batch_size,
        shuffle_seed=seed,
        multiple=replicas(),
        part=shard(),
        mix=mix,
        repeats=repeats,
    )


def eval_batches(x: np.ndarray, y: np.ndarray | None, batch_size: int) -> ArrayBatches:
    """Batches in the stored order; images only when `y` is None."""
    return ArrayBatches(x, y, batch_size, multiple=replicas(), part=shard())
