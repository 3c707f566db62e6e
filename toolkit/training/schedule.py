"""Linear warmup then cosine decay, the schedule both seed examples build; and its timed form,
whose length is a plan the optimizer holds and `toolkit train --time` re-estimates."""

from __future__ import annotations

import math

import keras
from keras import ops


def warmup_cosine(step, lr_start: float, lr_max: float, warmup_steps, total_steps):
    """lr at `step`: linear from lr_start to lr_max over warmup_steps, then a half cosine to 0 at
    total_steps, 0 after. The step counts may be tensors (a plan re-estimated as a run goes)."""
    step = ops.cast(step, "float32")
    warmup_steps = ops.cast(warmup_steps, "float32")
    total_steps = ops.cast(total_steps, "float32")
    decay_steps = ops.maximum(total_steps - warmup_steps, 1.0)
    progress = ops.clip((step - warmup_steps) / decay_steps, 0.0, 1.0)
    cosine = 0.5 * lr_max * (1.0 + ops.cos(math.pi * progress))
    warmup = lr_start + (lr_max - lr_start) * step / ops.maximum(warmup_steps, 1.0)
    lr = ops.where(step < warmup_steps, warmup, cosine)
    return ops.where(step > total_steps, 0.0, lr)


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
        return warmup_cosine(step, self.lr_start, self.lr_max, self.warmup_steps, self.total_steps)

    def get_config(self) -> dict:
        return {
            "lr_start": self.lr_start,
            "lr_max": self.lr_max,
            "warmup_steps": self.warmup_steps,
            "total_steps": self.total_steps,
        }


@keras.saving.register_keras_serializable(package="toolkit")
class PlannedWarmupCosine(keras.optimizers.schedules.LearningRateSchedule):
    """The warmup cosine on the fraction of a plan: warmup over `warmup_fraction` of
    `planned_steps`, decay to 0 at `planned_steps`. Bound to a variable (`PlannedAdamW` holds
    it), the plan changes between steps without recompiling the step: a timed run
    (`toolkit train --time`) re-estimates it from the speed it measures, so the schedule ends
    when the budget does (Li et al., "Budgeted Training", ICLR 2020)."""

    def __init__(
        self, lr_start: float, lr_max: float, warmup_fraction: float, planned_steps: float
    ):
        self.lr_start = lr_start
        self.lr_max = lr_max
        self.warmup_fraction = warmup_fraction
        self.planned_steps = float(planned_steps)
        self.plan: keras.Variable | None = None  # bound by PlannedAdamW.build

    def planned(self):
        """The planned total of steps: the bound variable's value, else the initial plan."""
        return self.planned_steps if self.plan is None else self.plan.value

    def __call__(self, step):
        total = self.planned()
        return warmup_cosine(step, self.lr_start, self.lr_max, self.warmup_fraction * total, total)

    def get_config(self) -> dict:
        planned = self.planned_steps
        if self.plan is not None:
            planned = float(ops.convert_to_numpy(self.plan.value))
        return {
            "lr_start": self.lr_start,
            "lr_max": self.lr_max,
            "warmup_fraction": self.warmup_fraction,
            "planned_steps": planned,
        }


@keras.saving.register_keras_serializable(package="toolkit")
class PlannedAdamW(keras.optimizers.AdamW):
    """AdamW that holds its PlannedWarmupCosine's plan as one of its variables: the compiled
    step reads it (every backend: JAX passes optimizer variables into the step), a checkpoint
    saves it, and a callback sets it between steps (`toolkit.training.budget.TimeBudget`)."""

    def __init__(self, learning_rate: PlannedWarmupCosine, **kwargs):
        if not isinstance(learning_rate, PlannedWarmupCosine):
            raise TypeError("PlannedAdamW's learning_rate is a PlannedWarmupCosine")
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.schedule = learning_rate
        self.plan: keras.Variable | None = None

    def build(self, variables) -> None:
        if self.built:
            return
        super().build(variables)
        self.plan = self.add_variable(
            (),
            initializer=keras.initializers.Constant(self.schedule.planned_steps),
            dtype="float32",
            name="planned_steps",
        )
        self.schedule.plan = self.plan


class LearningRateLog(keras.callbacks.Callback):
    """Puts the learning rate of an epoch's last step into its logs (`learning_rate`):
    history.csv records it, so a timed run's schedule can be seen to end at its end."""

    def on_epoch_end(self, epoch, logs=None) -> None:
        if logs is not None:
            rate = self.model.optimizer.learning_rate  # the schedule at the current step
            logs["learning_rate"] = float(ops.convert_to_numpy(rate))
