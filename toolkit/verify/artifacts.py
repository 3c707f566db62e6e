"""The (artifact, runtime) cells of the model and layer levels, built one way for both: which
cells, the checks before measuring (rule, file, runtime), and the level's report body."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from toolkit.common.errors import UsageError, first_line
from toolkit.common.progress import progress
from toolkit.formats import FORMATS
from toolkit.runfiles import MANIFEST_FILE, Manifest
from toolkit.runfiles.folder import MODEL_FILE
from toolkit.runtimes import VERIFIED_RUNTIMES, RuntimeUnavailable
from toolkit.verify.cells import ERROR, NOT_APPLICABLE, UNAVAILABLE, cell, summarize
from toolkit.verify.rules import Rule, rule_for


@dataclass(frozen=True)
class Target:
    """One exported artifact in one runtime, ready to measure: its file, rule and cell fields."""

    level: str  # "model" or "layers": the cells' `level`
    fmt: str
    path: Path
    runtime: str
    rule: Rule

    def cell(self, status: str, reason: str | None = None, **extra: object) -> dict:
        """This artifact's report cell in this runtime."""
        base = {"level": self.level, "format": self.fmt, "file": self.path.name}
        precision = FORMATS[self.fmt].precision
        return cell(base, self.runtime, precision, self.fmt, status, reason=reason, **extra)


Measure = Callable[[Target], dict]  # runs a ready target and returns its judged cell


def _applies(fmt: str) -> str | None:
    return None


def artifact_cells(
    level: str,
    folder: Path,
    manifest: Manifest,
    formats: Sequence[str],
    runtimes: Sequence[str],
    rules: Mapping[str, Rule],
    measure: Measure,
    not_applicable: Callable[[str], str | None] = _applies,
) -> list[dict]:
    """A cell per artifact of `formats` (exported in `manifest`) x each of `runtimes` that opens
    its file: `measure`d, or the error or unavailability that kept it from being measured, or
    n/a where `not_applicable(format)` says why the level cannot measure that format."""
    files = {fmt: manifest.artifacts[fmt].file for fmt in formats}
    todo = [
        (fmt, folder / files[fmt], runtime)
        for fmt in formats
        for runtime in runtimes
        if Path(files[fmt]).suffix in VERIFIED_RUNTIMES[runtime].suffixes
    ]
    cells = []
    for fmt, path, runtime in todo:
        why = not_applicable(fmt)
        cells.append(_artifact_cell(level, fmt, path, runtime, rules, measure, why))
        progress(f"verify {level} cells", len(cells), len(todo), f"{fmt} on {runtime} done")
    return cells


def _artifact_cell(
    level: str,
    fmt: str,
    path: Path,
    runtime: str,
    rules: Mapping[str, Rule],
    measure: Measure,
    not_applicable: str | None = None,
) -> dict:
    """The checks every artifact cell passes before `measure`: a rule, the file, the runtime,
    and a level that applies to the format (else `not_applicable` says why not)."""
    try:
        target = Target(level, fmt, path, runtime, rule_for(fmt, rules))
    except UsageError as exc:  # an artifact without a rule is an error, never a pass
        base = {"level": level, "format": fmt, "file": path.name}
        return cell(base, runtime, "unknown", fmt, ERROR, reason=str(exc))
    if not path.is_file():
        missing = f"{path} is listed in {MANIFEST_FILE} but missing: export it again"
        return target.cell(ERROR, missing)
    if not_applicable is not None:
        return target.cell(NOT_APPLICABLE, not_applicable)
    reason = VERIFIED_RUNTIMES[runtime].unavailable()
    if reason is not None:
        return target.cell(UNAVAILABLE, reason)
    try:
        return measure(target)
    except RuntimeUnavailable as exc:  # e.g. ORT fell back to CPU: never a CPU result
        return target.cell(UNAVAILABLE, exc.reason)
    except Exception as exc:  # noqa: BLE001  (a runtime failure is that cell's error)
        return target.cell(ERROR, first_line(exc))


def level_report(
    folder: Path,
    data: tuple[np.ndarray, np.ndarray, str],
    reference: dict,
    runtimes: Sequence[str],
    rules: Mapping[str, dict],
    cells: list[dict],
    start: float,
    **extra: object,
) -> dict:
    """The report of the model or layer level: data, Keras reference, `extra`, the rules
    described per format, the cells and their summary, seconds since `start`."""
    images, _, spec = data
    return {
        "export_folder": str(folder),
        "data": spec,
        "split": "test",
        "samples": int(len(images)),
        "reference": {"runtime": "keras", "file": MODEL_FILE, **reference},
        "runtimes": list(runtimes),
        **extra,
        "rules": dict(rules),
        "cells": cells,
        "summary": summarize(cells),
        "seconds": round(time.perf_counter() - start, 1),
    }
