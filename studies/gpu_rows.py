"""The GPU rows in one command, inside a device-time budget.

    python -m studies.gpu_rows [--minutes 25] [--json OUT] [--onnx DIR] [--data SPEC]
        [--rows ROW[,ROW...]] [--preset seed] [--ort-seconds S] [--timed] [--cpu-check]
    python -m studies.gpu_rows --minutes 9 --rows paper-vit-lsa [--json OUT] [--data SPEC]
    python -m studies.gpu_rows --slim-onnx SRC_DIR DEST_DIR

A plan of rows, each with a budget: setup 60 s (at most half of `--minutes`), the rows chosen
(`--rows`) the rest by their shares; the budgets sum to at most `--minutes`. A row that
overruns its budget is stopped and reads "failed"; a training row stops itself before that:

- setup: unpack `--data tar:FILE.tar.gz` outside the tree, find the GPUs (nvidia-smi, and
  jax.devices() in a child process, so this process never holds GPU memory).
- train-shiftvit, train-vit-lsa: the preset (`seed`) on KERAS_BACKEND=jax, mixed_bfloat16, one
  GPU, in a child process: steady-state train-step images/s (median step after the first of
  each epoch; epoch 1's first step is the compile, reported apart), and training with the
  preset's recipe until the validation top-1 reaches the keras.io seed figure (ShiftViT: 76.38%
  CIFAR-10 test top-1, the Keras 3 page; ViT-LSA's 56.11% is CIFAR-100, which these machines
  lack: no target, its accuracy at the budget only) or the budget ends; then test top-1. The
  seed recipes are 100 and 50 epochs: a budget that ends first reports the accuracy reached
  there, with the learning-rate schedule still mid-way, and says so.
- paper-vit-lsa, paper-vit, paper-shiftvit (not in the default rows: each wants a call of its
  own): the `paper-cifar` preset, the SPT/LSA paper's CIFAR-10 recipe, trained as above to the
  paper's CIFAR-10 top-1 (SL-ViT 94.53%, ViT 93.58%; the ShiftViT of as many MACs runs to the
  ViT's). The row also gives the minutes the whole recipe would take at the measured speed
  (`recipe_minutes`), and reads "not measured" without a GPU. Every training row is fed as
  `toolkit train --device-data` feeds it (`--device-data`, default auto: on a GPU the split
  lives on the device, augmented and mixed in the step); `--batch-size` trains at another
  batch with the learning rate scaled by the square-root rule (`scaled_recipe`); with
  `--run-dir` the state is saved after every epoch and the next call continues the recipe.
- input-path: `studies.input_path` on the `paper-cifar` ViT-LSA, bf16, batches 128, 512 and
  1024: images/s of the host-fed input path, the device-resident one and the step alone (item
  1 of the GPU question: where a step's time goes).
- two-process: `toolkit train --strategy multi-process`, two processes on loopback, each on
  half of the GPUs (CUDA_VISIBLE_DEVICES), ShiftViT, 2 epochs: images/s of epoch 2 from Keras'
  epoch line (ms/step, rounded to the ms), and whether both processes hold equal weights. Needs
  jax.devices('gpu') >= 2, else "not measured: one GPU".
- ort-cuda: every DIR/*.onnx (`--onnx`, the opset-23 exports) at batch 1, 32 and 256, with and
  without CUDA graphs, one `toolkit.runtimes.worker` process per row (IO binding on the GPU),
  each timing its calls for the row's budget shared out (at most 3 s; `--ort-seconds` sets it).

A row whose device or runtime is missing reads "not measured: <why>", never a CPU figure. With
`--cpu-check` (tests, or a dry run) the rows run on the CPU anyway; what they measure goes under
the row's `check` key, and the row still reads "not measured: no GPU". The JSON is rewritten
atomically after every row, so a run cut short keeps what it finished.

Files too large to travel: a seed fp32 .onnx is 45 MiB (ShiftViT) or 83 MiB (ViT-LSA), over a
device call's 64 MiB with the data. `--slim-onnx SRC DEST` writes copies whose large weights are
left out (ONNX external data, file not written); ort-cuda fills them with seeded random values
of the same shapes and types before timing (latency does not depend on the values; accuracy
would, so these rows time, never score).

Device command, for the `run` tool of a session whose task has a GPU. What travels is the
checkout the session started in: prepare it there (~25 MiB then travels; /.whl/ and /.gpu/ are
in .gitignore). keras is not on the machine (keras 2.3 MiB, optree 0.5 MiB and namex 6 KiB
wheels; absl-py, h5py, ml-dtypes and rich are there); TensorFlow is not there either, so the
.onnx files are exported here:

    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
      --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
      -d .whl keras==3.15.1 namex optree
    mkdir -p .gpu && cp ../shared/data/cifar10-jpeg.tar.gz .gpu/          # 19.3 MiB
    for m in shiftvit vit-lsa; do
      toolkit train --model $m --preset seed --data shapes:64 --epochs 1 --batch-size 16 \
        --out /tmp/seed-$m && toolkit export --format onnx,onnx-int8 \
        --calib-samples 32 /tmp/seed-$m &&
      python -m studies.gpu_rows --slim-onnx /tmp/seed-$m/export .gpu/onnx; done

then `run` with carry [".whl", ".gpu"] and timeout_s 600 (one call runs at most 10 minutes:
with a 15-minute lease, one call of --minutes 9; a 25-minute plan is three calls with --rows,
e.g. train-shiftvit 9.5, train-vit-lsa 8.5, two-process,ort-cuda 6):

    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
      && export PYTHONPATH=/tmp/site:$PWD KERAS_BACKEND=jax PYTHONUNBUFFERED=1 \
      && python3 -m studies.gpu_rows --minutes 9 --data tar:.gpu/cifar10-jpeg.tar.gz \
         --onnx .gpu/onnx --json $OUT/gpu_rows.json 2>&1 | tee $OUT/gpu_rows.log

The paper recipe, one call (after the same pip line; the exports are not needed): first the
input paths (about 2 minutes), then the whole `paper-cifar` ViT-LSA from the device
(300 epochs in 9 minutes needs about 28,000 images/s), its state saved after every epoch:

    python3 -m studies.gpu_rows --minutes 9.5 --rows input-path,paper-vit-lsa \
         --data tar:.gpu/cifar10-jpeg.tar.gz --run-dir .gpu/runs --json $OUT/gpu_rows.json \
         2>&1 | tee $OUT/gpu_rows.log; cp -r .gpu/runs $OUT/

or with `--timed` (and without --run-dir): the recipe's schedule planned to end within the
row's budget, as `toolkit train --time` plans it, so one call trains a complete schedule of
however many epochs the GPU fits (fewer than 300 where it is slower than the above).

A call that ends before the recipe does leaves RUN_DIR/paper-vit-lsa/checkpoint/state.npz
(the weights and AdamW's two moments: 8.19 M float32 values, 33 MB, for the ViT-LSA): copy
files_at/runs back to .gpu/runs and run the same command with --rows paper-vit-lsa; it
continues from the last complete epoch (the carry is then about 56 MB with the data and the
wheels: leave the .onnx folder out). `--batch-size 512` (the learning rate scaled by the
square-root rule) is the next try if batch 128 runs short of the speed.

--minutes counts the rows; pip and the Python start before them take some 15 seconds. The tree
travels without .git: note the commit beside the JSON ("commit" reads null there). The
machine's onnxruntime is the CPU package, so the ort-cuda rows read "not measured" unless
onnxruntime-gpu is importable: its cp312 wheel (1.31.1) is 244 MiB, more than a call carries.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULE = "studies.gpu_rows"
NOT_MEASURED = "not measured"
MEASURED = "measured"
FAILED = "failed"
PRECISION = "mixed_bfloat16"
# keras.io's published test top-1 of each seed (the Keras 3 pages in ../shared/seeds) and
# whether these machines have its dataset
SEED_TOP1 = {
    "shiftvit": (0.7638, "CIFAR-10", True),
    "vit-lsa": (0.5611, "CIFAR-100", False),
}
PAPER_PRESET = "paper-cifar"  # the SPT/LSA paper's CIFAR-10 recipe (toolkit.models.presets)
# a model the paper has no CIFAR-10 figure for runs to this model's figure
PAPER_STANDIN = {"shiftvit": "vit"}


@dataclass(frozen=True)
class Target:
    """The validation top-1 a training row runs to: whose figure, the figure, its dataset, and
    whether these machines have that dataset."""

    name: str
    top1: float
    data: str
    available: bool


def target_of(model_name: str, preset_name: str) -> Target:
    """The paper's CIFAR-10 top-1 for a `paper-cifar` preset (ShiftViT: the paper ViT's), the
    keras.io seed's otherwise."""
    if preset_name == PAPER_PRESET:
        from toolkit.models.paper_figures import PAPER_FIGURES

        figures = PAPER_FIGURES[PAPER_STANDIN.get(model_name, model_name), preset_name]
        return Target(f"the SPT/LSA paper's {figures.name}", figures.top1 / 100, "CIFAR-10", True)
    top1, data, available = SEED_TOP1[model_name]
    return Target("keras.io's seed", top1, data, available)


@dataclass(frozen=True)
class RowSpec:
    """One row of the plan: its id, what it measures and its share of the minutes."""

    id: str
    what: str
    share: float


PLAN = (
    RowSpec("setup", "unpack the data, find the GPUs", 0.0),  # SETUP_S
    RowSpec("train-shiftvit", "ShiftViT on JAX, bf16, one GPU: images/s, minutes to seed", 0.38),
    RowSpec("train-vit-lsa", "ViT-LSA on JAX, bf16, one GPU: images/s, accuracy at budget", 0.34),
    RowSpec("two-process", "--strategy multi-process, two processes on the GPUs", 0.10),
    RowSpec("ort-cuda", "ONNX Runtime CUDA latency, CUDA graphs on and off", 0.12),
    RowSpec("input-path", "paper-cifar ViT-LSA: host vs device input path vs step alone", 0.25),
    RowSpec("paper-vit-lsa", "paper-cifar ViT-LSA: images/s, minutes to the paper's 94.53%", 0.34),
    RowSpec("paper-vit", "paper-cifar ViT: images/s, minutes to the paper's 93.58%", 0.34),
    RowSpec("paper-shiftvit", "paper-cifar ShiftViT: images/s, minutes to the ViT's 93.58%", 0.34),
)
ROW_IDS = tuple(r.id for r in PLAN)
# training rows: row -> (model, preset; None: --preset's)
TRAIN_ROWS = {
    "train-shiftvit": ("shiftvit", None),
    "train-vit-lsa": ("vit-lsa", None),
    "paper-vit-lsa": ("vit-lsa", PAPER_PRESET),
    "paper-vit": ("vit", PAPER_PRESET),
    "paper-shiftvit": ("shiftvit", PAPER_PRESET),
}
DEFAULT_ROWS = ("train-shiftvit", "train-vit-lsa", "two-process", "ort-cuda")
ORT_BATCHES = (1, 32, 256)
ORT_WARMUP = 20
ORT_ROW_OVERHEAD_S = 6.0  # a worker's start, session load and warmup, beside its timed calls
SLIM_THRESHOLD = 1024  # bytes: larger initializers are left out of a slim copy
SLIM_DATA = "weights_left_out.bin"  # the external data file a slim copy names and lacks
SETUP_S = 60.0  # unpacking CIFAR-10's JPEG copy (236 MB) and the jax probe
CHILD_GRACE_S = 0.9  # a child aims to end inside this part of its budget


def plan(minutes: float, rows: tuple[str, ...]) -> list[dict]:
    """The rows run, setup first, each with its budget in seconds: setup SETUP_S (at most half
    the minutes), the other rows the rest by their shares, so that the budgets sum to at most
    `minutes`."""
    total = minutes * 60
    setup = min(SETUP_S, total / 2)
    chosen = [r for r in PLAN if r.id in rows]
    shares = sum(r.share for r in chosen)
    return [{"id": PLAN[0].id, "what": PLAN[0].what, "budget_s": math.floor(setup)}] + [
        {"id": r.id, "what": r.what, "budget_s": math.floor((total - setup) * r.share / shares)}
        for r in chosen
    ]


# --- the children: one training row, or a device probe ----------------------------------------


def scaled_recipe(preset, batch_size: int | None):
    """`preset` at `batch_size` (None: its own), its learning rates (peak and start) scaled by
    the square root of the batch ratio, the rule for Adam-family optimizers (Malladi et al.
    2022, "On the SDEs and Scaling Rules for Adaptive Gradient Algorithms"); warm-up stays the
    same share of the steps."""
    recipe = preset.train
    if batch_size is None or batch_size == recipe.batch_size:
        return preset
    factor = math.sqrt(batch_size / recipe.batch_size)
    scaled = replace(
        recipe,
        batch_size=batch_size,
        lr_max=recipe.lr_max * factor,
        lr_start=recipe.lr_start * factor,
    )
    return replace(preset, train=scaled)


def child_train(
    model_name: str,
    preset_name: str,
    spec: str,
    ends_at: float,
    device_data: str = "auto",
    batch_size: int | None = None,
    run_dir: Path | None = None,
    timed: bool = False,
) -> dict:
    """One training row in this process (KERAS_BACKEND=jax) that ends by `ends_at` (time.time()):
    steady images/s, compile time, minutes to the target top-1 (on validation: `target_of`),
    test top-1 where training stopped. The preset's whole recipe, as `toolkit train` runs it:
    fed from the device when `device_data` says so (`toolkit train --device-data`), at
    `batch_size` with the learning rate scaled by `scaled_recipe`'s rule. With a `run_dir` the
    state is saved there after every epoch and a later call continues from it: a row stops at
    an epoch's end when the next would overrun its budget. `timed`: the recipe's schedule is
    planned to end within the row's budget as `toolkit train --time` plans it (its warmup and
    cosine follow the fraction of the budget; the epochs are what fits), not its epochs."""
    started = time.perf_counter()
    budget_clock = time.monotonic()
    import jax
    import keras
    import numpy as np

    from toolkit.data import eval_dataset, stats_images
    from toolkit.data.specs import load_data
    from toolkit.evaluate import evaluate_model
    from toolkit.models import MODELS, channel_stats, get_preset
    from toolkit.training.budget import Budget, TimeBudget
    from toolkit.training.checkpoint import STATE_FILE, Checkpoint, epochs_done, save_state
    from toolkit.training.device_data import use_device_data
    from toolkit.training.train import (
        MAX_EPOCHS,
        compile_model,
        device_resident,
        host_fed,
        recipe_callbacks,
    )

    deadline = ends_at - (1 - CHILD_GRACE_S) * (ends_at - time.time())  # a tenth kept back
    preset = scaled_recipe(get_preset(model_name, preset_name), batch_size)
    budget = None
    if timed:  # counted from this process's start, as `toolkit train --time` counts
        budget = Budget(
            deadline - time.time() + (time.monotonic() - budget_clock), 0.0, budget_clock
        )
        preset = replace(preset, train=replace(preset.train, time_budget=budget.seconds))
    recipe = preset.train
    data = load_data(spec, seed=0, val_fraction=recipe.val_fraction)
    goal = target_of(model_name, preset_name)
    target = goal.top1 if _has_target_data(goal, data.name) else None
    keras.utils.set_random_seed(0)
    keras.mixed_precision.set_global_policy(PRECISION)
    norm = None
    if MODELS[preset.model].preprocessing == "normalize":
        norm = channel_stats(stats_images(data.x_train, 0))
    batch = min(recipe.batch_size, len(data.y_train))
    preset = replace(preset, train=replace(recipe, batch_size=batch))
    on_device = use_device_data(device_data, data.x_train)
    feed = device_resident if on_device else host_fed
    train_data, model, fit_model = feed(preset, data, norm, 0)
    compile_model(fit_model, preset, len(train_data), True)
    state = run_dir / "checkpoint" if run_dir is not None else None
    done_before = epochs_done(state) if state is not None else 0
    setup_s = time.perf_counter() - started

    class Clock(keras.callbacks.Callback):
        """Step end times per epoch; stops at the deadline or once validation reaches target."""

        def __init__(self):
            super().__init__()
            self.fit_start = 0.0
            self.epochs: list[dict] = []
            self.steps: list[float] = []
            self.eval_s = 0.0
            self.reached: float | None = None
            self.compile_s = 0.0
            self.stopped_by = "the recipe's epochs"
            self.cut = False

        def on_train_begin(self, logs=None):
            self.fit_start = time.perf_counter()

        def on_epoch_begin(self, epoch, logs=None):
            self.steps = [time.perf_counter()]

        def on_train_batch_end(self, batch, logs=None):
            if logs and "loss" in logs:
                float(logs["loss"])  # the step has finished before the clock is read
            now = time.perf_counter()
            self.steps.append(now)
            # what evaluating takes after a stop: validation (compiled by the first one, timed
            # since), and the test predictions' own compile (less than the train step's)
            compile_s = self.steps[1] - self.steps[0] if not self.epochs else self.compile_s
            self.compile_s = compile_s
            after = 0.5 * compile_s + (1.5 * self.eval_s if self.eval_s else compile_s)
            if budget is not None:  # TimeBudget keeps the evaluation's time aside: a backstop
                after = 0.0
            if time.time() + after > deadline:
                self.stopped_by = "the row's budget"
                self.cut = True  # mid-epoch: not a checkpoint
                self.model.stop_training = True

        def on_test_begin(self, logs=None):
            self._eval_start = time.perf_counter()

        def on_test_end(self, logs=None):
            self.eval_s = max(self.eval_s, time.perf_counter() - self._eval_start)

        def on_epoch_end(self, epoch, logs=None):
            logs = logs or {}
            now = time.perf_counter()
            val = float(logs.get("val_accuracy", float("nan")))
            self.epochs.append(
                {
                    "epoch": epoch + 1,
                    "steps": len(self.steps) - 1,
                    "step_s": np.diff(self.steps).tolist(),
                    "minutes": round((now - self.fit_start) / 60, 3),
                    "val_top1": round(val, 4),
                    "train_top1": round(float(logs.get("accuracy", float("nan"))), 4),
                }
            )
            if state is not None and not self.cut:  # the next call continues from here
                save_state(state / STATE_FILE, self.model, epoch + 1)
            if target is not None and self.reached is None and val >= target:
                self.reached = (now - self.fit_start) / 60
                self.stopped_by = "the target top-1 reached on validation"
                self.model.stop_training = True
            epoch_s = now - self.steps[0]  # the next epoch, its validation, then the test
            if state is not None and now + 1.2 * epoch_s + 1.5 * self.eval_s > deadline:
                self.stopped_by = "the row's budget, at an epoch's end (saved: a call resumes)"
                self.model.stop_training = True

    clock = Clock()
    callbacks = [clock]
    if budget is not None:  # plans the steps (and the schedule) to end within the budget
        batches = [-(-len(y) // batch) for y in (data.y_val, data.y_test)]
        callbacks.append(TimeBudget(budget, len(train_data), *batches, verbose=False))
    callbacks += recipe_callbacks(recipe)  # EMA and early stopping, as `toolkit train`
    if state is not None:  # restores the saved epochs when fit starts (the step built)
        state.mkdir(parents=True, exist_ok=True)
        callbacks.insert(0, Checkpoint(state, write=False))
    fit_model.fit(
        train_data,
        validation_data=eval_dataset(data.x_val, data.y_val, batch),
        epochs=recipe.epochs if budget is None else MAX_EPOCHS,
        callbacks=callbacks,
        shuffle=False,
        verbose=0,
    )
    if any(getattr(c, "stopped_epoch", 0) for c in callbacks[1:]):  # EarlyStopping's
        clock.stopped_by = "early stopping (the recipe's patience)"
    test = evaluate_model(model, data.x_test, data.y_test, batch)
    first = clock.epochs[0]["step_s"] if clock.epochs else []
    steady = [s for e in clock.epochs for s in e["step_s"][1:]]  # each epoch's first: iterator
    step_s = float(np.median(steady)) if steady else None
    return {
        "model": model_name,
        "preset": preset_name,
        "precision": PRECISION,
        "device": str(jax.devices()[0].device_kind),
        "platform": jax.devices()[0].platform,
        "data": data.name,
        "splits": [len(data.y_train), len(data.y_val), len(data.y_test)],
        "batch": batch,
        "setup_s": round(setup_s, 1),
        "compile_s": round(first[0], 2) if first else None,
        "steady_steps": len(steady),
        "step_ms_median": None if step_s is None else round(step_s * 1000, 2),
        "images_per_s": None if step_s is None else round(batch / step_s, 1),
        "epochs_run": len(clock.epochs),
        "epochs_before": done_before,  # run by earlier calls (--run-dir)
        "epochs_done": done_before + len(clock.epochs),
        "recipe_epochs": recipe.epochs,
        "input_path": "device" if on_device else "host",
        "lr_max": recipe.lr_max,
        "schedule": "timed" if timed else "epochs",
        "final_lr": float(keras.ops.convert_to_numpy(fit_model.optimizer.learning_rate)),
        # the whole recipe at the median step: what a budget too short to finish it would take
        "recipe_minutes": None
        if step_s is None
        else round(recipe.epochs * len(train_data) * step_s / 60, 1),
        "train_minutes": clock.epochs[-1]["minutes"] if clock.epochs else 0.0,
        "stopped_by": clock.stopped_by,
        "target_name": goal.name,
        "target_figure": goal.top1,
        "target_data": goal.data,
        "target_top1": target,
        "minutes_to_target": None if clock.reached is None else round(clock.reached, 2),
        "best_val_top1": max((e["val_top1"] for e in clock.epochs), default=None),
        "test_top1": round(test["top1"], 4),
        "test_samples": test["samples"],
        "curve": [{k: v for k, v in e.items() if k != "step_s"} for e in clock.epochs],
    }


def _has_target_data(goal: Target, data_name: str) -> bool:
    """Whether `data_name` is the dataset of the target's figure (CIFAR-10 files: a name with
    cifar10 / cifar-10 in it, not cifar100)."""
    name = data_name.lower().replace("-", "")
    return (
        goal.available and "cifar10" in name and "cifar100" not in name and goal.data == "CIFAR-10"
    )


def child_probe() -> dict:
    """The platform and kind of each device jax sees."""
    import jax

    return {"devices": [[d.platform, str(d.device_kind)] for d in jax.devices()]}


# --- the parent -------------------------------------------------------------------------------


def _env(cpu_check: bool, **extra: str) -> dict[str, str]:
    """A child's environment: JAX, this checkout importable, Keras imported."""
    env = dict(os.environ)
    env.update(KERAS_BACKEND="jax", PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="2")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    if cpu_check:
        env["JAX_PLATFORMS"] = "cpu"
    return {**env, **extra}


def _child(argv: list[str], env: dict[str, str], timeout_s: float) -> tuple[dict | None, str]:
    """Run `python -m studies.gpu_rows --child ...`; its last stdout line as JSON, or None and
    why. Its stderr passes through (the device log shows progress)."""
    cmd = [sys.executable, "-m", MODULE, "--child", *argv]
    try:
        done = subprocess.run(
            cmd, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT, timeout=max(timeout_s, 1)
        )
    except subprocess.TimeoutExpired:
        return None, f"stopped at its budget ({timeout_s:.0f} s)"
    lines = done.stdout.strip().splitlines()
    if done.returncode == 0 and lines:
        try:
            return json.loads(lines[-1]), ""
        except json.JSONDecodeError:
            pass
    return None, f"child exited {done.returncode}: {(lines or ['no output'])[-1][:200]}"


def unpack(spec: str, into: Path) -> str:
    """`tar:FILE` -> folder:DIR of the archive unpacked under `into` (its one top folder when it
    has one); any other spec unchanged."""
    if not spec.startswith("tar:"):
        return spec
    archive = Path(spec[4:])
    if not archive.is_file():
        raise FileNotFoundError(f"--data {spec}: {archive} is not a file")
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    tops = [p for p in into.iterdir() if not p.name.startswith(".")]
    return f"folder:{tops[0] if len(tops) == 1 and tops[0].is_dir() else into}"


def _row(spec: dict, status: str, reason: str | None = None, **extra) -> dict:
    return {**spec, "status": status, "reason": reason, **extra}


def run_setup(spec: dict, args, scratch: Path) -> tuple[dict, dict]:
    """Unpack the data and find the devices; the row and the context later rows use."""
    from toolkit.bench.machine import nvidia_gpus

    start = time.perf_counter()
    context: dict = {"gpus": nvidia_gpus(), "data": None, "data_error": None}
    try:
        context["data"] = unpack(args.data, scratch / "data")
    except (OSError, tarfile.TarError) as exc:
        context["data_error"] = str(exc).splitlines()[0]
    probe, why = _child(["probe"], _env(args.cpu_check), spec["budget_s"])
    devices = probe["devices"] if probe else []
    context["jax_devices"] = devices
    context["jax_gpus"] = sum(1 for platform, _ in devices if platform == "gpu")
    context["jax_error"] = None if probe else why
    elapsed = round(time.perf_counter() - start, 1)
    return _row(spec, MEASURED, elapsed_s=elapsed, **context), context


def _missing(context: dict, need_gpu: bool) -> str | None:
    """Why a training row cannot run: no GPU (when `need_gpu`), no data; or None."""
    why = [_no_gpu_reason(context)] if need_gpu and not context["jax_gpus"] else []
    why += [f"no data: {context['data_error']}"] if context["data"] is None else []
    return "; ".join(why) or None


def _no_gpu_reason(context: dict) -> str:
    if context["jax_error"]:
        return f"no GPU found: the jax probe failed ({context['jax_error']})"
    seen = ", ".join(sorted({p for p, _ in context["jax_devices"]})) or "no device"
    smi = "; nvidia-smi lists " + context["gpus"][0] if context["gpus"] else ""
    return f"no GPU: jax sees {seen}{smi}"


def run_train(spec: dict, args, context: dict) -> dict:
    """A training row (TRAIN_ROWS) in a child process, on the GPU (or the CPU with
    --cpu-check)."""
    start = time.perf_counter()
    gpu = context["jax_gpus"] >= 1
    why = _missing(context, need_gpu=not args.cpu_check)
    if why:
        return _row(spec, NOT_MEASURED, why)
    ends_at = time.time() + spec["budget_s"]
    model_name, preset_name = TRAIN_ROWS[spec["id"]]
    argv = ["train", model_name, preset_name or args.preset, context["data"], f"{ends_at:.3f}"]
    run_dir = "-" if args.run_dir is None else str(args.run_dir.resolve() / spec["id"])
    argv += [args.device_data, str(args.batch_size or "-"), run_dir]
    argv += ["timed" if args.timed else "epochs"]
    extra = {"CUDA_VISIBLE_DEVICES": "0"} if gpu else {}
    result, why = _child(argv, _env(not gpu, **extra), spec["budget_s"])
    elapsed = round(time.perf_counter() - start, 1)
    if result is None:
        return _row(spec, FAILED, why, elapsed_s=elapsed)
    if not gpu:
        return _row(spec, NOT_MEASURED, _cpu_check_reason(context), elapsed_s=elapsed, check=result)
    return _row(spec, MEASURED, _train_note(result), elapsed_s=elapsed, figures=result)


INPUT_PATH_BATCHES = (128, 512, 1024)  # the paper's batch, and larger ones (a GPU's)


def run_input_path(spec: dict, args, context: dict, scratch: Path) -> dict:
    """studies.input_path in a child on the GPU: images/s of the host-fed and device-resident
    input paths and of the step alone, for the `paper-cifar` ViT-LSA in bf16 at
    INPUT_PATH_BATCHES (with --cpu-check: --preset's model at a batch of 32, a few steps)."""
    start = time.perf_counter()
    gpu = context["jax_gpus"] >= 1
    why = _missing(context, need_gpu=not args.cpu_check)
    if why:
        return _row(spec, NOT_MEASURED, why)
    out = scratch / "input_path.json"
    preset = PAPER_PRESET if gpu else args.preset
    batches = INPUT_PATH_BATCHES if gpu else (32,)
    steps = ["--steps", "20", "--rounds", "3"] if gpu else ["--steps", "2", "--rounds", "1"]
    cmd = [sys.executable, "-m", "studies.input_path", "--model", "vit-lsa", "--preset", preset]
    cmd += ["--data", context["data"], "--batches", ",".join(map(str, batches)), *steps]
    cmd += ["--precision", PRECISION, "--json", str(out), "--id", "input-path-paper-vit-lsa"]
    extra = {"CUDA_VISIBLE_DEVICES": "0"} if gpu else {}
    try:
        done = subprocess.run(
            cmd, env=_env(not gpu, **extra), cwd=ROOT, timeout=max(spec["budget_s"], 1)
        )
    except subprocess.TimeoutExpired:
        done = None
    elapsed = round(time.perf_counter() - start, 1)
    if done is None or done.returncode != 0 or not out.is_file():
        why = "stopped at its budget" if done is None else f"exited {done.returncode}"
        return _row(spec, FAILED, why, elapsed_s=elapsed)
    result = json.loads(out.read_text())
    if not gpu:
        return _row(spec, NOT_MEASURED, _cpu_check_reason(context), elapsed_s=elapsed, check=result)
    return _row(spec, MEASURED, None, elapsed_s=elapsed, figures=result)


def _cpu_check_reason(context: dict) -> str:
    return _no_gpu_reason(context) + " (ran on the CPU as a check: see `check`, not a GPU figure)"


def _train_note(result: dict) -> str | None:
    """Why a training row has no minutes-to-target figure, or None."""
    if result["minutes_to_target"] is not None:
        return None
    if result["target_top1"] is None:
        return (
            f"no target: {result['target_name']}'s {result['target_figure']:.2%} is "
            f"{result['target_data']} top-1 and the data is {result['data']}; accuracy at the "
            "budget instead"
        )
    return (
        f"target top-1 {result['target_top1']:.2%} ({result['target_name']}) not reached: "
        f"stopped by {result['stopped_by']} after {result['epochs_run']} of "
        f"{result['recipe_epochs']} epochs (the cosine schedule mid-way; the whole recipe: "
        f"{_fmt(result['recipe_minutes'])} min at this speed); accuracy at the stop instead"
    )


EPOCH_LINE = re.compile(r"^\s*\d+/\d+ - \d+s - (\d+(?:\.\d+)?)(ms|s|us)/step\b")


def step_seconds(log: str) -> list[float]:
    """Seconds per step of each epoch line Keras printed with verbose=2 ("157/157 - 12s -
    76ms/step - ...")."""
    scale = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
    return [float(m[1]) * scale[m[2]] for m in map(EPOCH_LINE.match, log.splitlines()) if m]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_two_process(spec: dict, args, context: dict, scratch: Path) -> dict:
    """`toolkit train --strategy multi-process`, two processes, each on half of the GPUs."""
    start = time.perf_counter()
    gpus = context["jax_gpus"]
    if gpus == 1:
        return _row(spec, NOT_MEASURED, "one GPU: jax.devices('gpu') has 1, two processes need 2")
    why = _missing(context, need_gpu=not args.cpu_check)
    if why:
        return _row(spec, NOT_MEASURED, why)
    port, out, epochs = _free_port(), scratch / "two-process-run", 2
    half = max(gpus // 2, 1)
    procs = []
    for pid in (0, 1):
        extra = {"CUDA_VISIBLE_DEVICES": ",".join(str(pid * half + i) for i in range(half))}
        argv = [
            sys.executable, "-m", "toolkit.cli.main", "train", "--model", "shiftvit",
            "--preset", args.preset, "--data", context["data"], "--epochs", str(epochs),
            "--precision", PRECISION, "--out", str(out), "--strategy", "multi-process",
            "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2",
            "--process-id", str(pid), "--connect-timeout", "60",
        ]  # fmt: skip
        procs.append(
            subprocess.Popen(
                argv,
                cwd=ROOT,
                env=_env(gpus == 0, **(extra if gpus else {})),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    logs, deadline = [], start + spec["budget_s"]
    for proc in procs:
        try:
            logs.append(proc.communicate(timeout=max(deadline - time.perf_counter(), 1))[0])
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
                p.communicate()
            took = round(time.perf_counter() - start, 1)
            return _row(
                spec, FAILED, f"stopped at its budget ({spec['budget_s']} s)", elapsed_s=took
            )
    elapsed = round(time.perf_counter() - start, 1)
    codes = [p.returncode for p in procs]
    if any(codes):
        tail = logs[codes.index(next(c for c in codes if c))].strip().splitlines()
        why = f"exit codes {codes}: {(tail or [''])[-1][:200]}"
        return _row(spec, FAILED, why, elapsed_s=elapsed)
    digests = [re.findall(r"weights sha256 ([0-9a-f]{64})", log) for log in logs]
    steps = step_seconds(logs[0])
    from toolkit.runfiles import read_config

    config = read_config(out)
    batch = config.train_recipe["batch_size"]
    result = {
        "model": "shiftvit",
        "preset": args.preset,
        "precision": PRECISION,
        "epochs": epochs,
        "batch": batch,
        "distribution": dict(config.distribution),
        "epoch_step_s": steps,
        "images_per_s": round(batch / steps[-1], 1) if steps and steps[-1] > 0 else None,
        "equal_weights": len(digests[0]) == 1 and digests[0] == digests[1],
        "test_top1": json.loads((out / "metrics.json").read_text())["test_top1"],
    }
    shutil.rmtree(out, ignore_errors=True)
    if gpus == 0:
        return _row(spec, NOT_MEASURED, _cpu_check_reason(context), elapsed_s=elapsed, check=result)
    return _row(spec, MEASURED, elapsed_s=elapsed, figures=result)


# --- ort-cuda ---------------------------------------------------------------------------------


def slim_onnx(src: Path, dest: Path) -> list[Path]:
    """Copies of src/*.onnx in `dest` whose initializers over SLIM_THRESHOLD bytes are left
    out: ONNX external data naming SLIM_DATA, a file not written. A run's `export` folder's
    files are named RUN-FILE (the run folder's name first), so that two runs' files can meet."""
    import onnx

    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted(src.glob("*.onnx")):
        model = onnx.load(str(path))
        onnx.external_data_helper.convert_model_to_external_data(
            model, all_tensors_to_one_file=True, location=SLIM_DATA, size_threshold=SLIM_THRESHOLD
        )
        for tensor in model.graph.initializer:
            if onnx.external_data_helper.uses_external_data(tensor):
                tensor.ClearField("raw_data")  # what save() would write to SLIM_DATA
        target = dest / (f"{src.parent.name}-{path.name}" if src.name == "export" else path.name)
        with open(target, "wb") as f:
            f.write(model.SerializeToString())
        written.append(target)
    return written


def restore_weights(path: Path, into: Path) -> tuple[Path, int]:
    """`path` itself when it holds its weights, else a copy in `into` whose left-out weights
    are seeded random values of their shapes and types; and how many tensors were filled."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path), load_external_data=False)
    missing = [
        t
        for t in model.graph.initializer
        if onnx.external_data_helper.uses_external_data(t)
        and not (path.parent / _location(t)).is_file()
    ]
    if not missing:
        return path, 0
    rng = np.random.default_rng(0)
    for tensor in missing:
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)
        shape = tuple(tensor.dims)
        if np.issubdtype(dtype, np.floating):
            values = (rng.standard_normal(shape) * 0.02).astype(dtype)
        else:
            info = np.iinfo(dtype)
            values = rng.integers(max(info.min, -127), min(info.max, 127) + 1, shape).astype(dtype)
        filled = numpy_helper.from_array(values, tensor.name)
        tensor.ClearField("external_data")
        tensor.data_location = onnx.TensorProto.DEFAULT
        tensor.raw_data = filled.raw_data
    into.mkdir(parents=True, exist_ok=True)
    target = into / path.name
    onnx.save(model, str(target), save_as_external_data=True, location=target.name + ".data")
    return target, len(missing)


def _location(tensor) -> str:
    return next((e.value for e in tensor.external_data if e.key == "location"), "")


def _opset(path: Path) -> int | None:
    try:
        import onnx

        model = onnx.load(str(path), load_external_data=False)
    except Exception:  # noqa: BLE001  (a file onnx cannot read: the worker says why)
        return None
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


def run_ort(spec: dict, args, scratch: Path) -> dict:
    """ort-cuda rows of every --onnx file, CUDA graphs on and off; or why not."""
    from toolkit.runtimes.onnxruntime import ort_cuda_unavailable
    from toolkit.runtimes.timing import Protocol
    from toolkit.runtimes.worker import run_worker

    start = time.perf_counter()
    files = sorted(args.onnx.glob("*.onnx")) if args.onnx and args.onnx.is_dir() else []
    why = ort_cuda_unavailable()
    missing = [] if files else [f"no .onnx files in {args.onnx or '(no --onnx DIR)'}"]
    if missing or (why and not args.cpu_check):
        return _row(spec, NOT_MEASURED, "; ".join(missing + ([why] if why else [])))
    runtime, batches = ("ort-cuda", ORT_BATCHES) if not why else ("ort-cpu", (1,))
    rows_n = len(files) * len(batches) * 2
    seconds = args.ort_seconds or min(3.0, max(0.2, spec["budget_s"] / rows_n - ORT_ROW_OVERHEAD_S))
    deadline = start + spec["budget_s"]
    rows = []
    for path in files:
        runnable, filled = restore_weights(path, scratch / "onnx")
        for graph in (True, False):
            for batch in batches:
                left = deadline - time.perf_counter()
                base = {"file": path.name, "opset": _opset(path), "batch": batch}
                base |= {"cuda_graph_asked": graph, "weights_filled": filled}
                if left < seconds + 2:
                    rows.append({**base, "status": NOT_MEASURED, "reason": "the budget was spent"})
                    continue
                protocol = Protocol(warmup=ORT_WARMUP, runs=None, seconds=seconds)
                row = run_worker(runnable, runtime, batch, protocol, None, left, cuda_graph=graph)
                rows.append({**base, **_ort_fields(row)})
    elapsed = round(time.perf_counter() - start, 1)
    result = {"runtime": runtime, "seconds_per_row": round(seconds, 2), "rows": rows}
    if why:
        return _row(spec, NOT_MEASURED, f"{why} (ran on ort-cpu as a check)", elapsed_s=elapsed,
                    check=result)  # fmt: skip
    ok = any(r.get("status") == "ok" for r in rows)
    return _row(spec, MEASURED if ok else FAILED, None, elapsed_s=elapsed, figures=result)


def _ort_fields(row: dict) -> dict:
    keep = ("status", "reason", "p50_ms", "p90_ms", "images_per_s", "load_ms", "first_ms")
    out = {k: row.get(k) for k in keep if k in row}
    out["cuda_graph"] = (row.get("settings") or {}).get("cuda_graph")
    out["providers"] = row.get("providers")
    return out


# --- the report -------------------------------------------------------------------------------


def _fmt(value, spec: str = "", none: str = "-") -> str:
    return none if value is None else format(value, spec)


def markdown(report: dict) -> str:
    """The report as Markdown: provenance, the plan, then each row's figures or why not."""
    from studies.provenance import header_lines

    gpus = report["machine"].get("gpus") or ["none (nvidia-smi lists no GPU)"]
    lines = [
        "# GPU rows",
        "",
        *header_lines(report),
        f"- GPU: {'; '.join(gpus)}",
        f"- plan: {report['minutes']} device minutes; rows run: {', '.join(report['rows_run'])}",
        "",
        "| row | budget | took (s) | status |",
        "|---|---:|---:|---|",
    ]
    for row in report["rows"]:
        status = row["status"] + (f": {row['reason']}" if row.get("reason") else "")
        lines.append(
            f"| {row['id']} | {row['budget_s']} s | {_fmt(row.get('elapsed_s'), '.0f')} "
            f"| {status} |"
        )
    for row in report["rows"]:
        figures = row.get("figures") or row.get("check")
        if not figures or row["id"] == "setup":
            continue
        label = "" if row.get("figures") else " (CPU check: not a GPU figure)"
        lines += ["", f"## {row['id']}{label}", ""]
        if row["id"] in TRAIN_ROWS:
            f = figures
            lines += [
                f"- {f['model']} `{f['preset']}` on {f['device']}, {f['precision']}, batch "
                f"{f['batch']}, {f['data']} ({'/'.join(map(str, f['splits']))})",
                f"- train step: {_fmt(f['images_per_s'], ',.1f')} images/s (median of "
                f"{f['steady_steps']} steps, {_fmt(f['step_ms_median'])} ms); compile "
                f"{_fmt(f['compile_s'])} s",
                f"- minutes to {f['target_name']}'s top-1 ({f['target_figure']:.2%} "
                f"{f['target_data']}): "
                + (
                    _fmt(f["minutes_to_target"], none="not reached")
                    if f["target_top1"] is not None
                    else f"no target on {f['data']}"
                ),
                f"- stopped by {f['stopped_by']} after {f['epochs_run']} of "
                f"{f['recipe_epochs']} epochs, {f['train_minutes']} min (the whole recipe: "
                f"{_fmt(f['recipe_minutes'])} min at this speed); best validation top-1 "
                f"{_fmt(f['best_val_top1'], '.2%')}, test top-1 {f['test_top1']:.2%} "
                f"({f['test_samples']} images)",
            ]
        elif row["id"] == "input-path":
            from studies.input_path import markdown as input_path_table

            lines += [input_path_table(figures).rstrip("\n")]
        elif row["id"] == "two-process":
            f = figures
            lines += [
                f"- {f['distribution']['processes']} processes, {f['distribution']['devices']} "
                f"devices, batch {f['batch']}: {_fmt(f['images_per_s'], ',.1f')} images/s in "
                f"epoch {f['epochs']} (Keras' ms/step); equal weights: {f['equal_weights']}",
            ]
        else:
            lines += [
                f"{figures['runtime']}, {figures['seconds_per_row']} s of timed calls per row "
                f"after {ORT_WARMUP} warmup calls; p50 ms (images/s)",
                "",
                "| file | opset | batch | CUDA graph on | CUDA graph off |",
                "|---|---:|---:|---|---|",
            ]
            cells: dict[tuple, dict] = {}
            for r in figures["rows"]:
                cells.setdefault((r["file"], r["opset"], r["batch"]), {})[r["cuda_graph_asked"]] = r
            for (name, opset, batch), pair in cells.items():
                lines.append(
                    f"| {name} | {opset} | {batch} | {_ort_cell(pair.get(True))} "
                    f"| {_ort_cell(pair.get(False))} |"
                )
    return "\n".join(lines) + "\n"


def _ort_cell(row: dict | None) -> str:
    if row is None:
        return "-"
    if row.get("status") != "ok":
        return f"{row.get('status')}: {row.get('reason')}"
    graph = "" if row.get("cuda_graph") in ("on", None) else f" ({row['cuda_graph']})"
    return f"{row['p50_ms']:.3f} ({row['images_per_s']:,.0f}){graph}"


def _machine() -> dict:
    from importlib import metadata

    from toolkit.bench.machine import describe, nvidia_gpus

    machine = describe()
    machine["gpus"] = nvidia_gpus()
    for name in ("jax", "jaxlib", "onnxruntime", "onnxruntime-gpu"):
        try:
            machine["versions"][name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return machine


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=25.0, help="device minutes (default 25)")
    parser.add_argument("--json", type=Path, help="write the report as JSON (atomically)")
    parser.add_argument("--onnx", type=Path, help="folder of the opset-23 .onnx files")
    parser.add_argument(
        "--data",
        default="tar:.gpu/cifar10-jpeg.tar.gz",
        help="data spec, or tar:FILE.tar.gz unpacked outside the tree (default: the carried "
        "CIFAR-10 JPEG copy, tar:.gpu/cifar10-jpeg.tar.gz)",
    )
    parser.add_argument(
        "--rows",
        default=",".join(DEFAULT_ROWS),
        help=f"rows to run, of {', '.join(ROW_IDS[1:])} (default {','.join(DEFAULT_ROWS)})",
    )
    parser.add_argument("--preset", default="seed", help="model preset (tests: tiny)")
    parser.add_argument(
        "--device-data",
        choices=("auto", "on", "off"),
        default="auto",
        help="training rows: `toolkit train --device-data` (default auto: on a GPU the split "
        "lives on the device)",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        help="training rows: this batch, the learning rate scaled by the square-root rule "
        "(default: the preset's batch)",
    )
    parser.add_argument(
        "--run-dir",
        type=Path,
        help="training rows: save each row's state in RUN_DIR/ROW after every epoch and "
        "continue from it (carry it back to the next call to resume the recipe)",
    )
    parser.add_argument(
        "--timed",
        action="store_true",
        help="training rows: plan the recipe's schedule to end within the row's budget, as "
        "`toolkit train --time` does (the epochs are what fits), not the recipe's epochs",
    )
    parser.add_argument(
        "--ort-seconds",
        type=float,
        help="ort-cuda: seconds of timed calls per row (default: the row's budget shared out, "
        "at most 3)",
    )
    parser.add_argument(
        "--cpu-check", action="store_true", help="run the rows on the CPU as a check of the command"
    )
    parser.add_argument("--slim-onnx", nargs=2, type=Path, metavar=("SRC", "DEST"))
    args = parser.parse_args(argv)
    rows = tuple(r.strip() for r in args.rows.split(",") if r.strip())
    unknown = [r for r in rows if r not in ROW_IDS[1:]]
    if unknown:
        parser.error(f"unknown row {unknown[0]!r}: choose from {', '.join(ROW_IDS[1:])}")
    if not (args.minutes > 0):
        parser.error("--minutes must be > 0")
    if args.ort_seconds is not None and not (args.ort_seconds > 0):
        parser.error("--ort-seconds must be > 0")
    args.rows = rows
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        kind, *rest = argv[1:]
        if kind == "probe":
            result = child_probe()
        else:
            model_name, preset_name, spec, ends_at, device_data, batch, run_dir, length = rest
            result = child_train(
                model_name,
                preset_name,
                spec,
                float(ends_at),
                device_data,
                None if batch == "-" else int(batch),
                None if run_dir == "-" else Path(run_dir),
                timed=length == "timed",
            )
        print(json.dumps(result), flush=True)
        return 0
    args = parse_args(argv)
    if args.slim_onnx:
        for path in slim_onnx(*args.slim_onnx):
            print(f"{path} ({path.stat().st_size / 2**10:.0f} KiB)")
        return 0
    from studies.provenance import commit_fields, publish
    from toolkit.common.atomic import write_json

    steps = plan(args.minutes, args.rows)
    report = {
        "command": f"python -m {MODULE} " + shlex.join(argv),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        **commit_fields(),
        "machine": _machine(),
        "minutes": args.minutes,
        "rows_run": list(args.rows),
        "plan": steps,
        "rows": [],
    }
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
    context: dict = {}
    with tempfile.TemporaryDirectory(prefix="gpu_rows-") as tmp:
        scratch = Path(tmp)
        for spec in steps:
            print(f"[gpu_rows] {spec['id']}: budget {spec['budget_s']} s", file=sys.stderr)
            if spec["id"] == "setup":
                row, context = run_setup(spec, args, scratch)
            elif spec["id"] in TRAIN_ROWS:
                row = run_train(spec, args, context)
            elif spec["id"] == "input-path":
                row = run_input_path(spec, args, context, scratch)
            elif spec["id"] == "two-process":
                row = run_two_process(spec, args, context, scratch)
            else:
                row = run_ort(spec, args, scratch)
            report["rows"].append(row)
            print(f"[gpu_rows] {spec['id']}: {row['status']} {row.get('reason') or ''}",
                  file=sys.stderr)  # fmt: skip
            if args.json:
                write_json(args.json, report)
    return publish(report, markdown(report), args.json)


if __name__ == "__main__":
    sys.exit(main())
