"""Progressive resizing (`--recipe progressive_resize=START:UNTIL`): a model without a position
embedding trains at a lower resolution early, where a step costs less, and at its own from
`UNTIL` of the schedule on, as FFCV's ResNet recipes ramp their resolution (Leclerc et al.,
CVPR 2023). The ramp is defined on the fraction of the run's steps, like its learning rate, so
a timed run (`--time`) plans its steps with each resolution's pace (`plan_ramp_steps`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

RES_STEP = 8  # the ramp's resolutions are multiples of it (and START): few of them, few compiles


@dataclass(frozen=True)
class ResolutionRamp:
    """Resolution START at the first step, rising linearly (rounded down to a multiple of
    RES_STEP) to `full`, the model's own, at the fraction `until` of the steps; `full` after."""

    start: int
    until: float
    full: int

    def at(self, fraction: float) -> int:
        """The resolution of the step at `fraction` (0 to 1) of the run: its phase's."""
        return max(res for start, res in self.phases() if start <= max(fraction, 0.0))

    def phases(self) -> list[tuple[float, int]]:
        """(fraction it starts at, resolution) of each phase, in order: the first at 0."""
        levels = [r for r in range(self.start + 1, self.full) if r % RES_STEP == 0]
        span = (self.full - self.start) / self.until
        phases = [(0.0, self.start)]
        phases += [((level - self.start) / span, level) for level in levels]
        return phases + [(self.until, self.full)]


def ramp_of(progressive_resize: tuple[int, float] | None, full: int) -> ResolutionRamp | None:
    """The recipe's ramp to the model's resolution `full`; None without one."""
    if progressive_resize is None:
        return None
    start, until = progressive_resize
    return ResolutionRamp(int(start), float(until), int(full))


def pace_of(measured: Mapping[int, float], resolution: int) -> float:
    """Seconds a step takes at `resolution`: measured, else the nearest measured resolution's
    scaled by the pixels (a step's cost grows with the tokens, about as the area)."""
    if resolution in measured:
        return measured[resolution]
    nearest = min(measured, key=lambda r: abs(r - resolution))
    return measured[nearest] * (resolution / nearest) ** 2


def plan_ramp_steps(
    seconds: float,
    ramp: ResolutionRamp,
    measured: Mapping[int, float],
    epoch_end_seconds: float,
    steps_per_epoch: int,
    step: int,
    epoch_step: int = 0,
    switch_seconds: float = 0.0,
    floor: int = 0,
) -> int:
    """The largest total of steps N whose steps from `step` (`epoch_step` into an epoch) fit
    in `seconds`: each at its phase's pace (`pace_of`; a phase below `floor`, the resolution
    training now, at the floor's: a run never steps back down), a phase starting at a fraction
    of N, every epoch's end `epoch_end_seconds` (the last may stop at any step: it still ends)
    and every phase still to start `switch_seconds` (compiling its step). `step` when none fit."""
    phases = [(start, max(resolution, floor)) for start, resolution in ramp.phases()]
    bounds = [*(start for start, _ in phases[1:]), 1.0]

    def needs(total: int) -> float:
        more = total - step
        if more <= 0:
            return 0.0
        spent = math.ceil((epoch_step + more) / steps_per_epoch) * epoch_end_seconds
        for (start, resolution), end in zip(phases, bounds, strict=True):
            first, last = max(math.ceil(start * total), step), math.ceil(end * total)
            if last > first:
                spent += (last - first) * pace_of(measured, resolution)
                spent += switch_seconds if first > step and resolution > floor else 0.0
        return spent

    fastest = min(pace_of(measured, resolution) for _, resolution in phases)
    low, high = step, step + int(seconds // fastest) + 1  # needs(high) > seconds
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if needs(middle) <= seconds else (low, middle)
    return low
