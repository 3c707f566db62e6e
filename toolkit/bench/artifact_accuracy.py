"""Top-1 of every exported artifact of a run against its Keras model, on held-out images.

    python -m toolkit.bench.artifact_accuracy RUN [--data SPEC] [--batch N]

Uses the test split of the run's data (never seen in training nor in int8 calibration, which
draws from the train split) unless --data names another spec; prints a markdown table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from toolkit import accuracy
from toolkit.bench.roofline import KERAS_FORMAT
from toolkit.common.errors import UsageError
from toolkit.runfiles.data import load_split
from toolkit.runfiles.folder import MODEL_FILE, open_run
from toolkit.runtimes import open_artifact, run_in_chunks
from toolkit.runtimes.base import Session, close_session


def _logits(path: Path, images: np.ndarray, batch: int, runtime: str | None = None) -> np.ndarray:
    """`path`'s outputs on `images` in `runtime` (default: by suffix), the session closed after
    (a browser runtime's page and Playwright end before another opens)."""
    session = open_artifact(path, runtime)
    try:
        return run_in_chunks(session.run, images, batch)
    finally:
        close_session(session)


def test_split(run_dir: Path, data_spec: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """float32 images and labels of the test split of the run's data (or `data_spec`, which
    must have the run's classes)."""
    images, labels, _ = load_split(open_run(run_dir), "test", data_spec)
    return images, labels


def top1(
    path: Path,
    images: np.ndarray,
    labels: np.ndarray,
    batch: int = 64,
    runtime: str | None = None,
) -> float:
    """Top-1 of one artifact on `images`, in `runtime` (default: the file's by suffix)."""
    return accuracy.top1(_logits(path, images, batch, runtime), labels)


def session_top1(
    session: Session, images: np.ndarray, labels: np.ndarray, batch: int = 64
) -> float:
    """Top-1 of a session already open (a bench's web row: the page that timed it) on `images`,
    as `top1` computes it."""
    return accuracy.top1(run_in_chunks(session.run, images, batch), labels)


def measure(run_dir: Path, data_spec: str | None = None, batch: int = 64) -> list[dict]:
    """One row per artifact: top-1, delta to Keras, top-1 agreement, logits max abs error and
    the images whose top two scores tie."""
    run = open_run(run_dir)
    images, labels = test_split(run.path, data_spec)
    reference = _logits(run.path / MODEL_FILE, images, batch)
    manifest = run.manifest()
    keras_top1 = accuracy.top1(reference, labels)
    rows = [{"artifact": MODEL_FILE, "format": KERAS_FORMAT, "top1": keras_top1, "delta": 0.0,
             "agreement": 1.0, "max_abs": 0.0,
             "tied": int(accuracy.tied_top1(reference).sum())}]  # fmt: skip
    for fmt, entry in manifest.artifacts.items():
        logits = _logits(run.export_dir / entry.file, images, batch)
        scores = accuracy.top1_vs_reference(logits, reference, labels)
        rows.append({
            "artifact": entry.file,
            "format": fmt,
            "top1": scores["top1_accuracy"],
            "delta": scores["top1_delta"],
            "agreement": scores["top1_agreement"],
            "max_abs": float(np.max(np.abs(logits - reference))),
            "tied": int(accuracy.tied_top1(logits).sum()),
        })  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--data", help="data spec (default: the run's); its test split is used")
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args(argv)
    try:
        rows = measure(args.run, args.data, args.batch)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        "| format | file | top-1 | delta vs Keras (points) | top-1 agreement | logits max abs "
        "| tied top-1 |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['format']} | {r['artifact']} | {r['top1']:.2%} | {100 * r['delta']:+.2f} "
            f"| {r['agreement']:.2%} | {r['max_abs']:.2e} | {r['tied']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
