"""Tiny runs shared by the test modules: one training per model, one `--format all` export.

Training and exporting a tiny run take 10-40 s; the modules that need the same run (1 epoch of
the `tiny` preset on `shapes:300`) take it from here. A module that writes into a run works on
a copy (`copy_tiny_run`); `TinyRuns.exported` is read-only for everyone.
"""

from __future__ import annotations

import shutil
from pathlib import Path

DATA = "shapes:300"
CALIB_SAMPLES = 64


class TinyRuns:
    """Tiny runs made on first use and kept for the session (imports stay inside, so that a
    module run on another backend, or without TensorFlow, never pays for them)."""

    def __init__(self, root: Path):
        self.root = root
        self._trained: dict[str, Path] = {}
        self._exported: dict[str, Path] = {}

    def trained(self, model: str) -> Path:
        """`toolkit train --model MODEL --preset tiny --data shapes:300 --epochs 1`: nothing
        exported."""
        if model not in self._trained:
            from toolkit.training.train import TrainOptions, train

            out = self.root / "trained" / model
            self._trained[model] = Path(train(TrainOptions(model, "tiny", DATA, epochs=1), out=out))
        return self._trained[model]

    def exported(self, model: str) -> Path:
        """The trained run copied and exported to every format (`--format all`, 64
        calibration images) into RUN/export."""
        if model not in self._exported:
            from toolkit.export import export_run

            run = copy_tiny_run(self.trained(model), self.root / "exported" / model)
            export_run(run, "all", calib_samples=CALIB_SAMPLES)
            self._exported[model] = run
        return self._exported[model]


def copy_tiny_run(run: Path, dest: Path) -> Path:
    """A copy of `run` at `dest` (bench outputs left out), for a test that writes into it."""
    shutil.copytree(run, dest, ignore=shutil.ignore_patterns("bench*"))
    return dest
