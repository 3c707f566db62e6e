"""Training throughput (images/s) of a preset's train step: TensorFlow, XLA, JAX, bf16, keras.io.

    python -m studies.train_throughput [--models shiftvit,vit-lsa] [--preset seed]
        [--precisions float32[,mixed_bfloat16]] [--steps N] [--warmup N] [--batch-size N]
        [--rounds N] [--retries N] [--variants] [--backends B[,B...]] [--json FILE] [--md FILE]

For each model it trains, on synthetic CIFAR-shaped uint8 data (batch * steps images, random
labels), the rows below. The keras.io port is built for the seed preset only; for any other
preset (`--preset cpu60`) the first row is "toolkit --jit" (then "toolkit") and the speed-ups
are over it.
Each precision after the first in `--precisions` adds a "toolkit --jit" row and one row per
backend in that precision (`toolkit train --precision`; mixed_bfloat16 pays where the CPU has
AVX512_BF16 or AMX):

* "keras.io port": studies/keras_io_port.py, the examples' structure with the math
  corrected to equal ours; augmentation inside the model, fed by shuffle -> batch -> prefetch.
* "toolkit": the toolkit's own training code: build_model(), toolkit.data.train_dataset (the
  tf.data pipeline, augmentation in a parallel map) and toolkit.training.train.compile_model,
  as `toolkit train` runs them (jit_compile=False).
* "toolkit --jit": the same with jit_compile=True (XLA), as `toolkit train --jit`.
* "toolkit on jax" (one row per other Keras backend in --backends, default: jax when it is
  installed): `toolkit train` on that backend, in a worker process (one backend per process):
  the NumPy PyDataset pipeline, augmentation inside the compiled step (RandomAugment), the step
  always compiled on JAX. Its timed segments interleave with this process's rounds: this
  process waits while the worker times one.

--variants adds rows that separate where a difference comes from: "toolkit model, keras.io
in-model aug" (our network behind the example's in-model augmentation, fed like the port) and
"toolkit --jit, no aug" (the ceiling the network sets).

Every implementation is built and trained for `warmup` untimed steps (tracing, XLA
compilation); then `rounds` interleaved rounds each time `steps` steps of every implementation
with time.perf_counter (plus this process's CPU time and the other processes' CPU share, from
/proc/stat). The default run takes about 9 minutes on a 2-core CPU.
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
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from studies import keras_io_port as port  # noqa: E402
from toolkit.bench.machine import cpu_flags, cpu_model, cpu_text  # noqa: E402
from toolkit.common.backend import installed  # noqa: E402
from toolkit.common.versions import versions  # noqa: E402
from toolkit.data import train_dataset  # noqa: E402
from toolkit.models import PRESETS, build_model, channel_stats, get_preset  # noqa: E402
from toolkit.training.strategies import PRECISIONS  # noqa: E402
from toolkit.training.train import compile_model  # noqa: E402

INPUT_SHAPE = (32, 32, 3)
NUM_CLASSES = {"shiftvit": 10, "vit-lsa": 100, "vit": 100}  # the seed presets' datasets
TRAIN_IMAGES = {"shiftvit": 40_000, "vit-lsa": 50_000, "vit": 50_000}  # sizes the LR schedule
CIFAR10 = (10, 50_000)  # every other preset trains on CIFAR-10
SEED = "seed"
PORT = "keras.io port"
WORKER_FLAG = "--backend-worker"
TOOLKIT_PIPELINE = "toolkit.data.train_dataset"
CORES = os.cpu_count() or 1
QUIET = 0.10  # a timing segment counts as undisturbed when others used <= 10% of the CPU
ANALYSIS_MARKER = "<!-- analysis: kept when the script rewrites this file -->"


@dataclass
class Run:
    """One row. images/s: median over the interleaved rounds (best: the fastest round);
    images per CPU-second of this process, which other processes on the machine disturb much
    less. Speed-ups: median over the rounds of this row's figure over the port's, same round."""

    model: str
    implementation: str
    batch_size: int
    steps: int
    warmup: int
    images_per_s: float
    best_images_per_s: float
    images_per_cpu_s: float
    rounds_images_per_s: list[float]
    rounds_images_per_cpu_s: list[float]
    rounds_other_cpu: list[float | None]
    trainable_params: int
    jit_compile: bool
    pipeline: str
    build_and_warmup_s: float
    speedup_vs_port: float | None = None
    cpu_speedup_vs_port: float | None = None


class _StepClock(keras.callbacks.Callback):
    """At the end of every train batch (once its result is ready): wall clock, this process's
    CPU time, and the machine's busy CPU time."""

    def __init__(self):
        super().__init__()
        self.ends: list[tuple[float, float, float | None]] = []

    def on_train_batch_end(self, batch, logs=None):
        if logs and "loss" in logs:
            float(logs["loss"])  # make sure the step has finished before reading the clock
        self.ends.append((time.perf_counter(), _own_seconds(), _busy_seconds()))


def _busy_seconds() -> float | None:
    """CPU-seconds all processes have spent busy (from /proc/stat), None where unavailable."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _own_seconds() -> float:
    t = os.times()
    return t.user + t.system


def _fit(model, dataset, steps: int) -> list[tuple[float, float, float | None]]:
    clock = _StepClock()
    model.fit(dataset, epochs=1, steps_per_epoch=steps, callbacks=[clock], verbose=0)
    if len(clock.ends) != steps:
        raise RuntimeError(f"expected {steps} steps, got {len(clock.ends)}")
    return clock.ends


@dataclass
class Segment:
    """`steps` timed training steps."""

    seconds: float  # wall clock
    cpu_seconds: float  # CPU time of this process (all its threads, tf.data included)
    other: float | None  # share of the machine's CPU that other processes used meanwhile


def _timed_segment(model, dataset, steps: int) -> Segment:
    """Time `steps` steps; one untimed step before them absorbs the start of a new iterator."""
    ends = _fit(model, dataset, steps + 1)
    (wall0, own0, busy0), (wall1, own1, busy1) = ends[0], ends[-1]
    other = None
    if busy0 is not None and busy1 is not None:
        other = max(0.0, (busy1 - busy0) - (own1 - own0)) / ((wall1 - wall0) * CORES)
    return Segment(wall1 - wall0, own1 - own0, other)


def _trainable(model: keras.Model) -> int:
    return int(sum(math.prod(w.shape) for w in model.trainable_weights))


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


def _ours_behind_keras_io_aug(name, preset, x, norm):
    """Our model at the training resolution behind the example's in-model augmentation."""
    size = preset.arch.image_size
    inputs = keras.Input(INPUT_SHAPE)
    if name == "shiftvit":
        aug = port.get_shiftvit_augmentation(INPUT_SHAPE[0], size)
        aug.pop()  # our model rescales by 1/255 itself
    else:  # normalization is inside our model; it commutes with resize/flip/rotate/zoom
        aug = port.get_vit_augmentation(x, size)
        aug = keras.Sequential(aug.layers[1:], name="data_augmentation")
    ours = build_model(preset, (size, size, 3), NUM_CLASSES[name], norm_stats=norm)
    return keras.Model(inputs, ours(aug(inputs)))


def _task(name: str, preset_name: str) -> tuple[int, int]:
    """(classes, training images) of the dataset the preset trains on: sizes the LR schedule."""
    return (NUM_CLASSES[name], TRAIN_IMAGES[name]) if preset_name == SEED else CIFAR10


def _with_policy(precision: str, build: Callable):
    """build() under a Keras dtype policy (layers take it when built), float32 restored."""
    keras.mixed_precision.set_global_policy(precision)
    try:
        return build()
    finally:
        keras.mixed_precision.set_global_policy("float32")


def _plan(
    name: str,
    batch: int,
    steps: int,
    variants: bool,
    preset_name: str = SEED,
    precisions: tuple[str, ...] = ("float32",),
):
    """[(label, make)] where make() -> (compiled model, repeated dataset, pipeline text)."""
    preset = get_preset(name, preset_name)
    classes, images = _task(name, preset_name)
    rng = np.random.default_rng(0)
    n = batch * steps
    x = rng.integers(0, 256, (n, *INPUT_SHAPE), dtype=np.uint8)
    y = rng.integers(0, classes, n).astype(np.int64)
    steps_per_epoch = math.ceil(images / batch)
    norm = channel_stats(x) if name != "shiftvit" else None
    aug = preset.train.augmentation
    in_model = "shuffle(512), batch, prefetch; augmentation inside the model"

    def ours(jit: bool, augmentation=aug, note="", precision=precisions[0]):
        def build():
            model = build_model(preset, INPUT_SHAPE, classes, norm_stats=norm)
            compile_model(model, preset, steps_per_epoch, jit)
            return model

        def make():
            model = _with_policy(precision, build)
            ds = train_dataset(x, y, batch, augmentation, 0).repeat()
            return model, ds, TOOLKIT_PIPELINE + note

        return make

    def the_port():
        if name == "shiftvit":
            model = port.build_shiftvit_port(preset.arch, INPUT_SHAPE, NUM_CLASSES[name])
        else:
            model = port.build_vit_port(preset.arch, x, INPUT_SHAPE, NUM_CLASSES[name])
        _compile_port(model, preset, steps_per_epoch)
        return model, port.keras_io_dataset(x, y, batch).repeat(), in_model

    def ours_in_model_aug():
        model = _ours_behind_keras_io_aug(name, preset, x, norm)
        compile_model(model, preset, steps_per_epoch, False)
        return model, port.keras_io_dataset(x, y, batch).repeat(), in_model

    if preset_name != SEED:  # the port is the seed's structure
        plan = [("toolkit --jit", ours(True)), ("toolkit", ours(False))]
    else:
        plan = [(PORT, the_port), ("toolkit", ours(False)), ("toolkit --jit", ours(True))]
    plan += [(f"toolkit --jit, {p}", ours(True, precision=p)) for p in precisions[1:]]
    if variants:
        plan += [
            ("toolkit model, keras.io in-model aug", ours_in_model_aug),
            ("toolkit --jit, no aug", ours(True, type(aug)(), ", augmentation off")),
        ]
    return plan


@dataclass
class Entry:
    """One implementation, built and warmed up, timed segment by segment."""

    label: str
    setup: float
    time_segment: Callable[[], Segment]
    trainable: int
    jit: bool
    pipeline: str
    segments: list[Segment]


def _toolkit_on_backend(name: str, batch: int, steps: int, warmup: int, preset_name: str = SEED):
    """`toolkit train`'s model, training wrapper, compile and pipeline on the current backend
    (synthetic data as _plan's, enough for a segment without repeating the dataset)."""
    from toolkit.data import training_model

    preset = get_preset(name, preset_name)
    classes, images = _task(name, preset_name)
    rng = np.random.default_rng(0)
    n = batch * (max(steps + 1, warmup) + 1)
    x = rng.integers(0, 256, (n, *INPUT_SHAPE), dtype=np.uint8)
    y = rng.integers(0, classes, n).astype(np.int64)
    norm = channel_stats(x) if name != "shiftvit" else None
    model = build_model(preset, INPUT_SHAPE, classes, norm_stats=norm)
    fit_model = training_model(model, preset.train.augmentation, 0)
    compile_model(fit_model, preset, math.ceil(images / batch), True)
    dataset = train_dataset(x, y, batch, preset.train.augmentation, 0)
    return model, fit_model, dataset


def backend_worker(
    name: str, batch: int, steps: int, warmup: int, preset_name: str = SEED, precision="float32"
) -> int:
    """The worker of a "toolkit on BACKEND" row: build and warm up, print one JSON line, then
    time `steps` steps for every "time" line on stdin, printing each Segment as JSON."""
    keras.utils.set_random_seed(0)
    start = time.perf_counter()
    model, fit_model, dataset = _with_policy(
        precision, lambda: _toolkit_on_backend(name, batch, steps, warmup, preset_name)
    )
    _fit(fit_model, dataset, warmup)
    ready = {
        "setup": round(time.perf_counter() - start, 1),
        "trainable": _trainable(model),
        "jit": bool(fit_model.jit_compile),
        "pipeline": f"{type(dataset).__name__} (NumPy batches), augmentation in the step",
        "backend": keras.backend.backend(),
    }
    print(json.dumps(ready), flush=True)
    for line in sys.stdin:
        if line.strip() != "time":
            break
        print(json.dumps(_timed_segment(fit_model, dataset, steps).__dict__), flush=True)
    return 0


def _worker_entry(
    backend: str,
    name: str,
    batch: int,
    steps: int,
    warmup: int,
    preset_name: str = SEED,
    precision: str = "float32",
) -> Entry:
    """Start the worker for `backend` and wait until it has warmed up."""
    import subprocess

    argv = [sys.executable, "-m", "studies.train_throughput", WORKER_FLAG, name]
    argv += ["--batch-size", str(batch), "--steps", str(steps), "--warmup", str(warmup)]
    argv += ["--preset", preset_name, "--precisions", precision]
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "KERAS_BACKEND": backend},
    )
    ready = _worker_line(proc, backend)

    def time_segment() -> Segment:
        proc.stdin.write("time\n")
        proc.stdin.flush()
        return Segment(**_worker_line(proc, backend))

    _WORKERS.append(proc)
    label = f"toolkit on {backend}" + (" (always compiled)" if backend == "jax" else " --jit")
    label += "" if precision == "float32" else f", {precision}"
    return Entry(
        label, ready["setup"], time_segment, ready["trainable"], ready["jit"], ready["pipeline"], []
    )


_WORKERS: list = []


def _worker_line(proc, backend: str) -> dict:
    """The next JSON line of a worker (other lines, e.g. Keras' logs, are skipped)."""
    for line in proc.stdout:
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"the {backend} worker ended (exit {proc.wait()}) before answering")


def _stop_workers() -> None:
    while _WORKERS:
        proc = _WORKERS.pop()
        proc.stdin.close()
        proc.wait()


def bench_model(
    name: str,
    batch: int,
    steps: int,
    warmup: int,
    rounds: int,
    retries: int,
    variants: bool,
    backends: tuple[str, ...] = (),
    preset_name: str = SEED,
    precisions: tuple[str, ...] = ("float32",),
) -> list[Run]:
    """Build and warm up every implementation, then time them in interleaved rounds.

    `backends`: other Keras backends, each timed in a worker process. A segment during which
    other processes took more than QUIET of the CPU is timed again, up to `retries` times; the
    last attempt counts.
    """
    keras.backend.clear_session()
    entries: list[Entry] = []
    for label, make in _plan(name, batch, steps, variants, preset_name, precisions):
        keras.utils.set_random_seed(0)
        start = time.perf_counter()
        model, dataset, pipeline = make()
        _fit(model, dataset, warmup)  # traces (and for XLA compiles) the train step
        setup = round(time.perf_counter() - start, 1)
        print(f"  {name:9s} {label:38s} built + {warmup} warmup steps in {setup:.0f}s", flush=True)
        entries.append(
            Entry(
                label,
                setup,
                lambda model=model, dataset=dataset: _timed_segment(model, dataset, steps),
                _trainable(model),
                bool(model.jit_compile),
                pipeline,
                [],
            )
        )
    for backend, precision in [(b, p) for p in precisions for b in backends]:
        entry = _worker_entry(backend, name, batch, steps, warmup, preset_name, precision)
        print(
            f"  {name:9s} {entry.label:38s} built + {warmup} warmup steps in {entry.setup:.0f}s",
            flush=True,
        )
        entries.append(entry)
    try:
        _time_rounds(name, entries, batch, steps, rounds, retries)
    finally:
        _stop_workers()
    return _runs(name, entries, batch, steps, warmup)


def _time_rounds(
    name: str, entries: list[Entry], batch: int, steps: int, rounds: int, retries: int
) -> None:
    for r in range(rounds):
        for entry in entries:
            label, segments = entry.label, entry.segments
            for attempt in range(1 + retries):
                seg = entry.time_segment()
                note = "" if seg.other is None else f", other processes {seg.other:.0%} of the CPU"
                print(
                    f"  {name:9s} {label:38s} round {r + 1}: {batch * steps / seg.seconds:7.1f}"
                    f" img/s, {batch * steps / seg.cpu_seconds:5.1f} img per CPU-s{note}",
                    flush=True,
                )
                if seg.other is None or seg.other <= QUIET or attempt == retries:
                    break
            segments.append(seg)


def _runs(name: str, entries: list[Entry], batch: int, steps: int, warmup: int) -> list[Run]:
    runs = []
    for entry in entries:
        segments = entry.segments
        speeds = [round(batch * steps / g.seconds, 1) for g in segments]
        per_cpu = [batch * steps / g.cpu_seconds for g in segments]
        runs.append(
            Run(
                model=name,
                implementation=entry.label,
                batch_size=batch,
                steps=steps,
                warmup=warmup,
                images_per_s=round(float(np.median(speeds)), 1),
                best_images_per_s=max(speeds),
                images_per_cpu_s=round(float(np.median(per_cpu)), 2),
                rounds_images_per_s=speeds,
                rounds_images_per_cpu_s=[round(v, 2) for v in per_cpu],
                rounds_other_cpu=[None if g.other is None else round(g.other, 2) for g in segments],
                trainable_params=entry.trainable,
                jit_compile=entry.jit,
                pipeline=entry.pipeline,
                build_and_warmup_s=entry.setup,
            )
        )
    base = runs[0]
    for run in runs:
        wall = np.array(run.rounds_images_per_s) / np.array(base.rounds_images_per_s)
        cpu = np.array(run.rounds_images_per_cpu_s) / np.array(base.rounds_images_per_cpu_s)
        run.speedup_vs_port = round(float(np.median(wall)), 2)
        run.cpu_speedup_vs_port = round(float(np.median(cpu)), 2)
        if run.trainable_params != base.trainable_params:
            raise AssertionError(
                f"{name}: {run.implementation} has {run.trainable_params} trainable parameters, "
                f"the port {base.trainable_params}: the architectures differ"
            )
    return runs


def _load_average() -> list[float] | None:
    return [round(v, 2) for v in os.getloadavg()] if hasattr(os, "getloadavg") else None


def _onednn_enabled() -> bool | None:
    """Whether TF runs its oneDNN kernels (off by default on some CPUs, this AMD EPYC one)."""
    try:
        from tensorflow.python.util import _pywrap_util_port

        return bool(_pywrap_util_port.IsMklEnabled())
    except (ImportError, AttributeError):
        return None


def machine() -> dict:
    return {
        "cpu": cpu_model(),
        "cpu_flags": cpu_flags(),
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "tf_intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "TF_ENABLE_ONEDNN_OPTS": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "unset"),
        "onednn": _onednn_enabled(),
        "load_average_at_start": _load_average(),
    }


def table(runs: list[Run]) -> str:
    """One row per implementation; speed-ups over each model's first row (the port, or
    "toolkit --jit" for a preset other than the seed)."""
    lines = [
        f"| model | implementation | images/s | best | speed-up vs {runs[0].implementation} "
        "| images per CPU-s | speed-up per CPU-s | XLA |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in runs:
        lines.append(
            f"| {r.model} | {r.implementation} | {r.images_per_s:.1f} | "
            f"{r.best_images_per_s:.1f} | {r.speedup_vs_port:.2f}x | "
            f"{r.images_per_cpu_s:.1f} | {r.cpu_speedup_vs_port:.2f}x | "
            f"{'yes' if r.jit_compile else 'no'} |"
        )
    return "\n".join(lines)


def markdown(report: dict, runs: list[Run]) -> str:
    m, v, a = report["machine"], report["versions"], report["args"]
    pipelines: dict[str, list[str]] = {}
    for r in runs:
        if r.implementation not in pipelines.setdefault(r.pipeline, []):
            pipelines[r.pipeline].append(r.implementation)
    return "\n".join(
        [
            f"# Training throughput: {a.get('preset', SEED)} presets, CPU",
            "",
            f"Measured {report['created']} with `{report['command']}`.",
            "",
            table(runs),
            "",
            f"Batch {a['batch_size']}; {a['warmup']} warmup steps (tracing / XLA compilation) "
            f"untimed; then {a['rounds']} interleaved rounds of {a['steps']} timed steps per "
            "implementation (a round disturbed by other processes, >10% of the CPU, is re-timed "
            f"up to {a['retries']} time(s)). Synthetic uint8 32x32x3 images, random labels. "
            "images/s: median of the rounds; best: fastest round; speed-ups: median of the "
            f"per-round ratios to {runs[0].implementation}; images per CPU-s: this process's "
            "CPU time, which other load on the machine disturbs far less than wall time. The "
            "trainable parameter counts of the rows are asserted equal.",
            "",
            f"- Machine: {cpu_text(m)}, {m['cores']} cores ({m['platform']}); load average at "
            f"start {m['load_average_at_start']}, at end {report['load_average_at_end']}; "
            f"oneDNN {'on' if m['onednn'] else 'off'} "
            f"(TF_ENABLE_ONEDNN_OPTS={m['TF_ENABLE_ONEDNN_OPTS']})",
            f"- Versions: python {m['python']}, " + ", ".join(f"{k} {val}" for k, val in v.items()),
            "- Input pipelines:",
            *[f"  - {', '.join(labels)}: {p}" for p, labels in pipelines.items()],
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m studies.train_throughput", description=__doc__)
    parser.add_argument("--models", default="shiftvit,vit-lsa")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument(
        "--rounds", type=int, default=3, help="interleaved timing rounds (median reported)"
    )
    parser.add_argument(
        "--retries",
        type=int,
        default=1,
        help="re-time a segment disturbed by other processes (>10%% of the CPU) up to N times",
    )
    parser.add_argument("--preset", default=SEED, help="the presets to time (default: seed)")
    parser.add_argument(
        "--precisions",
        default="float32",
        help="Keras dtype policies, comma-separated: each after the first adds rows",
    )
    parser.add_argument("--variants", action="store_true", help="also time the analysis rows")
    parser.add_argument(
        "--backends",
        default=",".join(b for b in ("jax",) if installed(b)),
        help="other Keras backends to time `toolkit train` on, in worker processes "
        "(default: jax when installed; '' for none)",
    )
    parser.add_argument(WORKER_FLAG, metavar="MODEL", help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, default=None, help="write the results as JSON")
    parser.add_argument("--md", type=Path, default=None, help="write the results as Markdown")
    args = parser.parse_args(argv)
    precisions = tuple(p.strip() for p in args.precisions.split(",") if p.strip())
    unknown = set(precisions) - set(PRECISIONS)
    if not precisions or unknown or len(set(precisions)) < len(precisions):
        parser.error(f"--precisions {args.precisions!r}: name some of {', '.join(PRECISIONS)}")
    if args.backend_worker:
        return backend_worker(
            args.backend_worker,
            args.batch_size,
            args.steps,
            args.warmup,
            args.preset,
            precisions[0],
        )
    backends = tuple(b.strip() for b in args.backends.split(",") if b.strip())
    for b in backends:
        if b == "tensorflow" or not installed(b):
            parser.error(f"--backends {b}: name other installed Keras backends (jax, torch)")
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    for m in models:
        if m not in NUM_CLASSES:
            parser.error(f"unknown model {m!r}: choose from {', '.join(NUM_CLASSES)}")
        if args.preset not in PRESETS.get(m, {}):
            parser.error(f"--preset {args.preset}: {m} has {', '.join(PRESETS.get(m, {}))}")
    if args.variants and args.preset != SEED:
        parser.error("--variants compares with the keras.io port: it needs --preset seed")
    if min(args.steps, args.warmup, args.batch_size, args.rounds) < 1 or args.retries < 0:
        parser.error("--steps, --warmup, --batch-size, --rounds must be >= 1, --retries >= 0")

    command = "python -m studies.train_throughput " + shlex.join(
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
            "rounds": args.rounds,
            "retries": args.retries,
            "variants": args.variants,
            "preset": args.preset,
            "precisions": list(precisions),
            "backends": list(backends),
        },
        "machine": machine(),
        "versions": {**versions(), **{b: metadata.version(b) for b in backends}},
    }
    print(
        f"{cpu_text(report['machine'])}, {report['machine']['cores']} cores; {command}", flush=True
    )
    runs: list[Run] = []
    for name in models:
        runs += bench_model(
            name,
            args.batch_size,
            args.steps,
            args.warmup,
            args.rounds,
            args.retries,
            args.variants,
            backends,
            args.preset,
            precisions,
        )
    report["load_average_at_end"] = _load_average()
    report["results"] = [r.__dict__ for r in runs]
    print()
    print(table(runs))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    if args.md:
        args.md.parent.mkdir(parents=True, exist_ok=True)
        kept = ""
        if args.md.is_file() and ANALYSIS_MARKER in args.md.read_text():
            kept = args.md.read_text().split(ANALYSIS_MARKER, 1)[1]
        args.md.write_text(markdown(report, runs) + "\n" + ANALYSIS_MARKER + kept)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
