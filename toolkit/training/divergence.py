"""A run whose loss stops being a number has diverged: it stops in one line before that epoch
is logged or checkpointed, so nothing of it looks finished and `--resume` has the last finite
epoch (Keras' TerminateOnNaN only stops `fit`, and the run would then be scored and saved)."""

from __future__ import annotations

import math

import keras

from toolkit.common.errors import RunError


class StopOnDivergence(keras.callbacks.Callback):
    """RunError at the end of an epoch whose training or validation loss is nan or inf; place
    it before the callbacks that write the epoch (history, checkpoint)."""

    def __init__(self, lr_max: float) -> None:
        super().__init__()
        self.lr_max = lr_max

    def on_epoch_end(self, epoch, logs=None) -> None:
        logs = logs or {}
        for key in ("loss", "val_loss"):
            value = logs.get(key)
            if value is not None and not math.isfinite(float(value)):
                raise RunError(
                    f"training diverged in epoch {epoch + 1} ({key} {float(value)}): nothing of "
                    f"that epoch was kept; train again with a lower learning rate, e.g. --recipe "
                    f"lr_max={self.lr_max / 10:.3g} (the run's is {self.lr_max:.3g})"
                )
