"""Progressive resizing's fits: one per resolution of the ramp, each on the same weights and
optimizer, switching at the first epoch end past a phase's start (toolkit.training.resolution
says what the ramp is). Every callback sees each fit as Keras' fit gives it: the checkpoint
continues the epochs, history.csv the rows, a timed run's planner its plan."""

from __future__ import annotations

from collections.abc import Callable

import keras

from toolkit.training.budget import TimeBudget
from toolkit.training.resolution import ResolutionRamp


def planned_steps(optimizer: keras.optimizers.Optimizer, fixed: int) -> float:
    """The run's total of steps: a timed run's plan (PlannedAdamW holds it), else `fixed`."""
    plan = getattr(optimizer, "plan", None)
    return fixed if plan is None else float(keras.ops.convert_to_numpy(plan.value))


def resolution_now(ramp: ResolutionRamp, optimizer: keras.optimizers.Optimizer, fixed: int) -> int:
    """The resolution the ramp gives the optimizer's next step."""
    step = int(keras.ops.convert_to_numpy(optimizer.iterations))
    return ramp.at(step / max(planned_steps(optimizer, fixed), 1.0))


class ResolutionLog(keras.callbacks.Callback):
    """Puts the epoch's resolution into its logs (`resolution`): history.csv records the
    ramp beside the learning rate. Place it before the history."""

    def __init__(self, resolution: int) -> None:
        super().__init__()
        self.resolution = resolution

    def on_epoch_end(self, epoch, logs=None) -> None:
        if logs is not None:
            logs["resolution"] = self.resolution


class PhaseEnd(keras.callbacks.Callback):
    """Ends a fit at the epoch end after which the ramp's resolution rises (`switch_to`); a
    run that ends there anyway (its plan done, a divergence) is left to end. The resolution
    never falls back: a plan that grows moves the ramp's fractions later, not the run back."""

    def __init__(self, ramp: ResolutionRamp, resolution: int, fixed: int) -> None:
        super().__init__()
        self.ramp, self.resolution, self.fixed = ramp, resolution, fixed
        self.switch_to: int | None = None

    def on_epoch_end(self, epoch, logs=None) -> None:
        if self.model.stop_training:
            return
        following = resolution_now(self.ramp, self.model.optimizer, self.fixed)
        if following > self.resolution:
            self.switch_to = following
            self.model.stop_training = True


def fit_in_phases(
    fit: Callable[[keras.Model, list], None],
    model_at: Callable[[int], keras.Model],
    ramp: ResolutionRamp,
    callbacks: list,
    fixed: int,
) -> None:
    """`fit(model, callbacks)` at each of the ramp's resolutions in turn, from the one the
    optimizer's step is at (a resumed run's), `model_at(resolution)` the compiled model that
    trains there. `fixed`: a fixed-epoch run's total of steps (a timed run plans its own)."""
    resolution = resolution_now(ramp, model_at(ramp.full).optimizer, fixed)
    while True:
        for callback in callbacks:
            if isinstance(callback, TimeBudget):
                callback.resolution = resolution
        phase = PhaseEnd(ramp, resolution, fixed)
        fit(model_at(resolution), [ResolutionLog(resolution), *callbacks, phase])
        if phase.switch_to is None:
            return
        resolution = phase.switch_to
