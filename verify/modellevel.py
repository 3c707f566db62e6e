"""Model level: every artifact in RUN/export against the run's Keras model on real images."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from toolkit.accuracy import top1
from toolkit.errors import UsageError, first_line
from toolkit.formats import FORMATS
from toolkit.progress import progress
from toolkit.rundata import load_split
from toolkit.runfolder import MODEL_FILE, Run
from toolkit.runtimes import RUNTIMES, run_in_chunks
from verify.cells import ERROR, FAIL, PASS, UNAVAILABLE, cell, open_session, summarize
from verify.metrics import compare_logits
from verify.modelrules import format_rules, judge_model, rule_for
from verify.oplevel import check_runtimes
from verify.tolerance import DEFAULT_TOLERANCES, Tolerances

CHUNK = 256  # images per runtime call: bounds activation memory on big test splits


def test_images(run: Run, samples: int | None) -> tuple[np.ndarray, np.ndarray, str]:
    """The first `samples` (default all) test images of the run's data, float32 0-255."""
    if samples is not None and samples < 1:
        raise UsageError(f"--samples must be a positive integer, got {samples}")
    images, labels, spec = load_split(run, "test")
    return images[:samples], labels[:samples], spec


def verify_models(
    run: Run,
    runtimes: Iterable[str] | None = None,
    samples: int | None = None,
    tolerances: Tolerances = DEFAULT_TOLERANCES,
    data: tuple[np.ndarray, np.ndarray, str] | None = None,
) -> dict:
    """Model-level report: a cell per (artifact, runtime) with logits metrics vs Keras.

    `data`: (images, labels, spec) already loaded by `test_images`, else loaded here.
    """
    start = time.perf_counter()
    chosen = check_runtimes(runtimes)
    folder, manifest = run.export_dir, run.manifest()
    images, labels, spec = data if data is not None else test_images(run, samples)
    reference_session = open_session(run.path / MODEL_FILE, "keras")
    if isinstance(reference_session, str):
        raise UsageError(f"the Keras reference cannot run: {reference_session}")
    check_labels_fit(labels, manifest)
    reference = run_in_chunks(reference_session.run, images, CHUNK)
    reference_accuracy = top1(reference, labels)
    cells = []
    todo = [
        (fmt, folder / str(entry.get("file", "")), runtime)
        for fmt, entry in manifest["artifacts"].items()
        for runtime in chosen
        if (folder / str(entry.get("file", ""))).suffix in RUNTIMES[runtime].suffixes
    ]
    for fmt, path, runtime in todo:
        cells.append(_model_cell(fmt, path, runtime, images, labels, reference, tolerances))
        progress("verify model cells", len(cells), len(todo), f"{fmt} on {runtime} done")
    return {
        "export_folder": str(folder),
        "data": spec,
        "split": "test",
        "samples": int(len(images)),
        "reference": {"runtime": "keras", "file": MODEL_FILE, "top1_accuracy": reference_accuracy},
        "runtimes": chosen,
        "rules": {f: r.describe(tolerances) for f, r in format_rules().items()},
        "cells": cells,
        "summary": summarize(cells),
        "seconds": round(time.perf_counter() - start, 1),
    }


def check_labels_fit(labels: np.ndarray, manifest: dict) -> None:
    """UsageError when a test label has no logit (data of another run)."""
    classes = int(manifest.get("num_classes") or 0)
    if classes and len(labels) and int(labels.max()) >= classes:
        raise UsageError(
            f"test label {int(labels.max())} does not fit the model's {classes} classes: "
            "the run's data changed since training"
        )


def _model_cell(
    fmt: str,
    path: Path,
    runtime: str,
    images: np.ndarray,
    labels: np.ndarray,
    reference: np.ndarray,
    tolerances: Tolerances,
) -> dict:
    """Run one artifact in one runtime and judge its logits against the Keras logits."""
    base = {"level": "model", "format": fmt, "file": path.name}
    try:
        rule = rule_for(fmt)
    except UsageError as exc:  # an artifact without a rule is an error, never a pass
        return cell(base, runtime, "unknown", fmt, ERROR, reason=str(exc))
    precision = FORMATS[fmt].precision
    if not path.is_file():
        reason = f"{path} is listed in model.json but missing: export it again"
        return cell(base, runtime, precision, fmt, ERROR, reason=reason)
    try:
        session = open_session(path, runtime)
        if isinstance(session, str):
            return cell(base, runtime, precision, fmt, UNAVAILABLE, reason=session)
        logits = run_in_chunks(session.run, images, CHUNK)
        metrics = compare_logits(logits, reference, labels)
    except Exception as exc:  # noqa: BLE001  (a runtime failure is that cell's error)
        first = first_line(exc)
        return cell(base, runtime, precision, fmt, ERROR, reason=first)
    failed = judge_model(rule, metrics, tolerances)
    return cell(
        base,
        runtime,
        precision,
        fmt,
        FAIL if failed else PASS,
        reason="; ".join(failed) or None,
        providers=list(session.providers),
        metrics=metrics,
        tolerance=rule.describe(tolerances),
    )


__all__ = ["test_images", "verify_models"]
