"""Tiny runs shared by the test modules: one training per model, one `--format all` export.

Training and exporting a tiny run take 10-40 s; the modules that need the same run (1 epoch of
the `tiny` preset on `shapes:300`) take it from here. A module that writes into a run works on
a copy (`copy_tiny_run`); `TinyRuns.exported` is read-only for everyone.

Under pytest-xdist (`make test` runs two workers) the workers share one folder: the first to
need a run makes it under a file lock; another that needs it meanwhile makes the other model's
run of that kind, then waits for it and reuses it.
"""

from __future__ import annotations

import fcntl
import shutil
from collections.abc import Callable
from functools import partial
from pathlib import Path

DATA = "shapes:300"
MODELS = ("shiftvit", "vit-lsa")  # the models with shared tiny runs
CALIB_SAMPLES = 64
BENCH_FORMATS = "onnx,tflite,tflite-int8"
PROVENANCE = {"author": "Example Labs", "license": "Apache-2.0"}  # train's --author, --license


class TinyRuns:
    """Tiny runs made on first use and kept for the session (imports stay inside, so that a
    module run on another backend, or without TensorFlow, never pays for them)."""

    def __init__(self, root: Path):
        self.root = root

    def trained(self, model: str) -> Path:
        """`toolkit train --model MODEL --preset tiny --data shapes:300 --epochs 1` with an
        --author and --license (PROVENANCE): nothing exported."""
        return self._shared("trained", model, self._train)

    def exported(self, model: str) -> Path:
        """The trained run copied and exported to every format (`--format all`, 64
        calibration images) into RUN/export."""
        return self._shared("exported", model, self._export_all)

    def _train(self, model: str, out: Path) -> None:
        from toolkit.training.options import TrainOptions
        from toolkit.training.train import train

        train(TrainOptions(model, "tiny", DATA, epochs=1, **PROVENANCE), out=out)

    def _export_all(self, model: str, run: Path) -> None:
        from toolkit.export import export_run

        copy_tiny_run(self.trained(model), run)
        export_run(run, "all", calib_samples=CALIB_SAMPLES)

    def _shared(self, kind: str, model: str, make: Callable[[str, Path], None]) -> Path:
        """The `kind` run of `model`, made by `make(model, path)`; while another worker makes
        it, this one makes the other models' `kind` runs (a module that needs one needs both,
        soon), then waits."""
        if made_once(self.root / kind / model, partial(make, model), wait=False) is None:
            for other in MODELS:
                if other != model:
                    made_once(self.root / kind / other, partial(make, other), wait=False)
        return made_once(self.root / kind / model, partial(make, model))

    def bench_ready(self, model: str) -> Path:
        """The exported run copied and cut to the CPU files the bench tests time
        (BENCH_FORMATS), read-only: a test that benches copies it."""

        def make(run: Path) -> None:
            only_formats(copy_tiny_run(self.exported(model), run), BENCH_FORMATS)

        return made_once(self.root / "bench_ready" / model, make)


def made_once(path: Path, make: Callable[[Path], None], wait: bool = True) -> Path | None:
    """`path`, made by `make(path)` unless this session made it already (in any worker: the
    maker holds PATH.lock; PATH.done marks it whole, so a failed attempt is made again).
    With `wait` False: None at once when another worker holds the lock."""
    done = path.with_name(path.name + ".done")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        try:  # released when the file closes
            fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            return None
        if not done.exists():
            shutil.rmtree(path, ignore_errors=True)
            make(path)
            done.touch()
    return path


def copy_tiny_run(run: Path, dest: Path) -> Path:
    """A copy of `run` at `dest` (bench outputs left out), for a test that writes into it."""
    shutil.copytree(run, dest, ignore=shutil.ignore_patterns("bench*"))
    return dest


def only_formats(run: Path, keep: str) -> Path:
    """`run` with its export cut to the formats `keep` (comma-separated): the files of the
    others deleted, companions included, and their model.json entries: what exporting `keep`
    alone writes, without the conversions."""
    from toolkit.formats import FORMATS
    from toolkit.runfiles.folder import EXPORT_DIR
    from toolkit.runfiles.manifest import edit_manifest

    export = run / EXPORT_DIR

    def cut(manifest: dict) -> dict:
        for name in [f for f in manifest["artifacts"] if f not in keep.split(",")]:
            entry = manifest["artifacts"].pop(name)
            for file in (entry["file"], *FORMATS[name].companions):
                (export / file).unlink()
        return manifest

    edit_manifest(export, cut)
    return run
