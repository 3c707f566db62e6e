"""The idle stall at the start of a TensorFlow training epoch, with tf.data's autotuning on
(TensorFlow's default) and off (the toolkit's pipeline, toolkit.data.tf_pipeline).

    python -m studies.epoch_stall [--model shiftvit] [--preset cpu60] [--images 40000]
        [--epochs 3] [--json FILE]

For each mode it trains the preset's model as `toolkit train --jit` does (the toolkit's
tf.data pipeline, compile_model, Keras' fit with a validation split) on random uint8 images,
and times every epoch: its wall time, the seconds from the epoch's start to the end of its
first step (the old iterator is deleted in between), and the process's CPU time. With the step
busy on every core, deleting an exhausted iterator waited for autotune's model thread, idle,
for up to its optimisation period (tens of seconds). The default run takes about 6 minutes on
2 idle cores.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from studies.provenance import commit_fields  # noqa: E402
from toolkit.bench.machine import cpu_flags, cpu_model  # noqa: E402
from toolkit.common.atomic import check_writable, write_text  # noqa: E402
from toolkit.common.versions import versions  # noqa: E402
from toolkit.data import eval_dataset, train_dataset  # noqa: E402
from toolkit.models import build_model, get_preset  # noqa: E402
from toolkit.training.train import compile_model  # noqa: E402

MODES = {"autotune on (TensorFlow's default)": True, "autotune off (toolkit)": False}
VAL_IMAGES = 2000


class EpochClock(keras.callbacks.Callback):
    """Per epoch: wall seconds, seconds to the end of the first step, process CPU seconds."""

    def __init__(self) -> None:
        super().__init__()
        self.epochs: list[dict] = []

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self.start, self.cpu, self.first = time.perf_counter(), time.process_time(), None

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        if self.first is None:
            self.first = time.perf_counter() - self.start

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        wall = time.perf_counter() - self.start
        self.epochs.append(
            {
                "epoch_s": round(wall, 2),
                "first_step_s": round(self.first, 2),
                "cpu_s": round(time.process_time() - self.cpu, 2),
            }
        )


def run_mode(model_name: str, preset_name: str, images: int, epochs: int, autotune: bool) -> list:
    """Train `epochs` epochs of the preset's model on random images; the EpochClock rows."""
    preset = get_preset(model_name, preset_name)
    rng = np.random.default_rng(0)
    size = preset.arch.image_size
    x = rng.integers(0, 256, (images + VAL_IMAGES, size, size, 3), dtype=np.uint8)
    y = rng.integers(0, 10, images + VAL_IMAGES).astype(np.int64)
    batch = preset.train.batch_size
    train = train_dataset(x[:images], y[:images], batch, preset.train.augmentation, 0)
    val = eval_dataset(x[images:], y[images:], batch)
    if autotune:  # a later with_options wins: TensorFlow's default back on
        options = tf.data.Options()
        options.autotune.enabled = True
        train, val = train.with_options(options), val.with_options(options)
    keras.utils.set_random_seed(0)
    model = build_model(preset, (size, size, 3), 10)
    compile_model(model, preset, len(train), jit=True)
    clock = EpochClock()
    model.fit(train, validation_data=val, epochs=epochs, callbacks=[clock], verbose=0)
    return clock.epochs


def summary(rows: list[dict]) -> str:
    """One line per mode: epoch and first-step seconds after the first epoch, CPU share."""
    lines = []
    for row in rows:
        later = row["epochs"][1:]
        wall = sum(e["epoch_s"] for e in later)
        cpu = sum(e["cpu_s"] for e in later)
        lines.append(
            f"{row['mode']}: epochs 2-{len(row['epochs'])} "
            f"{', '.join(str(e['epoch_s']) for e in later)} s, first step ends "
            f"{', '.join(str(e['first_step_s']) for e in later)} s in, "
            f"CPU {cpu / wall:.2f} cores"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="shiftvit")
    parser.add_argument("--preset", default="cpu60")
    parser.add_argument("--images", type=int, default=40000, help="training images an epoch")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write a records/epoch_stall.jsonl row")
    args = parser.parse_args(argv)
    if args.json:  # before minutes of training
        check_writable(args.json, "--json")
    rows = []
    for mode, autotune in MODES.items():
        print(f"{mode}: training {args.epochs} epochs of {args.images} images", flush=True)
        epochs = run_mode(args.model, args.preset, args.images, args.epochs, autotune)
        rows.append({"mode": mode, "autotune": autotune, "epochs": epochs})
        print(summary(rows[-1:]), flush=True)
    if args.json:
        record = {
            "id": f"epoch-stall-{args.model}-{args.preset}",
            "what": f"{args.model} {args.preset}: {args.epochs} epochs of {args.images} random "
            "images, `toolkit train --jit`'s pipeline and step, autotune on then off",
            "command": "python -m studies.epoch_stall "
            + shlex.join(sys.argv[1:] if argv is None else argv),
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            **commit_fields(),
            "machine": {"cpu": cpu_model(), "flags": cpu_flags(), "cores": os.cpu_count()},
            "versions": versions(),
            "load_average": [round(v, 2) for v in os.getloadavg()],
            "model": args.model,
            "preset": args.preset,
            "images": args.images,
            "modes": rows,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        write_text(args.json, json.dumps(record) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
