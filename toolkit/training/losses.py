"""Cross-entropy with label smoothing, and top-k accuracy, for integer or soft labels.

Keras 3.15's SparseCategoricalCrossentropy takes no label_smoothing, and the validation
batches carry integer labels (evaluation, calibration and the int8 search read them too), so
the loss one-hots integer labels in the step and leaves soft labels as they are; with Mixup or
CutMix (soft training labels) the accuracies score against each image's largest label."""

from __future__ import annotations

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="toolkit")
class SmoothedCrossentropy(keras.losses.Loss):
    """keras.losses.categorical_crossentropy of logits, with `label_smoothing`, on integer
    labels (one-hot in the step) or soft labels (one row per image summing to 1)."""

    def __init__(self, label_smoothing: float = 0.0, **kwargs) -> None:
        super().__init__(**{"name": "smoothed_crossentropy", **kwargs})
        self.label_smoothing = float(label_smoothing)

    def call(self, y_true, y_pred):
        """Per-image loss; y_true is (batch,) integers or (batch, classes) probabilities."""
        if len(y_true.shape) < len(y_pred.shape):  # integer labels
            y_true = ops.one_hot(ops.cast(y_true, "int32"), y_pred.shape[-1], dtype=y_pred.dtype)
        return keras.losses.categorical_crossentropy(
            y_true, y_pred, from_logits=True, label_smoothing=self.label_smoothing
        )

    def get_config(self) -> dict:
        """Constructor arguments."""
        return {**super().get_config(), "label_smoothing": self.label_smoothing}


def hard_labels(y_true, y_pred):
    """Integer labels: `y_true` itself, or the class of each soft label row's largest weight."""
    if len(y_true.shape) < len(y_pred.shape):
        return y_true
    return ops.argmax(y_true, axis=-1)


@keras.saving.register_keras_serializable(package="toolkit")
class HardAccuracy(keras.metrics.SparseCategoricalAccuracy):
    """SparseCategoricalAccuracy of integer labels or of soft labels' largest class."""

    def update_state(self, y_true, y_pred, sample_weight=None):
        """Accumulate the batch's hits."""
        return super().update_state(hard_labels(y_true, y_pred), y_pred, sample_weight)


@keras.saving.register_keras_serializable(package="toolkit")
class HardTopKAccuracy(keras.metrics.SparseTopKCategoricalAccuracy):
    """SparseTopKCategoricalAccuracy of integer labels or of soft labels' largest class."""

    def update_state(self, y_true, y_pred, sample_weight=None):
        """Accumulate the batch's hits."""
        return super().update_state(hard_labels(y_true, y_pred), y_pred, sample_weight)
