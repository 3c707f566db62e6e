"""`toolkit train --time`: a run that ends within a wall-clock budget with its schedule complete.

The budget counts from the command's start (the process's, data decoding and compiling
included) to the saved model and metrics.json. `TimeBudget` measures the seconds a step and a
validation take, re-plans the run's total of steps after a few steps and after every epoch
(`plan_steps`), and sets the plan on the optimizer (`schedule.PlannedAdamW`), whose schedule
warms up and decays on the fraction of it; the run stops at the planned step (the last epoch
may end early, at a step boundary). What the final test and the save will take is kept aside.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import keras
import numpy as np

from toolkit.common.durations import format_seconds
from toolkit.common.errors import UsageError
from toolkit.training.resolution import ResolutionRamp, pace_of, plan_ramp_steps

SAVE_SECONDS = 3.0  # model.keras, the history plot and metrics.json (~1 s for a 1 M model)
MARGIN = 0.01  # of the budget, kept for what was not measured (a slower minute at the end)
CALIBRATE_AT = (2, 8, 32, 128)  # timed steps after which a process's first epoch re-plans
SMOOTH = 3  # epochs whose mean step time plans the rest


def plan_steps(
    seconds: float,
    step_seconds: float,
    epoch_end_seconds: float,
    steps_per_epoch: int,
    epoch_step: int = 0,
) -> int:
    """How many more steps fit in `seconds` when a step takes `step_seconds` and the end of
    every epoch (validation, checkpoint) `epoch_end_seconds`, starting `epoch_step` steps into
    an epoch. The last epoch may stop at any step; it still ends (validates)."""
    if step_seconds <= 0:
        raise ValueError("step_seconds must be above 0")

    def partial(seconds: float) -> int:  # the steps of an epoch cut short, which still ends
        return max(int((seconds - epoch_end_seconds) // step_seconds), 0)

    to_end = steps_per_epoch - epoch_step
    first = to_end * step_seconds + epoch_end_seconds
    if first > seconds:
        return partial(seconds)
    seconds -= first
    whole = steps_per_epoch * step_seconds + epoch_end_seconds
    epochs = int(seconds // whole)
    return to_end + epochs * steps_per_epoch + partial(seconds - epochs * whole)


class BudgetTooShort(UsageError):
    """A budget that setup (and the first step) used up: the run is refused, nothing kept."""


@dataclass
class Budget:
    """The seconds this command may spend from `started` (its monotonic start: the process's
    for the command line), and what earlier commands of the same run spent before a `--resume`
    (its metrics.json reports the sum)."""

    seconds: float
    spent_before: float = 0.0
    started: float = field(default_factory=time.monotonic)
    marks: dict[str, float] = field(default_factory=dict)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def left(self) -> float:
        return self.seconds - self.elapsed()

    def clock(self) -> dict[str, float]:
        """The run's clock as its checkpoint records it (checkpoint.CLOCK_KEYS): the seconds
        its commands spent so far, and the budget in force, both counted over the whole run."""
        return {
            "seconds_spent": self.spent_before + self.elapsed(),
            "budget_seconds": self.spent_before + self.seconds,
        }

    def mark(self, name: str) -> None:
        """Note the age at which a part of the setup ended (the refusal of a too short budget
        says where the setup's seconds went)."""
        self.marks[name] = self.elapsed()

    def spent(self) -> str:
        """`12.3s spent (data 8.1s, model 3.2s, ...)`: the seconds so far, by part of setup."""
        parts, last = [], 0.0
        for name, at in self.marks.items():
            parts.append(f"{name} {at - last:.1f}s")
            last = at
        return f"{self.elapsed():.1f}s spent ({', '.join(parts)})"

    def too_short(self, needed: float, what: str) -> BudgetTooShort:
        """The one line of a budget that cannot train one step and still test and save."""
        spent = self.elapsed()
        suggest = max(math.ceil((spent + needed) * 1.5 / 60), 1)
        return BudgetTooShort(
            f"--time {format_seconds(self.seconds)} is too short: {what} took "
            f"{self.spent().replace(' spent', '')} and the final test and save need "
            f"~{needed:.0f}s more; pass --time {suggest}m or more"
        )


class TimeBudget(keras.callbacks.Callback):
    """Plans a run's steps to fit `budget` and stops it at the planned step.

    `steps_per_epoch` and `val_batches`/`test_batches` (the validation's and final test's
    batches) size the estimates; place it after the callbacks that write at an epoch's end
    (history, checkpoint) so their seconds are measured too. With a `ramp` (progressive
    resizing) it plans each phase at its resolution's pace: the trainer sets `resolution`
    before each fit, and each resolution's pace is measured apart."""

    def __init__(
        self,
        budget: Budget,
        steps_per_epoch: int,
        val_batches: int,
        test_batches: int,
        verbose: bool = True,
        ramp: ResolutionRamp | None = None,
    ) -> None:
        super().__init__()
        self.ramp = ramp
        self.resolution = 0 if ramp is None else ramp.full  # what the coming epochs train at
        self.paces: dict[int, list[float]] = {}  # a step's seconds in recent epochs, by resolution
        self.budget = budget
        self.steps_per_epoch = steps_per_epoch
        self.val_batches = max(val_batches, 1)
        self.test_batches = max(test_batches, 1)
        self.verbose = verbose
        self.first_step_seconds: float | None = None  # the first step: compiling it included
        self.step_seconds: float | None = None  # at the resolution training now
        self.epoch_end_seconds: float | None = None
        self.first_epoch_end: float | None = None  # with the validation's compiling
        self.recompiling = False  # a new phase's first epoch: its epoch end is not the pace
        self.planned = 0
        self.step = 0
        self.epochs_run = 0

    # the optimizer (PlannedAdamW) that holds the plan
    def _optimizer(self):
        return self.model.optimizer  # on JAX, reading .model syncs the state: a set is seen

    def on_train_begin(self, logs=None) -> None:
        optimizer = self._optimizer()
        self.step = int(keras.ops.convert_to_numpy(optimizer.iterations))  # a resume's steps
        self.planned = int(round(float(keras.ops.convert_to_numpy(optimizer.plan.value))))
        if self.first_step_seconds is not None:  # a later phase's fit (progressive resizing)
            self.recompiling = True  # its first epoch end compiles the validation again
            if self.paces:  # the new resolution's pace: measured, else scaled from one that was
                self.step_seconds = pace_of(self._measured(), self.resolution)
            return
        self.budget.mark("starting fit")
        if self.budget.left() <= self.reserve():
            raise self.budget.too_short(self.reserve(), "setup")
        if self.verbose:
            print(
                f"time budget {format_seconds(self.budget.seconds)}: {self.budget.spent()}",
                flush=True,
            )

    def on_epoch_begin(self, epoch, logs=None) -> None:
        self.epoch_begin = time.monotonic()
        self.epoch_first_step = self.step
        self.measured_from: tuple[float, int] | None = None  # (time, step) timing starts at
        self.last_batch_end: float | None = None

    def on_train_batch_end(self, batch, logs=None) -> None:
        self.step += 1
        now = time.monotonic()
        if self.first_step_seconds is None:  # compiled in this step
            self.first_step_seconds = now - self.epoch_begin
            self.budget.mark("first step")
            if self.budget.left() <= self.reserve():
                raise self.budget.too_short(self.reserve(), "setup and the first step")
        if self.measured_from is None:  # timing starts after a step (the first compiles)
            self.measured_from = (now, self.step)
        else:
            since, at = self.measured_from
            self.last_batch_end = now
            steps = self.step - at
            if self.epochs_run == 0 and steps in CALIBRATE_AT:  # the first estimates
                self._replan((now - since) / steps)
        if self.step >= self.planned or self.budget.left() <= self.reserve():
            self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None) -> None:
        now = time.monotonic()
        self.epochs_run += 1
        if self.measured_from is not None and self.step - self.measured_from[1] > 0:
            since, at = self.measured_from
            end = self.last_batch_end or since
            step_seconds = (end - since) / (self.step - at)
            epoch_end = now - end
        else:  # one step this epoch: its time is all there is
            step_seconds = self.first_step_seconds or (now - self.epoch_begin)
            epoch_end = 0.0
        # the pace of the last epochs: a busy minute moves the plan (and the schedule) less; a
        # machine that stays slower moves it within SMOOTH epochs, and the budget's own check
        # at every step stops a run that falls behind all the same
        recent = self.paces.get(self.resolution, [])
        self.paces[self.resolution] = [*recent[1 - SMOOTH :], step_seconds]
        self.step_seconds = self._measured()[self.resolution]
        if self.first_epoch_end is None:  # compiling the validation included
            self.first_epoch_end = epoch_end
        if not (self.recompiling and self.epoch_end_seconds is not None):
            self.epoch_end_seconds = epoch_end
        self.recompiling = False
        if not self.model.stop_training:
            self._replan(self.step_seconds)
            if self.planned <= self.step:
                self.model.stop_training = True
        if self.verbose:
            self._print(epoch, logs or {}, now - self.epoch_begin)

    def _forward_batch(self) -> float:
        """Seconds of one batch of validation or test: measured once a validation ran (the
        second, whose compiling is done), else half a train step (a forward pass)."""
        if self.epoch_end_seconds is not None and self.epochs_run >= 2:
            return self.epoch_end_seconds / self.val_batches
        return (self.step_seconds or 0.0) / 2

    def _eval_compile(self) -> float:
        """Seconds to compile a validation or test: the first validation's extra, once two
        were timed; before, the first train step's (compiling a forward pass takes less)."""
        if self.first_epoch_end is not None and self.epochs_run >= 2:
            return max(self.first_epoch_end - (self.epoch_end_seconds or 0.0), 0.0)
        return self.first_step_seconds or 0.0

    def epoch_end(self) -> float:
        """Seconds the end of each coming epoch takes (validation, history, checkpoint)."""
        if self.epoch_end_seconds is not None and self.epochs_run >= 2:
            return self.epoch_end_seconds
        guess = self._forward_batch() * self.val_batches + 1.0  # + the checkpoint's write
        if self.first_epoch_end is not None:  # an upper bound: it compiled too
            return min(self.first_epoch_end, guess)
        return guess

    def reserve(self) -> float:
        """Seconds kept for what comes once: the first validation's compiling (until it
        ran), the final test (its batches at the validation's pace, plus compiling the model
        that predicts), the save, and a margin."""
        pending = self._eval_compile() if self.first_epoch_end is None else 0.0
        test = self._forward_batch() * self.test_batches + self._eval_compile()
        return pending + test + SAVE_SECONDS + MARGIN * self.budget.seconds

    def _measured(self) -> dict[int, float]:
        """A step's seconds by resolution: the mean of its last SMOOTH epochs."""
        return {res: float(np.mean(seconds)) for res, seconds in self.paces.items()}

    def _replan(self, step_seconds: float) -> None:
        self.step_seconds = step_seconds
        position = (self.step - self.epoch_first_step) % self.steps_per_epoch
        seconds = self.budget.left() - self.reserve()
        if self.ramp is None:
            more = plan_steps(
                seconds, step_seconds, self.epoch_end(), self.steps_per_epoch, position
            )
            planned = max(self.step + more, 1)
        else:  # each phase at its pace; a phase to come compiles its step and validation
            measured = {**self._measured(), self.resolution: step_seconds}
            planned = plan_ramp_steps(
                seconds,
                self.ramp,
                measured,
                self.epoch_end(),
                self.steps_per_epoch,
                self.step,
                position,
                switch_seconds=(self.first_step_seconds or 0.0) + self._eval_compile(),
                floor=self.resolution,
            )
            planned = max(planned, self.step, 1)
        if planned == self.planned:
            return
        self.planned = planned
        self._optimizer().plan.assign(np.float32(planned))  # JAX: after the state's sync

    def _print(self, epoch: int, logs: dict, seconds: float) -> None:
        numbers = {k: v for k, v in logs.items() if isinstance(v, (int, float, np.floating))}
        shown = " - ".join(f"{key} {value:.4f}" for key, value in numbers.items())
        total = max(self.planned, self.step)
        at = "" if self.ramp is None else f" at {self.resolution}px"
        print(
            f"epoch {epoch + 1}{at} (step {self.step} of {total} planned, "
            f"{format_seconds(self.budget.elapsed())} of {format_seconds(self.budget.seconds)})"
            f" - {seconds:.0f}s - {shown}",
            flush=True,
        )
