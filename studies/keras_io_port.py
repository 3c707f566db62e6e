"""Benchmark baseline: a plain Keras 3 port of the two keras.io examples the toolkit started from.

Written in the examples' own style (subclassed layers that create sublayers in build(), a
subclassed ShiftViT `keras.Model` with the augmentation model inside it and a hand-written
train_step, a functional ViT whose first layer is the augmentation Sequential), with only the
changes needed for the math to equal the toolkit's seed presets:

* ShiftViT partial shift: g = C // num_div channels per group (not C // num_div groups), and the
  crop and the pad sit at opposite offsets, so [0,g) really moves left, [g,2g) right, [2g,3g) up,
  [3g,4g) down (the example crops and pads at the same offset, so nothing moves).
* ShiftViT gets a classification head, LayerNorm -> GlobalAveragePooling -> Dense, as the
  toolkit's, and the drop-path rates rise linearly over all blocks (the official code; the
  example restarts them in every stage).
* LSA overrides `MultiHeadAttention._compute_attention` with its Keras 3.15 signature.
* `extract_patches` gets Keras 3 arguments (strides as a pair, lowercase padding).
* The ViT is compiled with the warmup-cosine schedule the example builds but never uses.
* "gelu" is Keras' exact (erf) gelu, the same function as the toolkit's.

Used only by studies/train_throughput.py; the toolkit never imports it.
"""

from __future__ import annotations

import math

import keras
import numpy as np
import tensorflow as tf
from keras import layers, ops

# ----------------------------------------------------------------------------------------------
# Shared: the warmup-cosine schedule of both examples
# ----------------------------------------------------------------------------------------------


class WarmUpCosine(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup from lr_start to lr_max, then half a cosine down to 0 at total_steps."""

    def __init__(self, lr_start, lr_max, warmup_steps, total_steps):
        super().__init__()
        self.lr_start = lr_start
        self.lr_max = lr_max
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps
        self.pi = ops.array(np.pi)

    def __call__(self, step):
        if self.total_steps < self.warmup_steps:
            raise ValueError("total_steps must be at least warmup_steps")
        decay = ops.cast(self.total_steps - self.warmup_steps, "float32")
        cos_annealed = ops.cos(
            self.pi * (ops.cast(step, "float32") - self.warmup_steps) / ops.maximum(decay, 1.0)
        )
        learning_rate = 0.5 * self.lr_max * (1 + cos_annealed)
        if self.warmup_steps > 0:
            slope = (self.lr_max - self.lr_start) / self.warmup_steps
            warmup = slope * ops.cast(step, "float32") + self.lr_start
            learning_rate = ops.where(step < self.warmup_steps, warmup, learning_rate)
        return ops.where(step > self.total_steps, 0.0, learning_rate)

    def get_config(self):
        return {
            "lr_start": self.lr_start,
            "lr_max": self.lr_max,
            "warmup_steps": self.warmup_steps,
            "total_steps": self.total_steps,
        }


def compile_like_keras_io(model, lr_start, lr_max, weight_decay, warmup_steps, total_steps):
    """AdamW on the warmup-cosine schedule, sparse CE from logits, top-1 and top-5 accuracy.

    jit_compile is left at Keras' default ("auto"), which is False on a CPU-only machine (and
    the in-model random augmentation layers do not support XLA anyway).
    """
    schedule = WarmUpCosine(lr_start, lr_max, warmup_steps, total_steps)
    model.compile(
        optimizer=keras.optimizers.AdamW(learning_rate=schedule, weight_decay=weight_decay),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[
            keras.metrics.SparseCategoricalAccuracy(name="accuracy"),
            keras.metrics.SparseTopKCategoricalAccuracy(5, name="top-5-accuracy"),
        ],
    )
    return model


def keras_io_dataset(x, y, batch_size, buffer_size=512):
    """The examples' input pipeline: shuffle, batch, prefetch (augmentation is in the model)."""
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    return ds.shuffle(buffer_size).batch(batch_size).prefetch(tf.data.AUTOTUNE)


# ----------------------------------------------------------------------------------------------
# ShiftViT ("A Vision Transformer without Attention")
# ----------------------------------------------------------------------------------------------


def get_shiftvit_augmentation(input_size=32, image_size=48):
    """Resize to input+20, random crop to image_size, random flip, rescale to [0, 1]."""
    return keras.Sequential(
        [
            layers.Resizing(input_size + 20, input_size + 20),
            layers.RandomCrop(image_size, image_size),
            layers.RandomFlip("horizontal"),
            layers.Rescaling(1 / 255.0),
        ],
        name="data_augmentation",
    )


class MLP(layers.Layer):
    """Dense(expand * C, gelu) -> Dropout -> Dense(C) -> Dropout, built once C is known."""

    def __init__(self, mlp_expand_ratio, mlp_dropout_rate, **kwargs):
        super().__init__(**kwargs)
        self.mlp_expand_ratio = mlp_expand_ratio
        self.mlp_dropout_rate = mlp_dropout_rate

    def build(self, input_shape):
        channels = input_shape[-1]
        self.mlp = keras.Sequential(
            [
                layers.Dense(int(self.mlp_expand_ratio * channels), activation="gelu"),
                layers.Dropout(self.mlp_dropout_rate),
                layers.Dense(channels),
                layers.Dropout(self.mlp_dropout_rate),
            ]
        )

    def call(self, x, training=False):
        return self.mlp(x, training=training)


class DropPath(layers.Layer):
    """Stochastic depth: keep a sample's branch with prob 1 - p, scaled by 1 / (1 - p)."""

    def __init__(self, drop_path_prob, **kwargs):
        super().__init__(**kwargs)
        self.drop_path_prob = drop_path_prob
        self.seed_generator = keras.random.SeedGenerator(1337)

    def call(self, x, training=False):
        if not training:
            return x
        keep_prob = 1 - self.drop_path_prob
        shape = (ops.shape(x)[0],) + (1,) * (len(x.shape) - 1)
        random_tensor = ops.floor(keep_prob + keras.random.uniform(shape, seed=self.seed_generator))
        return (x / keep_prob) * random_tensor


class ShiftViTBlock(layers.Layer):
    """Partial shift of four channel groups, then x + DropPath(MLP(LayerNorm(x)))."""

    # mode -> (rows cropped at the top, columns cropped at the left,
    #          rows padded at the top, columns padded at the left, rows lost, columns lost)
    # Cropping at one side and padding at the other is what moves the content.
    SHIFTS = {
        "left": (0, 1, 0, 0, 0, 1),  # out[:, :, w] = x[:, :, w + s]
        "right": (0, 0, 0, 1, 0, 1),  # out[:, :, w] = x[:, :, w - s]
        "up": (1, 0, 0, 0, 1, 0),  # out[:, h] = x[:, h + s]
        "down": (0, 0, 1, 0, 1, 0),  # out[:, h] = x[:, h - s]
    }

    def __init__(
        self,
        epsilon,
        drop_path_prob,
        mlp_dropout_rate,
        num_div=12,
        shift_pixel=1,
        mlp_expand_ratio=2,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.epsilon = epsilon
        self.drop_path_prob = drop_path_prob
        self.mlp_dropout_rate = mlp_dropout_rate
        self.num_div = num_div
        self.shift_pixel = shift_pixel
        self.mlp_expand_ratio = mlp_expand_ratio

    def build(self, input_shape):
        self.H, self.W, self.C = input_shape[1], input_shape[2], input_shape[3]
        self.layer_norm = layers.LayerNormalization(epsilon=self.epsilon)
        self.drop_path = (
            DropPath(self.drop_path_prob)
            if self.drop_path_prob > 0.0
            else layers.Activation("linear")
        )
        self.mlp = MLP(self.mlp_expand_ratio, self.mlp_dropout_rate)

    def get_shift_pad(self, x, mode):
        """Shift one channel group by shift_pixel: crop one side, zero-pad the other."""
        s = self.shift_pixel
        crop_top, crop_left, pad_top, pad_left, lost_h, lost_w = self.SHIFTS[mode]
        cropped = ops.image.crop_images(
            x,
            top_cropping=crop_top * s,
            left_cropping=crop_left * s,
            target_height=self.H - lost_h * s,
            target_width=self.W - lost_w * s,
        )
        return ops.image.pad_images(
            cropped,
            top_padding=pad_top * s,
            left_padding=pad_left * s,
            target_height=self.H,
            target_width=self.W,
        )

    def call(self, x, training=False):
        g = self.C // self.num_div
        if self.C % self.num_div == 0:
            x_splits = ops.split(x, self.num_div, axis=-1)  # num_div groups of g channels
        else:
            x_splits = ops.split(x, [g, 2 * g, 3 * g, 4 * g], axis=-1)
        for index, mode in enumerate(("left", "right", "up", "down")):
            x_splits[index] = self.get_shift_pad(x_splits[index], mode)
        x = ops.concatenate(x_splits, axis=-1)
        shortcut = x
        return shortcut + self.drop_path(
            self.mlp(self.layer_norm(x), training=training), training=training
        )


class PatchMerging(layers.Layer):
    """LayerNorm then a 2x2 stride-2 convolution doubling the channels."""

    def __init__(self, epsilon, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = epsilon

    def build(self, input_shape):
        self.reduction = layers.Conv2D(
            2 * input_shape[-1], kernel_size=2, strides=2, padding="same", use_bias=False
        )
        self.layer_norm = layers.LayerNormalization(epsilon=self.epsilon)

    def call(self, x):
        return self.reduction(self.layer_norm(x))


class StackedShiftBlocks(layers.Layer):
    """One stage: its shift blocks, then (except in the last stage) a patch merge."""

    def __init__(
        self,
        epsilon,
        mlp_dropout_rate,
        drop_path_rates,
        is_merge,
        num_div=12,
        shift_pixel=1,
        mlp_expand_ratio=2,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.epsilon = epsilon
        self.mlp_dropout_rate = mlp_dropout_rate
        self.drop_path_rates = [float(r) for r in drop_path_rates]
        self.is_merge = is_merge
        self.num_div = num_div
        self.shift_pixel = shift_pixel
        self.mlp_expand_ratio = mlp_expand_ratio

    def build(self, input_shape):
        self.shift_blocks = [
            ShiftViTBlock(
                epsilon=self.epsilon,
                drop_path_prob=rate,
                mlp_dropout_rate=self.mlp_dropout_rate,
                num_div=self.num_div,
                shift_pixel=self.shift_pixel,
                mlp_expand_ratio=self.mlp_expand_ratio,
            )
            for rate in self.drop_path_rates
        ]
        if self.is_merge:
            self.patch_merge = PatchMerging(epsilon=self.epsilon)

    def call(self, x, training=False):
        for block in self.shift_blocks:
            x = block(x, training=training)
        if self.is_merge:
            x = self.patch_merge(x)
        return x


class ShiftViTModel(keras.Model):
    """Augmentation -> patch projection -> stages -> LayerNorm, average pool, Dense logits."""

    def __init__(
        self,
        data_augmentation,
        num_classes,
        projected_dim,
        patch_size,
        num_shift_blocks_per_stages,
        epsilon,
        mlp_dropout_rate,
        stochastic_depth_rate,
        num_div=12,
        shift_pixel=1,
        mlp_expand_ratio=2,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.data_augmentation = data_augmentation
        self.patch_projection = layers.Conv2D(
            projected_dim, kernel_size=patch_size, strides=patch_size, padding="same"
        )
        rates = np.linspace(0.0, stochastic_depth_rate, sum(num_shift_blocks_per_stages))
        self.stages = []
        first = 0
        for index, depth in enumerate(num_shift_blocks_per_stages):
            self.stages.append(
                StackedShiftBlocks(
                    epsilon=epsilon,
                    mlp_dropout_rate=mlp_dropout_rate,
                    drop_path_rates=rates[first : first + depth],
                    is_merge=index < len(num_shift_blocks_per_stages) - 1,
                    num_div=num_div,
                    shift_pixel=shift_pixel,
                    mlp_expand_ratio=mlp_expand_ratio,
                )
            )
            first += depth
        self.head_norm = layers.LayerNormalization(epsilon=epsilon)
        self.global_avg_pool = layers.GlobalAveragePooling2D()
        self.classifier = layers.Dense(num_classes)

    def _forward(self, images, training):
        x = self.data_augmentation(images, training=training)
        x = self.patch_projection(x)
        for stage in self.stages:
            x = stage(x, training=training)
        x = self.global_avg_pool(self.head_norm(x))
        return self.classifier(x)

    def _calculate_loss(self, data, training=False):
        images, labels = data
        logits = self._forward(images, training=training)
        loss = self.compute_loss(x=images, y=labels, y_pred=logits, training=training)
        return loss, labels, logits

    def train_step(self, data):
        with tf.GradientTape() as tape:
            loss, labels, logits = self._calculate_loss(data, training=True)
        train_vars = self.trainable_variables
        grads = tape.gradient(loss, train_vars)
        self.optimizer.apply_gradients(zip(grads, train_vars, strict=True))
        for metric in self.metrics:
            if metric.name == "loss":
                metric.update_state(loss)
            else:
                metric.update_state(labels, logits)
        return {m.name: m.result() for m in self.metrics}

    def test_step(self, data):
        loss, labels, logits = self._calculate_loss(data, training=False)
        for metric in self.metrics:
            if metric.name == "loss":
                metric.update_state(loss)
            else:
                metric.update_state(labels, logits)
        return {m.name: m.result() for m in self.metrics}

    def call(self, images):
        # As in the example: the augmentation layers run with their default (training=True;
        # on Keras 3.15 RandomCrop at training=False would pass 52x52 through uncropped).
        x = self.patch_projection(self.data_augmentation(images))
        for stage in self.stages:
            x = stage(x, training=False)
        return self.classifier(self.global_avg_pool(self.head_norm(x)))


def build_shiftvit_port(arch, input_shape=(32, 32, 3), num_classes=10):
    """The port at the architecture `arch` (a toolkit ShiftViTArch), built on a sample batch."""
    model = ShiftViTModel(
        data_augmentation=get_shiftvit_augmentation(input_shape[0], arch.image_size),
        num_classes=num_classes,
        projected_dim=arch.dim,
        patch_size=arch.patch_size,
        num_shift_blocks_per_stages=list(arch.depths),
        epsilon=arch.epsilon,
        mlp_dropout_rate=arch.dropout,
        stochastic_depth_rate=arch.drop_path,
        num_div=arch.num_div,
        shift_pixel=arch.shift_pixel,
        mlp_expand_ratio=arch.mlp_ratio,
    )
    model(np.zeros((1, *input_shape), np.float32))
    return model


# ----------------------------------------------------------------------------------------------
# ViT for small datasets (Shifted Patch Tokenization + Locality Self-Attention)
# ----------------------------------------------------------------------------------------------


def get_vit_augmentation(x_train, image_size=72):
    """Normalization adapted on the training images, resize, flip, rotate, zoom."""
    data_augmentation = keras.Sequential(
        [
            layers.Normalization(),
            layers.Resizing(image_size, image_size),
            layers.RandomFlip("horizontal"),
            layers.RandomRotation(factor=0.02),
            layers.RandomZoom(height_factor=0.2, width_factor=0.2),
        ],
        name="data_augmentation",
    )
    data_augmentation.layers[0].adapt(x_train)
    return data_augmentation


class ShiftedPatchTokenization(layers.Layer):
    """Concatenate the image with its four diagonal half-patch shifts, cut patches, project."""

    def __init__(
        self, image_size, patch_size, num_patches, projection_dim, epsilon, vanilla=False, **kw
    ):
        super().__init__(**kw)
        self.vanilla = vanilla
        self.image_size = image_size
        self.patch_size = patch_size
        self.half_patch = patch_size // 2
        self.flatten_patches = layers.Reshape((num_patches, -1))
        self.projection = layers.Dense(units=projection_dim)
        self.layer_norm = layers.LayerNormalization(epsilon=epsilon)

    def crop_shift_pad(self, images, mode):
        """Shift diagonally by half a patch: crop at one corner, zero-pad at the opposite."""
        h = self.half_patch
        crop_top, crop_left, pad_top, pad_left = {
            "left-up": (h, h, 0, 0),  # out[i, j] = x[i + h, j + h]
            "left-down": (0, h, h, 0),  # out[i, j] = x[i - h, j + h]
            "right-up": (h, 0, 0, h),  # out[i, j] = x[i + h, j - h]
            "right-down": (0, 0, h, h),  # out[i, j] = x[i - h, j - h]
        }[mode]
        cropped = ops.image.crop_images(
            images,
            top_cropping=crop_top,
            left_cropping=crop_left,
            target_height=self.image_size - h,
            target_width=self.image_size - h,
        )
        return ops.image.pad_images(
            cropped,
            top_padding=pad_top,
            left_padding=pad_left,
            target_height=self.image_size,
            target_width=self.image_size,
        )

    def call(self, images):
        if not self.vanilla:
            images = ops.concatenate(
                [images]
                + [
                    self.crop_shift_pad(images, mode)
                    for mode in ("left-up", "left-down", "right-up", "right-down")
                ],
                axis=-1,
            )
        patches = ops.image.extract_patches(
            images=images,
            size=(self.patch_size, self.patch_size),
            strides=(self.patch_size, self.patch_size),
            dilation_rate=1,
            padding="valid",
        )
        flat_patches = self.flatten_patches(patches)
        if self.vanilla:
            tokens = self.projection(flat_patches)
        else:
            tokens = self.projection(self.layer_norm(flat_patches))
        return tokens, patches


class PatchEncoder(layers.Layer):
    """Add a learned position embedding (an Embedding over the patch index)."""

    def __init__(self, num_patches, projection_dim, **kwargs):
        super().__init__(**kwargs)
        self.num_patches = num_patches
        self.position_embedding = layers.Embedding(input_dim=num_patches, output_dim=projection_dim)
        self.positions = ops.arange(start=0, stop=num_patches, step=1)

    def call(self, encoded_patches):
        return encoded_patches + self.position_embedding(self.positions)


class MultiHeadAttentionLSA(layers.MultiHeadAttention):
    """MultiHeadAttention with a trainable temperature tau (init sqrt(key_dim)); the diagonal
    mask comes in through `attention_mask`.

    `_compute_attention` keeps the signature of Keras 3.15's MultiHeadAttention.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.tau = keras.Variable(math.sqrt(float(self._key_dim)), trainable=True, name="tau")

    def _compute_attention(
        self,
        query,
        key,
        value,
        attention_mask=None,
        training=None,
        return_attention_scores=False,
        use_causal_mask=False,
    ):
        if use_causal_mask:
            raise ValueError("LSA is bidirectional: use_causal_mask is not supported")
        query = ops.multiply(query, 1.0 / self.tau)
        attention_scores = ops.einsum(self._dot_product_equation, key, query)
        attention_scores = self._masked_softmax(attention_scores, attention_mask)
        attention_scores_dropout = self._dropout_layer(attention_scores, training=training)
        attention_output = ops.einsum(self._combine_equation, attention_scores_dropout, value)
        return attention_output, attention_scores


def mlp(x, hidden_units, dropout_rate):
    """Dense(gelu) + Dropout for each width."""
    for units in hidden_units:
        x = layers.Dense(units, activation="gelu")(x)
        x = layers.Dropout(dropout_rate)(x)
    return x


def build_vit_port(arch, x_train, input_shape=(32, 32, 3), num_classes=100):
    """The example's create_vit_classifier at the architecture `arch` (a toolkit ViTArch)."""
    num_patches = (arch.image_size // arch.patch_size) ** 2
    vanilla = not arch.spt
    diag_attn_mask = ops.cast([1 - ops.eye(num_patches)], dtype="int8")

    inputs = layers.Input(shape=input_shape)
    augmented = get_vit_augmentation(x_train, arch.image_size)(inputs)
    tokens, _ = ShiftedPatchTokenization(
        arch.image_size, arch.patch_size, num_patches, arch.dim, arch.epsilon, vanilla=vanilla
    )(augmented)
    encoded_patches = PatchEncoder(num_patches, arch.dim)(tokens)
    for _ in range(arch.depth):
        x1 = layers.LayerNormalization(epsilon=arch.epsilon)(encoded_patches)
        if arch.lsa:
            attention_output = MultiHeadAttentionLSA(
                num_heads=arch.num_heads, key_dim=arch.key_dim, dropout=arch.dropout
            )(x1, x1, attention_mask=diag_attn_mask)
        else:
            attention_output = layers.MultiHeadAttention(
                num_heads=arch.num_heads, key_dim=arch.key_dim, dropout=arch.dropout
            )(x1, x1)
        x2 = layers.Add()([attention_output, encoded_patches])
        x3 = layers.LayerNormalization(epsilon=arch.epsilon)(x2)
        x3 = mlp(x3, hidden_units=list(arch.mlp_units), dropout_rate=arch.dropout)
        encoded_patches = layers.Add()([x3, x2])
    representation = layers.LayerNormalization(epsilon=arch.epsilon)(encoded_patches)
    representation = layers.Flatten()(representation)
    representation = layers.Dropout(arch.head_dropout)(representation)
    features = mlp(representation, list(arch.head_units), dropout_rate=arch.head_dropout)
    logits = layers.Dense(num_classes)(features)
    return keras.Model(inputs=inputs, outputs=logits)
