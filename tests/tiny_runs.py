"""Tiny runs shared by the test modules: one training per model, one `--format all` export.

Training and exporting a tiny run take 10-40 s; the modules that need the same run (1 epoch of
the `tiny` preset on `shapes:300`) take it from here. A module that writes into a run works on
a copy (`copy_tiny_run`); `TinyRuns.exported` is read-only for everyone.

Under pytest-xdist (`make test` runs two workers) the workers share one folder: the first to
need a run makes it under a file lock, the others wait for it and reuse it.
"""

from __future__ import annotations

import fcntl
import shutil
from collections.abc import Callable
from pathlib import Path

DATA = "shapes:300"
CALIB_SAMPLES = 64


class TinyRuns:
    """Tiny runs made on first use and kept for the session (imports stay inside, so that a
    module run on another backend, or without TensorFlow, never pays for them)."""

    def __init__(self, root: Path):
        self.root = root

    def trained(self, model: str) -> Path:
        """`toolkit train --model MODEL --preset tiny --data shapes:300 --epochs 1`: nothing
        exported."""

        def make(out: Path) -> None:
            from toolkit.training.train import TrainOptions, train

            train(TrainOptions(model, "tiny", DATA, epochs=1), out=out)

        return made_once(self.root / "trained" / model, make)

    def exported(self, model: str) -> Path:
        """The trained run copied and exported to every format (`--format all`, 64
        calibration images) into RUN/export."""

        def make(run: Path) -> None:
            from toolkit.export import export_run

            copy_tiny_run(self.trained(model), run)
            export_run(run, "all", calib_samples=CALIB_SAMPLES)

        return made_once(self.root / "exported" / model, make)


def made_once(path: Path, make: Callable[[Path], None]) -> Path:
    """`path`, made by `make(path)` unless this session made it already (in any worker: the
    maker holds PATH.lock; PATH.done marks it whole, so a failed attempt is made again)."""
    done = path.with_name(path.name + ".done")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.exists():
            shutil.rmtree(path, ignore_errors=True)
            make(path)
            done.touch()
    return path


def copy_tiny_run(run: Path, dest: Path) -> Path:
    """A copy of `run` at `dest` (bench outputs left out), for a test that writes into it."""
    shutil.copytree(run, dest, ignore=shutil.ignore_patterns("bench*"))
    return dest
