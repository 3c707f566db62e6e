"""Op level: every OP_CASES op at every shape, exported, run in every runtime, vs NumPy."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from toolkit.common.argtypes import ALL, choose_names
from toolkit.common.errors import UsageError, first_line
from toolkit.common.progress import progress
from toolkit.common.scratch import scratch_dir
from toolkit.verify.cells import ERROR, NOT_APPLICABLE, cell, run_cell, summarize
from toolkit.verify.levels import choose_at
from toolkit.verify.ops import SHAPE_SETS
from toolkit.verify.ops.artifacts import OP_ARTIFACTS, PRECISIONS, OpExport, artifact_for
from toolkit.verify.ops.cases import (
    OP_CASES,
    LayerClass,
    OpCase,
    Params,
    case_inputs,
    case_model,
)
from toolkit.verify.rules import DEFAULT_TOLERANCES, Tolerances

BATCH = 2  # samples per verified call: a dynamic batch > 1
# int8 calibration samples per op model; the BATCH verified samples are among them, so int8
# errors measure rounding and requantization, not clipping of values calibration never saw
CALIB_SAMPLES = 32


def _shape_list(case: OpCase, shapes: str | Mapping[str, Sequence[Params]]) -> Sequence[Params]:
    if isinstance(shapes, str):
        if shapes not in SHAPE_SETS:
            raise UsageError(f"unknown shape set '{shapes}': choose from {', '.join(SHAPE_SETS)}")
        return case.shapes[shapes]
    return shapes.get(case.name, case.shapes["quick"])


def _check_overrides(overrides: Mapping[str, LayerClass], ops: list[str]) -> None:
    for name in overrides:
        if name not in OP_CASES or OP_CASES[name].default_layer is None:
            takers = [c.name for c in OP_CASES.values() if c.default_layer is not None]
            raise UsageError(f"op '{name}' cannot be overridden: choose from {', '.join(takers)}")


def verify_ops(
    shapes: str | Mapping[str, Sequence[Params]] = "full",
    ops: str | Iterable[str] = ALL,
    runtimes: str | Iterable[str] = ALL,
    tolerances: Tolerances = DEFAULT_TOLERANCES,
    overrides: Mapping[str, LayerClass] | None = None,
    seed: int = 0,
) -> dict:
    """Op-level report: a cell per (op, shape, runtime, precision) with metrics and status.

    `shapes`: "full" (seed presets' shapes + small odd ones), "quick" (small odd ones), or
    {op: [params, ...]}. `overrides`: {op: layer class} built with the op's constructor
    arguments in place of the toolkit layer, e.g. to check that a wrong op fails. `ops`,
    `runtimes`: comma lists or lists of names (default all).
    """
    names = choose_names(ops, OP_CASES, "op")
    chosen = choose_at("ops", runtimes)
    overrides = dict(overrides or {})
    _check_overrides(overrides, names)
    start = time.perf_counter()
    cells: list[dict] = []
    per_shape = len(chosen) * len(PRECISIONS)  # one cell per runtime and precision
    total = per_shape * sum(len(_shape_list(OP_CASES[n], shapes)) for n in names)
    with scratch_dir("verify") as scratch:
        for name in names:
            case = OP_CASES[name]
            for i, params in enumerate(_shape_list(case, shapes)):
                folder = Path(scratch) / f"{name}-{i}"
                folder.mkdir()
                cells += _verify_shape(
                    case, params, chosen, tolerances, overrides.get(name), seed, folder
                )
                progress("verify op cells", len(cells), total, f"{name} {case.label(params)} done")
    return {
        "shapes": shapes if isinstance(shapes, str) else "custom",
        "runtimes": chosen,
        "precisions": list(PRECISIONS),
        "artifacts": {a.name: [a.precision, list(a.runtimes)] for a in OP_ARTIFACTS.values()},
        "overrides": {k: getattr(v, "__name__", str(v)) for k, v in overrides.items()},
        "cases": {n: OP_CASES[n].description for n in names},
        "cells": cells,
        "summary": summarize(cells),
        "seconds": round(time.perf_counter() - start, 1),
    }


def _verify_shape(
    case: OpCase,
    params: Params,
    runtimes: list[str],
    tolerances: Tolerances,
    override: LayerClass | None,
    seed: int,
    folder: Path,
) -> list[dict]:
    """Build one op model, export what the runtimes need, and judge every cell."""
    base = {
        "level": "op",
        "op": case.name,
        "shape": case.label(params),
        "params": dict(params),
        "override": None if override is None else getattr(override, "__name__", str(override)),
    }
    built = _build(case, params, override, seed, folder)
    written: dict[str, Path | str] = {}
    cells = []
    for runtime in runtimes:
        for precision in PRECISIONS:
            artifact = artifact_for(runtime, precision)
            if artifact is None:
                reason = f"{runtime} runs no {precision} artifact of this op"
                cells.append(cell(base, runtime, precision, None, NOT_APPLICABLE, reason=reason))
            elif isinstance(built, str):
                cells.append(cell(base, runtime, precision, artifact.name, ERROR, reason=built))
            else:
                op, x, expected = built
                if artifact.name not in written:
                    written[artifact.name] = _write(op, artifact.name, folder)
                path = written[artifact.name]
                rule = case.rule(precision)
                cells.append(
                    run_cell(
                        base, runtime, precision, artifact.name, path, x, expected, rule, tolerances
                    )
                )
    return cells


def _build(
    case: OpCase, params: Params, override: LayerClass | None, seed: int, folder: Path
) -> tuple[OpExport, np.ndarray, np.ndarray] | str:
    """(the op model to export, the verified samples, their reference), or why it failed."""
    try:
        model = case_model(case, params, override, seed)
        shape = case.input_shape(params)
        x = case_inputs(shape, BATCH, seed + 1)
        expected = case.reference(model, params, x)
        calibration = np.concatenate([x, case_inputs(shape, CALIB_SAMPLES - BATCH, seed + 2)])
    except Exception as exc:  # noqa: BLE001  (a broken op fails its cells, not the command)
        return f"building the op failed: {_line(exc)}"
    return OpExport(model, shape, calibration, folder), x, expected


def _write(op: OpExport, name: str, folder: Path) -> Path | str:
    """The artifact's path, or the one-line reason its conversion failed."""
    artifact = OP_ARTIFACTS[name]
    path = folder / artifact.filename
    try:
        artifact.write(op, path)
    except Exception as exc:  # noqa: BLE001  (a conversion failure is that cell's error)
        return f"{name} conversion failed: {_line(exc)}"
    return path


def _line(exc: BaseException) -> str:
    name = type(exc).__name__
    return f"{name}: {first_line(exc)}" if str(exc).strip() else name
