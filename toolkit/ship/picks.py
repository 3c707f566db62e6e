"""The file chosen for each deployment target (placeholder: the Pick dataclass alone, as the
shared design gives it; the `ship` command's own picks.py replaces this file)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pick:
    target: str  # TARGETS key
    format: str  # FORMATS key
    file: str  # file name (in RUN/export and in the bundle)
    runtime: str  # the bench runtime whose latency ranked it
    p50_ms: float  # bench.json p50 at batch 1 on this machine
    top1: float  # the file's test top-1 (0-1), from verify.json / bench.json
    float_top1: float  # the float Keras model's top-1 on the same split
    agreement: float | None  # top-1 agreement with the float model (verify.json)
    size_bytes: int
