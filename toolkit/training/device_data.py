"""Device-resident training: the uint8 training split uploaded to the device once, and each
step fed only the indices of its batch.

The train step gathers its images and labels on the device, augments them there
(`RandomAugment`: crop, flip, the augment policy, erasing), mixes them there (Mixup/CutMix,
`toolkit.data.mix_ops`) and trains, all inside the one compiled step: no image crosses from
the host after the upload and nothing waits on the host per step. The host pipelines
(`toolkit.data.input_pipeline`) move every batch's float32 pixels and augment or mix them on host
cores; on a GPU they, not the model, set the pace (records/notes/gpu.md).

`DeviceResidentTrainer` wraps the model `toolkit train` saves: its call takes int32 indices
(training) or float images (validation); its loss and metrics read the targets the step made.
The stored split is two non-trainable variables that checkpoints leave out (`stored`).
"""

from __future__ import annotations

import math

import keras
import numpy as np
from keras import ops

from toolkit.common.errors import UsageError
from toolkit.data.array_pipeline import epoch_order
from toolkit.data.augment import Augmentation
from toolkit.data.mix_ops import apply_mix, draw_mix
from toolkit.data.mixing import Mixing

STORE_NAMES = ("device_images", "device_labels")  # the split's variables: never checkpointed
MODES = ("auto", "on", "off")  # --device-data
HEADROOM = 0.5  # share of the device's memory the stored split may take (the rest: the step)


def stored(variable: keras.Variable) -> bool:
    """Whether `variable` holds the uploaded split (no training state: checkpoints skip it)."""
    return variable.name in STORE_NAMES


# backends whose host pipeline keeps an epoch's last, smaller batch (tf.data); the others drop
# it (toolkit.data.array_pipeline: JAX compiles the step anew for every batch shape)
KEEPS_REMAINDER = frozenset({"tensorflow"})


class IndexBatches(keras.utils.PyDataset):
    """(int32 indices,) of each training batch, in the host pipelines' order: a new seeded
    permutation every epoch, `repeats` consecutive copies of each drawn image (repeated
    augmentation); the epoch's last, smaller batch kept or dropped as the backend's host
    pipeline does (`remainder`: default KEEPS_REMAINDER), so both paths take the same steps."""

    def __init__(
        self,
        count: int,
        batch_size: int,
        seed: int,
        repeats: int = 1,
        remainder: bool | None = None,
    ) -> None:
        super().__init__(workers=1, use_multiprocessing=False)
        self.count, self.batch_size, self.seed = count, batch_size, seed
        self.repeats = max(repeats, 1)
        if remainder is None:
            remainder = keras.backend.backend() in KEEPS_REMAINDER
        self.remainder = remainder
        self.epoch = 0
        self.order = self._order()

    def _order(self) -> np.ndarray:
        order = epoch_order(self.seed, self.epoch, self.count, self.repeats)
        if not self.remainder:  # whole batches (one smaller when the split is)
            whole = min(self.batch_size, len(order))
            order = order[: len(order) - len(order) % whole]
        return order.astype(np.int32)

    def __len__(self) -> int:
        return math.ceil(len(self.order) / self.batch_size)

    def __getitem__(self, index: int) -> tuple[np.ndarray]:
        if index >= len(self):
            raise IndexError(f"batch {index} of {len(self)}")
        return (self.order[index * self.batch_size : (index + 1) * self.batch_size],)

    def on_epoch_end(self) -> None:
        """Draw the next epoch's order."""
        self.epoch += 1
        self.order = self._order()


class DeviceResidentTrainer(keras.Model):
    """What `fit` trains in the device-resident path: `model` behind an on-device gather,
    augmentation and mix. Indices in: {"logits", "targets"} out (targets: the batch's labels;
    one-hot rows, mixed in training, when `mix` is on); float images in (validation): the
    model's logits."""

    def __init__(
        self,
        model: keras.Model,
        images: np.ndarray,
        labels: np.ndarray,
        num_classes: int,
        augment: keras.layers.Layer | None = None,
        mix: Mixing | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__(name=f"{model.name}_device")
        self.model = model
        self.augment = augment
        self.mix = mix if mix is not None and mix.active else None
        self.num_classes = int(num_classes)
        self.images = keras.Variable(
            np.asarray(images, np.uint8), dtype="uint8", trainable=False, name=STORE_NAMES[0]
        )
        self.labels = keras.Variable(
            np.asarray(labels, np.int32).reshape(-1),
            dtype="int32",
            trainable=False,
            name=STORE_NAMES[1],
        )
        self.mix_seed = keras.random.SeedGenerator(seed + 1)

    def call(self, inputs, training: bool = False):
        """Gather, augment, mix and classify a batch of indices; classify float images."""
        if not keras.backend.standardize_dtype(inputs.dtype).startswith("int"):
            return self.model(inputs, training=training)
        images = ops.cast(ops.take(self.images, inputs, axis=0), "float32")
        targets = ops.take(self.labels, inputs, axis=0)
        if self.augment is not None:
            images = self.augment(images, training=training)
        if self.mix is not None:  # soft targets, also when Keras builds the loss (no training)
            targets = ops.one_hot(targets, self.num_classes, dtype="float32")
        if self.mix is not None and training:
            draws = draw_mix(self.mix, ops.shape(images)[0], self.mix_seed)
            images, targets = apply_mix(images, targets, draws)
        return {"logits": self.model(images, training=training), "targets": targets}

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The compiled loss of the step's targets (indices in) or of `y` (images in)."""
        y, y_pred = _targets(y, y_pred)
        return super().compute_loss(x, y, y_pred, sample_weight, training=training)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        """The compiled metrics, of the step's targets or of `y`."""
        y, y_pred = _targets(y, y_pred)
        return super().compute_metrics(x, y, y_pred, sample_weight)


def _targets(y, y_pred):
    """(targets, logits): those the step made when it returned them, else (y, y_pred)."""
    if isinstance(y_pred, dict):
        return y_pred["targets"], y_pred["logits"]
    return y, y_pred


def _jax_memory() -> int | None:
    import jax

    device = jax.devices()[0]
    if device.platform == "cpu":
        return None
    return (device.memory_stats() or {}).get("bytes_limit")


def _tf_memory() -> int | None:
    import subprocess

    import tensorflow as tf

    if not tf.config.list_logical_devices("GPU"):
        return None
    try:  # TensorFlow reports what it uses, not what the device has: ask the driver
        query = ["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"]
        mib = subprocess.run(query, capture_output=True, text=True, timeout=10, check=True)
        return int(mib.stdout.split()[0]) * 2**20
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return None


# backend -> bytes of memory on the accelerator it trains on (None: none, or not known)
DEVICE_MEMORY = {"jax": _jax_memory, "tensorflow": _tf_memory}


def device_memory() -> int | None:
    """Bytes of memory on the first accelerator Keras trains on; None on a CPU-only host."""
    probe = DEVICE_MEMORY.get(keras.backend.backend())
    return probe() if probe is not None else None


def use_device_data(mode: str, images: object, replicas: int = 1) -> bool:
    """Whether `toolkit train --device-data MODE` trains from the device: "on" always, "off"
    never, "auto" on an accelerator whose memory holds the split within HEADROOM (on a CPU the
    host pipelines overlap the step). Only an in-memory split on one device can: "on" with a
    streamed folder or several devices is refused."""
    if mode == "off":
        return False
    fits = isinstance(images, np.ndarray) and replicas == 1
    if mode == "on":
        if not fits:
            raise UsageError(
                "--device-data on needs the training split in memory and one device (not a "
                "streamed folder or --strategy mirrored/multi-process): pass --device-data auto"
            )
        return True
    memory = device_memory() if fits else None
    return memory is not None and images.nbytes <= HEADROOM * memory


def device_trainer(
    model: keras.Model,
    x: np.ndarray,
    y: np.ndarray,
    num_classes: int,
    aug: Augmentation,
    mix: Mixing,
    seed: int = 0,
    rand_augment: tuple[int, float] | None = None,
) -> DeviceResidentTrainer:
    """`model` wrapped for device-resident training on the split (`x` uint8, `y`)."""
    from toolkit.data.random_augment import RandomAugment

    augment = None
    if aug.active or rand_augment:
        augment = RandomAugment.of(aug, seed=seed, rand_augment=rand_augment, name="augment")
    return DeviceResidentTrainer(model, x, y, num_classes, augment, mix, seed)
