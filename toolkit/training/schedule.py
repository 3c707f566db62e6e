"""Linear warmup then cosine decay, the schedule both seed examples build."""

from __future__ import annotations

import math

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="toolkit")
class WarmupCosine(keras.optimizers.schedules.LearningRateSchedule):
    """lr rises linearly from lr_start to lr_max over warmup_steps, then follows a half cosine
    to 0 at total_steps (and stays 0 after)."""

    def __init__(self, lr_start: float, lr_max: float, warmup_steps: int, total_steps: int):
        if total_steps < warmup_steps:
            raise ValueError("total_steps must be >= warmup_steps")
        self.lr_start = lr_start
        self.lr_max = lr_max
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps

    def __call__(self, step):
        step = ops.cast(step, "float32")
        decay_steps = max(self.total_steps - self.warmup_steps, 1)
        progress = (step - self.warmup_steps) / decay_steps
        cosine = 0.5 * self.lr_max * (1.0 + ops.cos(math.pi * ops.clip(progress, 0.0, 1.0)))
        if self.warmup_steps > 0:
            slope = (self.lr_max - self.lr_start) / self.warmup_steps
            warmup = self.lr_start + slope * step
            cosine = ops.where(step < self.warmup_steps, warmup, cosine)
        return ops.where(step > self.total_steps, 0.0, cosine)

    def get_config(self) -> dict:
        return {
            "lr_start": self.lr_start,
            "lr_max": self.lr_max,
            "warmup_steps": self.warmup_steps,
            "total_steps": self.total_steps,
        }
