"""The timing protocol: warmup, then timed calls until a run count or a time budget; the stats.

Times come from `time.perf_counter_ns`; the stats are plain numpy on the per-call times.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

ROUNDS = 5  # consecutive slices of the timed calls whose medians give the spread


@dataclass(frozen=True)
class Protocol:
    """How long to measure: `warmup` untimed calls, then until `runs` calls or `seconds` pass."""

    warmup: int = 10
    runs: int | None = None
    seconds: float | None = 3.0

    def __post_init__(self) -> None:
        if self.runs is None and self.seconds is None:
            raise ValueError("a protocol needs runs, seconds or both")

    def done(self, count: int, elapsed_ns: int) -> bool:
        """Whether to stop after `count` timed calls that took `elapsed_ns` in all."""
        if self.runs is not None and count >= self.runs:
            return True
        return self.seconds is not None and count >= 1 and elapsed_ns >= self.seconds * 1e9


@dataclass(frozen=True)
class LatencyStats:
    """Per-call latency of one batch size, in milliseconds, and what it means per image."""

    runs: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    mean_ms: float
    std_ms: float
    min_ms: float
    max_ms: float
    images_per_s: float  # sustained: batch / mean latency
    round_p50_ms: list[float]  # median of each consecutive slice of the timed calls
    spread: float  # (max - min) / median of round_p50_ms: how noisy the figure is

    def to_dict(self) -> dict:
        return asdict(self)


def summarize(times_ns: np.ndarray | list[int], batch: int, rounds: int = ROUNDS) -> LatencyStats:
    """Stats of per-call times (nanoseconds) for calls of `batch` images each."""
    ms = np.asarray(times_ns, np.float64) / 1e6
    if ms.size == 0:
        raise ValueError("no timed calls to summarize")
    p50, p90, p99 = np.percentile(ms, [50, 90, 99])
    slices = np.array_split(ms, min(rounds, ms.size))
    round_p50 = [float(np.median(s)) for s in slices]
    return LatencyStats(
        runs=int(ms.size),
        p50_ms=float(p50),
        p90_ms=float(p90),
        p99_ms=float(p99),
        mean_ms=float(ms.mean()),
        std_ms=float(ms.std()),
        min_ms=float(ms.min()),
        max_ms=float(ms.max()),
        images_per_s=float(batch * 1e3 / ms.mean()),
        round_p50_ms=round_p50,
        spread=float((max(round_p50) - min(round_p50)) / np.median(round_p50)),
    )


def time_calls(call: Callable[[], object], protocol: Protocol) -> np.ndarray:
    """Run `call` `protocol.warmup` times untimed, then timed until the protocol is done."""
    for _ in range(protocol.warmup):
        call()
    times: list[int] = []
    elapsed = 0
    while not protocol.done(len(times), elapsed):
        start = time.perf_counter_ns()
        call()
        times.append(time.perf_counter_ns() - start)
        elapsed += times[-1]
    return np.asarray(times, np.int64)


def timed_once(call: Callable[[], object]) -> tuple[object, float]:
    """`call()`'s result and how long it took, in milliseconds."""
    start = time.perf_counter_ns()
    result = call()
    return result, (time.perf_counter_ns() - start) / 1e6
