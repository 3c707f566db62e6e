"""tf.data input pipelines yielding (float32 images 0-255, int64 labels) batches: the TensorFlow
backend's, augmenting in parallel with the train step.

Batches gather their images by index from the source: an in-memory array (held once as a
host tensor), or a streamed folder (`FolderImages`), whose batches are read and decoded to the
in-memory copy's pixels (`_decoder`) several at a time in tf.data's threads: the same seeded
order and augmentation, memory bounded by the batches in flight. A streamed pipeline has a
thread pool of its own: decoding in the pool that runs the train step's ops stalled the step
(tiny CIFAR-10 epoch on 2 shared cores, wall time against in memory: Pillow decoding there
+67-119%, TF decoding +26-28%; this pipeline +8-12%;
records/README.md#stream-memory-tf-epyc-2core).

Every pipeline runs with tf.data's autotuning off (AUTOTUNE then means one call per core and
a prefetch buffer that grows as the consumer waits): with the step busy on every core,
deleting an exhausted iterator waited for autotune's model thread to wake, up to its
optimisation period of tens of seconds, idle, at the start of many epochs (TensorFlow 2.21;
`python -m studies.epoch_stall`, records/README.md#epoch-stall-shiftvit-cpu60)."""

from __future__ import annotations

from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf

from toolkit.data.augment import Augmentation
from toolkit.data.mixing import Mixing, choose
from toolkit.data.stream import FolderImages, is_streamed
from toolkit.data.tf_augment import augment_fn

AUTOTUNE = tf.data.AUTOTUNE
AUGMENTS = True  # train_batches applies the augmentation (tf_augment), in parallel with the step
AUTOTUNE_MODEL = False  # tf.data's autotuning (its model thread): off, see the module docstring
STREAM_THREADS = 2  # a streamed pipeline's own thread pool (2-core EPYC: 2 and 4 alike)


def train_batches(
    x: np.ndarray,
    y: np.ndarray,
    batch_size: int,
    aug: Augmentation,
    seed: int = 0,
    mix: Mixing | None = None,
    rand_augment: tuple[int, float] | None = None,
    repeats: int = 1,
) -> tf.data.Dataset:
    """Seeded shuffle (new order each epoch), batch, augment in parallel, RandAugment, mix,
    prefetch.

    Each batch gets its own stateless augmentation seed, so a given `seed` reproduces the
    whole stream, epoch after epoch, despite the parallel map. keras.layers.RandAugment
    (`rand_augment`: num_ops, factor) and mixing (`mix`, soft labels) run after it, batch after
    batch in order: Keras' layers draw from their seeded generators. `repeats` > 1: each drawn
    image that many times in a row (repeated augmentation), len(x) images an epoch all the same.
    """
    gather = _gatherer(x, y)
    fn = augment_fn(aug, int(x.shape[1]), seed)
    order = tf.data.Dataset.range(len(x)).shuffle(len(x), seed=seed, reshuffle_each_iteration=True)
    if repeats > 1:  # repeated augmentation: 1 / repeats of the images, each `repeats` times

        def copies(i: tf.Tensor) -> tf.data.Dataset:
            return tf.data.Dataset.from_tensors(i).repeat(repeats)

        order = order.take(-(-len(x) // repeats)).flat_map(copies).take(len(x))
        order = order.apply(tf.data.experimental.assert_cardinality(len(x)))  # len() of epochs
    batches = order.batch(batch_size, drop_remainder=False)
    if not aug.active:
        loaded = batches.map(gather, num_parallel_calls=AUTOTUNE)
    else:
        seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2)

        def load(idx: tf.Tensor, batch_seed: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            batch_x, batch_y = gather(idx)
            return fn(batch_x, seed=batch_seed), batch_y

        loaded = tf.data.Dataset.zip(batches, seeds).map(
            load, num_parallel_calls=AUTOTUNE, deterministic=True
        )
    if rand_augment:
        num_ops, factor = rand_augment
        rand = keras.layers.RandAugment(
            value_range=(0, 255), num_ops=num_ops, factor=factor, seed=seed, dtype="float32"
        )
        loaded = loaded.map(lambda images, labels: (rand(images, training=True), labels))
    if mix is not None and mix.active:
        draws = tf.data.Dataset.random(seed=seed + 1, rerandomize_each_iteration=True).batch(2)
        loaded = tf.data.Dataset.zip(loaded, draws).map(mixer(mix, seed))
    return _with_options(loaded.prefetch(AUTOTUNE), x)


def mixer(mix: Mixing, seed: int) -> Callable[[tuple, tf.Tensor], tuple]:
    """((images, labels), two int64 draws) -> (images, soft labels): keras.layers.MixUp or
    CutMix on the batch with probability `mix.prob` (one of them, half each, when both are on);
    CutMix's alpha as `mix.cutmix_alpha` says (CUTMIX_LAYERS)."""
    mixup = keras.layers.MixUp(alpha=mix.mixup, seed=seed, dtype="float32") if mix.mixup else None
    cutmix = (
        CUTMIX_LAYERS[mix.cutmix_alpha](factor=mix.cutmix, seed=seed + 1, dtype="float32")
        if mix.cutmix
        else None
    )

    def apply(batch: tuple, draws: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        images, labels = batch
        onehot = tf.one_hot(labels, mix.num_classes, dtype=tf.float32)
        u = tf.random.stateless_uniform((2,), seed=tf.cast(draws, tf.int64))
        out = (images, onehot)
        for name, layer in (("mixup", mixup), ("cutmix", cutmix)):
            if layer is None:
                continue
            mixed = layer({"images": images, "labels": onehot}, training=True)
            chosen = _chosen(mix, u, name)
            out = (
                tf.where(chosen, mixed["images"], out[0]),
                tf.where(chosen, mixed["labels"], out[1]),
            )
        return out

    return apply


class FixedAlphaCutMix(keras.layers.CutMix):
    """keras.layers.CutMix with its Beta's alpha fixed at `factor` (Keras draws it from
    U(0, factor) per batch): mixing.CUTMIX_ALPHAS["fixed"]."""

    def _generate_mix_weight(self, batch_size: int, seed: object) -> object:
        alpha = self.factor[1]  # a single float f is Keras' range (0, f)
        return self.backend.random.beta(
            (batch_size,), alpha, alpha, seed=seed, dtype=self.compute_dtype
        )


# mixing.CUTMIX_ALPHAS's rules as Keras layers
CUTMIX_LAYERS: dict[str, type] = {"uniform": keras.layers.CutMix, "fixed": FixedAlphaCutMix}


def _chosen(mix: Mixing, u: tf.Tensor, name: str) -> tf.Tensor:
    """Whether the batch with draws `u` gets `name` ('mixup' or 'cutmix'): as `choose`."""
    mixed = u[0] < mix.prob
    if mix.mixup > 0 and mix.cutmix > 0:
        pick = u[1] < 0.5
        return mixed & (pick if name == "cutmix" else ~pick)
    return mixed & tf.constant(choose(mix, 0.0, 0.0) == name)


def eval_batches(x: np.ndarray, y: np.ndarray | None, batch_size: int) -> tf.data.Dataset:
    """Batches in the stored order: no shuffle, no augmentation; images only when y is None."""
    labelled = y is not None
    gather = _gatherer(x, y if labelled else np.zeros(len(x), np.int64))
    fn = gather if labelled else (lambda idx: gather(idx)[0])
    ordered = (
        tf.data.Dataset.range(len(x))
        .batch(batch_size, drop_remainder=False)
        .map(fn, num_parallel_calls=AUTOTUNE, deterministic=True)
        .prefetch(AUTOTUNE)
    )
    return _with_options(ordered, x)


def _with_options(ds: tf.data.Dataset, x: np.ndarray | FolderImages) -> tf.data.Dataset:
    """`ds` without autotuning (AUTOTUNE_MODEL), and on a private pool of STREAM_THREADS
    threads when `x` is streamed."""
    options = tf.data.Options()
    options.autotune.enabled = AUTOTUNE_MODEL
    if is_streamed(x):
        options.threading.private_threadpool_size = STREAM_THREADS
    return ds.with_options(options)


def _gatherer(x: np.ndarray | FolderImages, y: np.ndarray) -> Callable[[tf.Tensor], tuple]:
    """idx batch -> (float32 images, int64 labels) of `x`, `y`, in memory or streamed."""
    if is_streamed(x):
        return _decoder(x, _labels(y))
    return _gather(*_tensors(x, y))


def _decoder(x: FolderImages, labels: tf.Tensor) -> Callable[[tf.Tensor], tuple]:
    """idx batch -> (float32 images decoded from `x`'s files, int64 labels): the same pixels
    as Pillow's (`toolkit.data.images.load_image`), which decodes the in-memory copy.

    Whole 3-component JPEGs of the target size (a CIFAR-10 copy, say) decode in TensorFlow,
    its accurate integer IDCT with fancy upsampling: Pillow's libjpeg settings, the same
    pixels (tests/test_stream.py), a third of the CPU time. Every other file (another format
    or size, grey, CMYK, no end marker: truncated) is Pillow's own. Files are checked against
    their listing first: a changed one raises `x`'s UsageError inside the pipeline, which
    tf.data hands on wrapped and `stream_errors` turns back.
    """
    size = x.size
    with tf.device("/cpu:0"):
        paths = tf.constant(x.paths.astype(str))

    def pillow(i: tf.Tensor) -> tf.Tensor:
        return tf.numpy_function(x.__getitem__, [i], tf.uint8, name="pillow_decode")

    def one(i: tf.Tensor) -> tf.Tensor:
        content = tf.io.read_file(tf.gather(paths, i))
        image = tf.cond(
            _plain_jpeg(content, size),
            lambda: tf.io.decode_jpeg(content, channels=3, dct_method="INTEGER_ACCURATE"),
            lambda: pillow(i),
        )
        return tf.ensure_shape(image, (size, size, 3))

    def gather(idx: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        idx = tf.ensure_shape(tf.numpy_function(x.check, [idx], tf.int64, name="check"), [None])
        spec = tf.TensorSpec((size, size, 3), tf.uint8)
        images = tf.map_fn(one, idx, fn_output_signature=spec)
        return tf.cast(images, tf.float32), tf.gather(labels, idx)

    return gather


def _plain_jpeg(content: tf.Tensor, size: int) -> tf.Tensor:
    """Whether file bytes `content` are a JPEG of size x size, 3 components, with its end
    marker (a truncated file goes to Pillow, whose error names it), and no Exif block: a JFIF
    header (APP0) not followed by APP1. A photo's Exif may hold an Orientation, which only
    Pillow applies (`load_image`), as browsers and MediaPipe do."""

    def plain() -> tf.Tensor:
        whole = tf.equal(tf.strings.substr(content, -2, 2), b"\xff\xd9")
        shape = tf.image.extract_jpeg_shape(content)
        return whole & tf.reduce_all(tf.equal(shape, [size, size, 3])) & _no_exif(content)

    return tf.cond(tf.io.is_jpeg(content), plain, lambda: tf.constant(False))


def _no_exif(content: tf.Tensor) -> tf.Tensor:
    """Whether JPEG bytes start SOI, APP0 (JFIF) and the segment after APP0 is not APP1 (Exif):
    how Pillow and most encoders write a JPEG without metadata; anything else goes to Pillow."""
    jfif = tf.equal(tf.strings.substr(content, 2, 2), b"\xff\xe0")
    head = tf.io.decode_raw(tf.strings.substr(content, 0, 6), tf.uint8)
    length = tf.cast(head[-2], tf.int32) * 256 + tf.cast(head[-1], tf.int32)
    after = tf.strings.substr(content, 4 + length, 2)
    return jfif & tf.not_equal(after, b"\xff\xe1")


def _tensors(x: np.ndarray, y: np.ndarray) -> tuple[tf.Tensor, tf.Tensor]:
    """Images and labels as host-memory tensors held once; batches gather from them by index."""
    with tf.device("/cpu:0"):
        return tf.convert_to_tensor(x), _labels(y)


def _labels(y: np.ndarray) -> tf.Tensor:
    """int64 labels as a host-memory tensor."""
    with tf.device("/cpu:0"):
        return tf.convert_to_tensor(np.asarray(y, np.int64).reshape(-1))


def _gather(images: tf.Tensor, labels: tf.Tensor) -> Callable[[tf.Tensor], tuple]:
    """idx batch -> (float32 images, int64 labels)."""

    def gather(idx: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        return tf.cast(tf.gather(images, idx), tf.float32), tf.gather(labels, idx)

    return gather
