"""The training augmentation as a Keras layer (keras.ops and keras.random only), so it runs
inside the compiled train step on any backend; identity at inference."""

from __future__ import annotations

import math

import keras
from keras import ops

from toolkit.data import autoaugment, erasing
from toolkit.data.augment import Augmentation, crop_size
from toolkit.data.pad_crop import pad_crop
from toolkit.data.warp import affine_warp, crop_transforms, rotate_zoom_transforms


@keras.saving.register_keras_serializable(package="toolkit")
class RandomAugment(keras.layers.Layer):
    """Per image, independently: horizontal flip (p = 0.5); resize to crop_size then a random
    image_size window; zero-pad `pad_crop` pixels per side then a random window; rotation by
    U(-rotation, rotation) turns and zoom by U(1 - zoom, 1 + zoom) per axis, reflect-filled;
    the AutoAugment policy `auto_augment` (one sub-policy per image); random erasing with
    probability `erasing`, filled with `erasing_fill`; then clip to 0-255. The same transforms
    as the tf.data pipeline.

    Computes in float32 whatever the mixed-precision policy: it feeds the model's input.
    """

    def __init__(
        self,
        flip: bool = False,
        crop_resize: tuple[int, int] | None = None,
        rotation: float = 0.0,
        zoom: float = 0.0,
        erasing: float = 0.0,
        pad_crop: int = 0,
        seed: int | None = None,
        rand_augment: tuple[int, float] | None = None,
        auto_augment: str | None = None,
        erasing_fill: str = "noise",
        **kwargs,
    ) -> None:
        kwargs["dtype"] = "float32"
        super().__init__(**kwargs)
        self.augmentation = Augmentation(
            flip=bool(flip),
            crop_resize=tuple(crop_resize) if crop_resize else None,
            rotation=float(rotation),
            zoom=float(zoom),
            erasing=float(erasing),
            pad_crop=int(pad_crop),
            auto_augment=auto_augment,
            erasing_fill=str(erasing_fill),
        )
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.rand_augment = tuple(rand_augment) if rand_augment else None
        self.rand_augment_layer = None
        if self.rand_augment:
            num_ops, factor = self.rand_augment
            self.rand_augment_layer = keras.layers.RandAugment(
                value_range=(0, 255),
                num_ops=int(num_ops),
                factor=float(factor),
                seed=seed,
                dtype="float32",
            )
            # RandomTranslation and the like say no to XLA for TensorFlow's image-transform op;
            # on JAX (and torch) their ops compile: RandAugment runs inside the compiled step
            if keras.backend.backend() != "tensorflow":
                for layer in self.rand_augment_layer._flatten_layers():
                    layer.supports_jit = True

    @classmethod
    def of(
        cls,
        augmentation: Augmentation,
        seed: int | None = None,
        rand_augment: tuple[int, float] | None = None,
        **kwargs,
    ) -> RandomAugment:
        """The layer applying `augmentation` (and keras.layers.RandAugment when given)."""
        return cls(**augmentation.to_dict(), seed=seed, rand_augment=rand_augment, **kwargs)

    def build(self, input_shape: tuple) -> None:
        """Build the RandAugment sublayer, if any."""
        if self.rand_augment_layer is not None:
            self.rand_augment_layer.build(input_shape)
        super().build(input_shape)

    def call(self, images, training: bool | None = None):
        """Augment in training, pass through otherwise."""
        aug = self.augmentation
        if not training or not (aug.active or self.rand_augment_layer):
            return images
        _, height, width, _ = images.shape
        batch = ops.shape(images)[0]
        images = ops.cast(images, "float32")
        mean = erasing.mean_pixel(images)  # before the crops pad with zeros
        if aug.flip:
            flip = keras.random.uniform((batch, 1, 1, 1), seed=self.seed_generator) < 0.5
            images = ops.where(flip, ops.flip(images, axis=2), images)
        full = crop_size(aug, height)
        if aug.crop_resize and full > height:
            offsets = keras.random.randint(
                (batch, 2), 0, full - height + 1, seed=self.seed_generator
            )
            images = affine_warp(images, crop_transforms(offsets, height / full), "nearest")
        if aug.pad_crop > 0:
            offsets = keras.random.randint(
                (batch, 2), 0, 2 * aug.pad_crop + 1, seed=self.seed_generator
            )
            images = pad_crop(images, offsets, aug.pad_crop)
        if aug.rotation > 0 or aug.zoom > 0:
            limit = aug.rotation * 2.0 * math.pi
            angles = keras.random.uniform((batch,), -limit, limit, seed=self.seed_generator)
            zooms = keras.random.uniform(
                (2, batch), 1.0 - aug.zoom, 1.0 + aug.zoom, seed=self.seed_generator
            )
            transforms = rotate_zoom_transforms(angles, zooms[0], zooms[1], height, width)
            images = affine_warp(images, transforms, "reflect")
        if aug.auto_augment is not None:
            draws = keras.random.uniform((batch, autoaugment.DRAWS), seed=self.seed_generator)
            images = autoaugment.auto_augment(images, draws, aug.auto_augment)
        if self.rand_augment_layer is not None:  # (num_ops, factor): Keras' RandAugment
            images = self.rand_augment_layer(images, training=True)
        if aug.erasing > 0:
            draws = keras.random.uniform((batch, erasing.DRAWS), seed=self.seed_generator)
            fill = (
                mean
                if aug.erasing_fill == "mean"
                else keras.random.uniform(ops.shape(images), 0.0, 255.0, seed=self.seed_generator)
            )
            images = erasing.erase(images, draws, fill, aug.erasing)
        return ops.clip(images, 0.0, 255.0)

    def compute_output_shape(self, input_shape: tuple) -> tuple:
        """Same shape as the input."""
        return tuple(input_shape)

    def get_config(self) -> dict:
        """Constructor arguments only."""
        config = {**super().get_config(), **self.augmentation.to_dict(), "seed": self.seed}
        return {**config, "rand_augment": self.rand_augment}
