"""Training throughput (images/s) of the seed ShiftViT and ViT presets beside a keras.io port.

    python -m bench.train_throughput [--models shiftvit,vit-lsa] [--steps N] [--warmup N]
                                     [--batch-size N] [--variants] [--json FILE] [--md FILE]

For each model it trains, on synthetic CIFAR-shaped uint8 data (batch * steps images, random
labels), in this order:

* "keras.io port": bench/keras_io_port.py, the examples' structure with the math corrected to
  equal ours; augmentation inside the model, fed by shuffle -> batch -> prefetch.
* "toolkit": build_model() + the toolkit's tf.data pipeline (augmentation in a parallel map),
  compiled as `toolkit train` compiles (jit_compile=False).
* "toolkit --jit": the same with jit_compile=True (XLA), as `toolkit train --jit`.

With --variants, two more rows separate where the difference comes from:

* "toolkit model, keras.io in-model aug": our model at the training resolution behind the
  keras.io augmentation Sequential, fed like the port, no XLA: the network formulation alone.
* "toolkit --jit, no aug": our model under XLA on a pipeline without augmentation: the ceiling
  the model itself sets.

Each run is one `fit` of warmup + steps steps; the clock (time.perf_counter) starts when the
last warmup step has finished (graph tracing / XLA compilation excluded) and stops when the
last timed step has.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shlex
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bench import keras_io_port as port  # noqa: E402
from toolkit.models import build_model, channel_stats, get_preset  # noqa: E402
from toolkit.training.schedule import WarmupCosine  # noqa: E402
from toolkit.versions import versions  # noqa: E402

INPUT_SHAPE = (32, 32, 3)
NUM_CLASSES = {"shiftvit": 10, "vit-lsa": 100, "vit": 100}
TRAIN_IMAGES = {"shiftvit": 40_000, "vit-lsa": 50_000, "vit": 50_000}  # sizes the LR schedule
PORT = "keras.io port"
RESULTS = Path(__file__).parent / "results"


def _toolkit_pipeline():
    """toolkit.data.train_dataset, or an equivalent local pipeline if it cannot be imported."""
    try:
        from toolkit.data import train_dataset

        return train_dataset, "toolkit.data.train_dataset"
    except ImportError:  # the data layer is being written elsewhere: same structure, here
        return _fallback_train_dataset, "bench fallback (shuffle, batch, parallel map, prefetch)"


def _fallback_train_dataset(x, y, batch_size, aug, seed=0):
    from toolkit.data.augment import augment_fn

    fn = augment_fn(aug, int(x.shape[1]), seed)
    ds = tf.data.Dataset.from_tensor_slices((x, np.asarray(y, np.int64)))
    ds = ds.shuffle(len(x), seed=seed).batch(batch_size)
    ds = ds.map(lambda a, b: (fn(tf.cast(a, tf.float32)), b), num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE)


@dataclass
class Run:
    """One measured row."""

    model: str
    implementation: str
    batch_size: int
    steps: int
    warmup: int
    seconds: float
    images_per_s: float
    trainable_params: int
    jit_compile: bool
    pipeline: str
    speedup_vs_port: float | None = None


class _StepClock(keras.callbacks.Callback):
    """perf_counter at the end of every train batch (after the step's result is ready)."""

    def __init__(self):
        super().__init__()
        self.ends: list[float] = []

    def on_train_batch_end(self, batch, logs=None):
        if logs and "loss" in logs:
            float(logs["loss"])  # make sure the step has finished before reading the clock
        self.ends.append(time.perf_counter())


def _trainable(model: keras.Model) -> int:
    return int(sum(math.prod(w.shape) for w in model.trainable_weights))


def _compile_toolkit(model, preset, steps_per_epoch: int, jit: bool) -> None:
    """As toolkit/training/train.py `_compile`: AdamW(WarmupCosine), sparse CE, top-1/top-5."""
    recipe = preset.train
    total = steps_per_epoch * recipe.epochs
    schedule = WarmupCosine(
        lr_start=recipe.lr_start,
        lr_max=recipe.lr_max,
        warmup_steps=int(total * recipe.warmup_fraction),
        total_steps=total,
    )
    model.compile(
        optimizer=keras.optimizers.AdamW(learning_rate=schedule, weight_decay=recipe.weight_decay),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[
            keras.metrics.SparseCategoricalAccuracy(name="accuracy"),
            keras.metrics.SparseTopKCategoricalAccuracy(5, name="top5"),
        ],
        jit_compile=jit,
    )


def _compile_port(model, preset, steps_per_epoch: int) -> None:
    recipe = preset.train
    total = steps_per_epoch * recipe.epochs
    port.compile_like_keras_io(
        model,
        recipe.lr_start,
        recipe.lr_max,
        recipe.weight_decay,
        int(total * recipe.warmup_fraction),
        total,
    )


def _time_fit(model, dataset, warmup: int, steps: int) -> float:
    clock = _StepClock()
    model.fit(
        dataset.repeat(),
        epochs=1,
        steps_per_epoch=warmup + steps,
        callbacks=[clock],
        verbose=0,
    )
    if len(clock.ends) != warmup + steps:
        raise RuntimeError(f"expected {warmup + steps} timed steps, got {len(clock.ends)}")
    return clock.ends[-1] - clock.ends[warmup - 1]


def _port_model(name, preset, x):
    if name == "shiftvit":
        return port.build_shiftvit_port(preset.arch, INPUT_SHAPE, NUM_CLASSES[name])
    return port.build_vit_port(preset.arch, x, INPUT_SHAPE, NUM_CLASSES[name])


def _ours_behind_keras_io_aug(name, preset, x, norm):
    """Our model at the training resolution behind the example's in-model augmentation."""
    size = preset.arch.image_size
    inputs = keras.Input(INPUT_SHAPE)
    if name == "shiftvit":
        aug = port.get_shiftvit_augmentation(INPUT_SHAPE[0], size)
        aug.pop()  # our model rescales by 1/255 itself
    else:  # normalization is inside our model; it commutes with resize/flip/rotate/zoom
        aug = port.get_vit_augmentation(x, size)
        aug.layers[0].trainable = False
        aug = keras.Sequential(aug.layers[1:], name="data_augmentation")
    ours = build_model(preset, (size, size, 3), NUM_CLASSES[name], norm_stats=norm)
    return keras.Model(inputs, ours(aug(inputs)))


def bench_model(name: str, batch: int, steps: int, warmup: int, variants: bool) -> list[Run]:
    preset = get_preset(name, "seed")
    rng = np.random.default_rng(0)
    n = batch * steps
    x = rng.integers(0, 256, (n, *INPUT_SHAPE), dtype=np.uint8)
    y = rng.integers(0, NUM_CLASSES[name], n).astype(np.int64)
    steps_per_epoch = math.ceil(TRAIN_IMAGES[name] / batch)
    norm = channel_stats(x) if name != "shiftvit" else None
    train_dataset, pipeline_name = _toolkit_pipeline()
    aug = preset.train.augmentation
    plain = keras_io_pipeline = "shuffle, batch, prefetch (augmentation in the model)"

    def ours(jit: bool):
        model = build_model(preset, INPUT_SHAPE, NUM_CLASSES[name], norm_stats=norm)
        _compile_toolkit(model, preset, steps_per_epoch, jit)
        return model, train_dataset(x, y, batch, aug, 0), pipeline_name

    def the_port():
        model = _port_model(name, preset, x)
        _compile_port(model, preset, steps_per_epoch)
        return model, port.keras_io_dataset(x, y, batch), keras_io_pipeline

    def ours_in_model_aug():
        model = _ours_behind_keras_io_aug(name, preset, x, norm)
        _compile_toolkit(model, preset, steps_per_epoch, False)
        return model, port.keras_io_dataset(x, y, batch), keras_io_pipeline

    def ours_jit_no_aug():
        model = build_model(preset, INPUT_SHAPE, NUM_CLASSES[name], norm_stats=norm)
        _compile_toolkit(model, preset, steps_per_epoch, True)
        no_aug = type(aug)()
        return model, train_dataset(x, y, batch, no_aug, 0), f"{pipeline_name}, no augmentation"

    plan = [
        (PORT, the_port),
        ("toolkit", lambda: ours(False)),
        ("toolkit --jit", lambda: ours(True)),
    ]
    if variants:
        plan += [
            ("toolkit model, keras.io in-model aug", ours_in_model_aug),
            ("toolkit --jit, no aug", ours_jit_no_aug),
        ]
    runs: list[Run] = []
    for label, make in plan:
        keras.backend.clear_session()
        keras.utils.set_random_seed(0)
        model, dataset, pipeline = make()
        seconds = _time_fit(model, dataset, warmup, steps)
        run = Run(
            model=name,
            implementation=label,
            batch_size=batch,
            steps=steps,
            warmup=warmup,
            seconds=round(seconds, 3),
            images_per_s=round(batch * steps / seconds, 1),
            trainable_params=_trainable(model),
            jit_compile=bool(model.jit_compile),
            pipeline=pipeline if pipeline is not plain else keras_io_pipeline,
        )
        print(f"  {name:9s} {label:38s} {run.images_per_s:8.1f} img/s", flush=True)
        runs.append(run)
    base = runs[0]
    mains = {"toolkit", "toolkit --jit", PORT}
    for run in runs:
        run.speedup_vs_port = round(run.images_per_s / base.images_per_s, 2)
        if run.implementation in mains and run.trainable_params != base.trainable_params:
            raise AssertionError(
                f"{name}: {run.implementation} has {run.trainable_params} trainable parameters, "
                f"the port {base.trainable_params}: the architectures differ"
            )
    return runs


def machine() -> dict:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        cpu = platform.processor() or "unknown"
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "tf_intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "load_average_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def table(runs: list[Run]) -> str:
    lines = [
        "| model | implementation | images/s | speed-up vs port | XLA | trainable params |",
        "|---|---|---:|---:|---|---:|",
    ]
    for r in runs:
        lines.append(
            f"| {r.model} | {r.implementation} | {r.images_per_s:.1f} | "
            f"{r.speedup_vs_port:.2f}x | {'yes' if r.jit_compile else 'no'} | "
            f"{r.trainable_params:,} |"
        )
    return "\n".join(lines)


def markdown(report: dict, runs: list[Run]) -> str:
    m, v, a = report["machine"], report["versions"], report["args"]
    return "\n".join(
        [
            "# Training throughput: toolkit vs keras.io port (seed presets, CPU)",
            "",
            f"Measured {report['created']} with `{report['command']}`.",
            "",
            table(runs),
            "",
            f"Batch {a['batch_size']}, {a['warmup']} warmup steps (tracing/compilation, not "
            f"timed), then {a['steps']} timed steps; synthetic uint8 32x32x3 images, random "
            "labels. Parameter counts of the port and ours are asserted equal.",
            "",
            f"- Machine: {m['cpu']}, {m['cores']} cores ({m['platform']}); load average at start "
            f"{m['load_average_at_start']}, at end {report['load_average_at_end']}",
            f"- Versions: python {m['python']}, " + ", ".join(f"{k} {val}" for k, val in v.items()),
            f"- Toolkit pipeline: {runs[1].pipeline if len(runs) > 1 else '-'}",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.train_throughput", description=__doc__)
    parser.add_argument("--models", default="shiftvit,vit-lsa")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--variants", action="store_true", help="also time the analysis rows")
    parser.add_argument("--json", type=Path, default=None, help="write the results as JSON")
    parser.add_argument("--md", type=Path, default=None, help="write the results as Markdown")
    args = parser.parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    for m in models:
        if m not in NUM_CLASSES:
            parser.error(f"unknown model {m!r}: choose from {', '.join(NUM_CLASSES)}")
    if args.steps < 1 or args.warmup < 1 or args.batch_size < 1:
        parser.error("--steps, --warmup and --batch-size must be >= 1")

    command = "python -m bench.train_throughput " + shlex.join(
        sys.argv[1:] if argv is None else argv
    )
    report = {
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": command.strip(),
        "args": {
            "models": models,
            "steps": args.steps,
            "warmup": args.warmup,
            "batch_size": args.batch_size,
            "variants": args.variants,
        },
        "machine": machine(),
        "versions": versions(),
    }
    print(f"{report['machine']['cpu']}, {report['machine']['cores']} cores; {command}", flush=True)
    runs: list[Run] = []
    for name in models:
        runs += bench_model(name, args.batch_size, args.steps, args.warmup, args.variants)
    report["load_average_at_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    report["results"] = [r.__dict__ for r in runs]
    print()
    print(table(runs))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    if args.md:
        args.md.parent.mkdir(parents=True, exist_ok=True)
        args.md.write_text(markdown(report, runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
