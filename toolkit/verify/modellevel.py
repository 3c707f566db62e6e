"""Model level: every artifact in RUN/export against the run's Keras model on real images."""

from __future__ import annotations

import time
from collections.abc import Iterable
from functools import partial

import numpy as np

from toolkit.accuracy import top1
from toolkit.common.errors import UsageError
from toolkit.predict import softmax
from toolkit.runfiles import Manifest
from toolkit.runfiles.data import load_split
from toolkit.runfiles.folder import MODEL_FILE, Run
from toolkit.runtimes import DEFAULT_VERIFIED, open_artifact, run_in_chunks
from toolkit.runtimes.base import close_session, gives_probabilities
from toolkit.runtimes.web.session import one_browser
from toolkit.verify.artifacts import Target, artifact_cells, level_report
from toolkit.verify.cells import open_session, verdict
from toolkit.verify.error_metrics import compare_logits
from toolkit.verify.levels import choose_at
from toolkit.verify.rules import DEFAULT_TOLERANCES, MODEL_RULES, Tolerances, format_rules, judge

CHUNK = 256  # images per runtime call: bounds activation memory on big test splits


def test_images(run: Run, samples: int | None) -> tuple[np.ndarray, np.ndarray, str]:
    """The first `samples` (default all) test images of the run's data, float32 0-255."""
    if samples is not None and samples < 1:
        raise UsageError(f"--samples must be a positive integer, got {samples}")
    images, labels, spec = load_split(run, "test", option=None)
    return images[:samples], labels[:samples], spec


def verify_models(
    run: Run,
    runtimes: str | Iterable[str] = DEFAULT_VERIFIED,
    samples: int | None = None,
    tolerances: Tolerances = DEFAULT_TOLERANCES,
    data: tuple[np.ndarray, np.ndarray, str] | None = None,
) -> dict:
    """Model-level report: a cell per (artifact, runtime) with logits metrics vs Keras.

    `data`: (images, labels, spec) already loaded by `test_images`, else loaded here.
    """
    start = time.perf_counter()
    chosen = choose_at("models", runtimes)
    folder, manifest = run.export_dir, run.manifest()
    data = data if data is not None else test_images(run, samples)
    images, labels, _ = data
    reference_session = open_session(run.path / MODEL_FILE, "keras")
    if isinstance(reference_session, str):
        raise UsageError(f"the Keras reference cannot run: {reference_session}")
    check_labels_fit(labels, manifest)
    reference = run_in_chunks(reference_session.run, images, CHUNK)
    measure = partial(
        _model_cell, images=images, labels=labels, reference=reference, tolerances=tolerances
    )
    formats = list(manifest.artifacts)
    with one_browser():  # the web runtimes' cells in pages of one browser, started on first use
        cells = artifact_cells("model", folder, manifest, formats, chosen, MODEL_RULES, measure)
    rules = {f: r.describe(tolerances) for f, r in format_rules().items()}
    accuracy = {"top1_accuracy": top1(reference, labels)}
    return level_report(folder, data, accuracy, chosen, rules, cells, start)


def check_labels_fit(labels: np.ndarray, manifest: Manifest) -> None:
    """UsageError when a test label has no logit (data of another run)."""
    classes = manifest.num_classes or 0
    if classes and len(labels) and int(labels.max()) >= classes:
        raise UsageError(
            f"test label {int(labels.max())} does not fit the model's {classes} classes: "
            "the run's data changed since training"
        )


def _model_cell(
    target: Target,
    images: np.ndarray,
    labels: np.ndarray,
    reference: np.ndarray,
    tolerances: Tolerances,
) -> dict:
    """Run one artifact in one runtime and judge its logits against the Keras logits, or its
    probabilities (the .tflite app files) against softmax(Keras logits), by the same rule."""
    session = open_artifact(target.path, target.runtime)
    try:  # closed now: a browser runtime's page (or its browser) before the next opens
        outputs = run_in_chunks(session.run, images, CHUNK)
    finally:
        close_session(session)
    if gives_probabilities(session.output):
        reference = softmax(reference).astype(np.float32)
    metrics = compare_logits(outputs, reference, labels)
    status, reason = verdict(judge(target.rule, metrics, tolerances))
    return target.cell(
        status,
        reason,
        providers=list(session.providers),
        metrics=metrics,
        tolerance=target.rule.describe(tolerances),
    )


__all__ = ["test_images", "verify_models"]
