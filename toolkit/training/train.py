"""`toolkit train`: build a preset, fit it on a dataset, write the run folder.

In a multi-process run (`--strategy multi-process`) every process trains the same model on its
part of each batch; process 0 alone writes the run folder (the others read it on --resume:
a shared --out across hosts) and every process logs the sha256 of its final weights.

Every file is written atomically (a temp file in its folder, then a rename): the checkpoint
after each epoch (toolkit.training.checkpoint), history.csv, config.json, labels.txt,
model.keras, history.png, and metrics.json last, which marks the run finished. A disk that
fills on the way stops the run in one line (RunError, exit 1) naming the file and the
`--resume` command that continues from the last complete epoch once there is space again.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import keras
import numpy as np

from toolkit.common import atomic
from toolkit.common.backend import backend_info, jit_compile
from toolkit.common.durations import format_seconds
from toolkit.common.errors import RunError, UsageError
from toolkit.common.versions import versions
from toolkit.data import (
    Dataset,
    check_labels,
    eval_dataset,
    load_data,
    stats_images,
    stream_errors,
    train_dataset,
    training_model,
)
from toolkit.data.mixing import Mixing
from toolkit.evaluate import evaluate_compiled, evaluate_model
from toolkit.models import (
    MODELS,
    Preset,
    build_model,
    channel_stats,
    count_macs,
    preset_from_dict,
)
from toolkit.models.recipes import TrainRecipe
from toolkit.runfiles import config_path, has_config, read_config_json, write_config
from toolkit.runfiles.folder import (
    CHECKPOINT_DIR,
    HISTORY_FILE,
    HISTORY_PLOT_FILE,
    LABELS_FILE,
    LOCK_FILE,
    METRICS_FILE,
    MODEL_FILE,
    hold_run_folder,
    labels_text,
)
from toolkit.training.budget import Budget, BudgetTooShort, TimeBudget
from toolkit.training.checkpoint import (
    Checkpoint,
    HistoryLog,
    epochs_done,
    load_state,
    read_clock,
)
from toolkit.training.cluster import MULTI_PROCESS, Cluster, barrier, connect, fingerprint
from toolkit.training.device_data import IndexBatches, device_trainer, use_device_data
from toolkit.training.divergence import StopOnDivergence
from toolkit.training.history_plot import plot_history
from toolkit.training.losses import HardAccuracy, HardTopKAccuracy, SmoothedCrossentropy
from toolkit.training.options import TrainOptions, default_out, resume_options, validate
from toolkit.training.progressive import fit_in_phases
from toolkit.training.resolution import ResolutionRamp, ramp_of
from toolkit.training.schedule import (
    LearningRateLog,
    PlannedAdamW,
    PlannedWarmupCosine,
    WarmupCosine,
)
from toolkit.training.strategies import (
    Placement,
    check_strategy,
    make_placement,
)

MAX_EPOCHS = 1_000_000  # a timed run's `fit` bound: its TimeBudget stops it


def mixing(recipe: TrainRecipe, num_classes: int = 0) -> Mixing:
    """The Mixup/CutMix of `recipe` for `num_classes` classes."""
    return Mixing(recipe.mixup, recipe.cutmix, recipe.mix_prob, num_classes, recipe.cutmix_alpha)


def compile_model(
    model: keras.Model,
    preset: Preset,
    steps_per_epoch: int,
    jit: bool,
    optimizer: keras.optimizers.Optimizer | None = None,
) -> None:
    """Compile `model` as `toolkit train` does (studies/train_throughput times it too):
    AdamW on the warmup-cosine schedule of the preset's recipe (with a moving average of the
    weights when `ema`), sparse CE (SmoothedCrossentropy with label smoothing), top-1 and top-5
    (weighted by the batches' sample weights, so padding copies weighted 0 are not counted).
    A timed recipe's schedule runs on a plan of steps the optimizer holds (PlannedAdamW), first
    its `epochs`, then what `TimeBudget` measures fits the budget. `optimizer`: one another
    model sharing these weights trains with (progressive resizing), its state carried on."""
    recipe = preset.train
    total = steps_per_epoch * recipe.epochs
    optimizer_class = keras.optimizers.AdamW
    if recipe.time_budget is not None:
        optimizer_class = PlannedAdamW
        schedule = PlannedWarmupCosine(
            recipe.lr_start, recipe.lr_max, recipe.warmup_fraction, planned_steps=total
        )
    else:
        schedule = WarmupCosine(
            lr_start=recipe.lr_start,
            lr_max=recipe.lr_max,
            warmup_steps=int(total * recipe.warmup_fraction),
            total_steps=total,
        )
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    accuracy, top5 = (
        keras.metrics.SparseCategoricalAccuracy,
        keras.metrics.SparseTopKCategoricalAccuracy,
    )
    if recipe.label_smoothing or mixing(recipe).active:  # soft labels or smoothing: one-hot CE
        loss = SmoothedCrossentropy(recipe.label_smoothing)
    if mixing(recipe).active:  # soft training labels: scored by their largest class
        accuracy, top5 = HardAccuracy, HardTopKAccuracy
    if optimizer is None:
        optimizer = optimizer_class(
            learning_rate=schedule,
            weight_decay=recipe.weight_decay,
            use_ema=recipe.ema is not None,  # fit ends with the averages in the weights
            ema_momentum=0.99 if recipe.ema is None else recipe.ema,
        )
    model.compile(
        optimizer=optimizer,
        loss=loss,
        # weighted: the 0-weight copies that pad a split across replicas do not count
        weighted_metrics=[accuracy(name="accuracy"), top5(5, name="top5")],
        jit_compile=jit_compile(jit),  # JAX: always compiled
    )


def _distribution(options: TrainOptions, placement: Placement, cluster: Cluster | None) -> dict:
    """config.json's record of where the run trained: processes, devices, coordinator."""
    return {
        "strategy": options.strategy,
        "processes": placement.processes,
        "devices": placement.replicas,
        "coordinator": None if cluster is None else cluster.coordinator,
    }


def _run_config(
    options: TrainOptions, preset: Preset, data: Dataset, norm, distribution: dict
) -> dict:
    return {
        "options": options.__dict__,
        "preset": preset.to_dict(),
        "dataset": {
            "name": data.name,
            "synthetic": data.synthetic,
            "image_shape": list(data.image_shape),
            "num_classes": data.num_classes,
            "splits": {
                "train": len(data.y_train),
                "val": len(data.y_val),
                "test": len(data.y_test),
            },
        },
        "preprocessing": MODELS[preset.model].preprocessing,
        "norm_stats": None if norm is None else [norm[0].tolist(), norm[1].tolist()],
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "versions": versions(),
        "backend": backend_info(),
        "distribution": distribution,
    }


def _prepare_folder(
    out: Path, options: TrainOptions, resume: bool, writer: bool = True
) -> TrainOptions:
    """Check the output folder before anything is written; on resume, reuse its options.
    A process that does not write (multi-process, id > 0) only reads: it ignores the hidden
    files (lock, write probe) the writing process may be creating at the same time."""
    if resume:
        options = resume_options(out, options.__dict__)
        if writer:
            atomic.check_writable(
                out / METRICS_FILE, "--out", "copy the run folder somewhere writable"
            )
        return options
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file: pass a folder path")
    ignored = (lambda p: p.name == LOCK_FILE) if writer else (lambda p: p.name.startswith("."))
    if out.exists() and not all(ignored(p) for p in out.iterdir()):  # a dead run's lock
        raise UsageError(
            f"run folder {out} already exists: pass --resume to continue it or another --out"
        )
    if writer:
        atomic.check_writable(config_path(out), "--out", "pass --out DIR in a writable place")
    return options


def _check_cluster(options: TrainOptions, out: Path | None, cluster: Cluster | None) -> None:
    """UsageError unless `cluster` is given exactly for --strategy multi-process, with --out."""
    if options.strategy == MULTI_PROCESS and cluster is None:
        raise UsageError(
            f"--strategy {MULTI_PROCESS} needs --coordinator HOST:PORT, --num-processes N and "
            "--process-id I (or the KERAS_DISTRIBUTION_* variables)"
        )
    if options.strategy != MULTI_PROCESS and cluster is not None:
        raise UsageError(
            f"--coordinator, --num-processes and --process-id go with --strategy {MULTI_PROCESS}"
            f" (this run's is {options.strategy})"
        )
    if cluster is not None and out is None:
        raise UsageError(
            f"--strategy {MULTI_PROCESS} needs --out: the one run folder every process names "
            "(on several hosts a shared folder)"
        )


def train(
    options: TrainOptions,
    out: Path | None = None,
    resume: bool = False,
    cluster: Cluster | None = None,
    new_budget: bool = False,
    started: float | None = None,
) -> Path:
    """Train per `options` into `out` (a new folder unless `resume`); return the run folder.
    With a `cluster` (--strategy multi-process) this is one of its processes. A timed run's
    budget counts from `started` (time.monotonic(); default: now); resumed, it has what is left
    of its budget, or `options.time` with `new_budget`."""
    started = time.monotonic() if started is None else started
    if resume and out is None:
        raise UsageError("--resume needs --out: the run folder to continue")
    _check_cluster(options, out, cluster)
    out = Path(out) if out is not None else default_out(options)
    writer = cluster is None or cluster.writer
    options = _prepare_folder(out, options, resume, writer)  # refusals before anything is created
    check_strategy(options.strategy)
    validate(options, 1 if cluster is None else cluster.num_processes)  # before the folder
    if not writer:  # process 0 holds the folder; connecting waits for it to get that far
        with _joined(cluster, options, out, resume):
            return _train(options, out, resume, cluster, started=started)
    with hold_run_folder(out):  # one `toolkit train` at a time per run folder
        # checked again under the lock: a run that started or finished since is refused
        options = _prepare_folder(out, options, resume)
        with _joined(cluster, options, out, resume):  # the other processes get its one line
            try:
                return _train(options, out, resume, cluster, new_budget, started)
            except BudgetTooShort:  # found once setup is timed: nothing of a new run is kept
                if not resume:  # the folder was empty (or new)
                    _empty(out)
                raise
            except OSError as exc:
                full = atomic.full_disk(exc)
                if full is None:
                    raise
                raise RunError(_full_disk_message(full, out, cluster)) from None


def _empty(out: Path) -> None:
    """Remove what a refused new run wrote into `out` (its lock stays for its holder)."""
    for path in out.iterdir():
        if path.name == LOCK_FILE:
            continue
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def _joined(
    cluster: Cluster | None, options: TrainOptions, out: Path, resume: bool
) -> contextlib.AbstractContextManager:
    """Inside: the processes of `cluster` joined, and a lost one stops this one in one line
    saying how every process resumes (`connect`); nothing without a cluster."""
    if cluster is None:
        return contextlib.nullcontext()
    hint = (
        f"resume the run from its last complete epoch with `toolkit train --out {out} "
        "--resume` in every process"
    )
    return connect(cluster, fingerprint({**options.__dict__, "resume": resume}), hint)


def _full_disk_message(exc: OSError, out: Path, cluster: Cluster | None) -> str:
    """The one line of a run that a full disk stopped: what, where, and how to go on."""
    reason = (exc.strerror or "no space left on device").lower()
    where = f" writing {exc.filename}" if exc.filename else f" writing into {out}"
    if not has_config(out):  # nothing to resume: the same command again
        return f"{reason}{where}: free space on {out.parent} and run the same command again"
    every = " in every process" if cluster is not None else ""
    return (
        f"{reason}{where}: free space and resume with `toolkit train --out {out} --resume`"
        f"{every} (it continues from the last complete epoch)"
    )


def _check_data(data: Dataset, options: TrainOptions) -> None:
    """UsageError when `data` cannot train a classifier as `options` ask."""
    check_labels(data, data.num_classes)
    if len(data.y_train) < 1 or len(data.y_val) < 1 or len(data.y_test) < 1:
        raise UsageError(f"dataset {options.data} is too small to split into train/val/test")
    if data.num_classes < 2:  # every prediction would be right: "test top-1 100.00%"
        raise UsageError(
            f"dataset {options.data} has {data.num_classes} class ({', '.join(data.class_names)})"
            ": a classifier needs at least 2; add images of another class"
        )
    if options.batch_size is not None and options.batch_size > len(data.y_train):
        raise UsageError(
            f"--batch-size {options.batch_size} is more than the {len(data.y_train)} training "
            f"images of {options.data}: pass --batch-size {len(data.y_train)} or less"
        )


def weights_sha256(model: keras.Model) -> str:
    """sha256 of `model`'s weights (values in order): equal in every process of a run."""
    digest = hashlib.sha256()
    for variable in model.weights:
        digest.update(np.ascontiguousarray(keras.ops.convert_to_numpy(variable)).tobytes())
    return digest.hexdigest()


def _check_split(batch: int, placement: Placement) -> None:
    """UsageError unless every process can feed an equal part of each batch to its devices."""
    if placement.processes > 1 and batch % placement.replicas:
        raise UsageError(
            f"batch size {batch} does not split evenly across the {placement.replicas} devices "
            f"of {placement.processes} processes: pass --batch-size a multiple of "
            f"{placement.replicas}"
        )


def _budget(
    preset: Preset, options: TrainOptions, out: Path, resume: bool, new_budget: bool, started: float
) -> Budget | None:
    """This process's share of a timed run's budget: all of it for a new run, what its
    checkpoint left on --resume (or `options.time` from now with `new_budget`)."""
    seconds = preset.train.time_budget
    if seconds is None:
        return None
    clock = read_clock(out / CHECKPOINT_DIR) if resume else {}
    spent = clock.get("seconds_spent", 0.0)
    if clock and not new_budget:
        seconds = clock["budget_seconds"] - spent
        if seconds <= 0:
            raise UsageError(
                f"{out} spent its budget of {format_seconds(clock['budget_seconds'])} "
                "before it stopped: pass --resume --time 10m, say, to train on"
            )
    return Budget(seconds=seconds, spent_before=spent, started=started)


def _train(
    options: TrainOptions,
    out: Path,
    resume: bool,
    cluster: Cluster | None = None,
    new_budget: bool = False,
    started: float | None = None,
) -> Path:
    """The body of `train`, run while this process holds the run folder (or, in a
    multi-process run, while process 0 holds it: then only process 0 writes)."""
    writer = cluster is None or cluster.writer
    preset = validate(options, 1 if cluster is None else cluster.num_processes)
    started = time.monotonic() if started is None else started
    budget = _budget(preset, options, out, resume, new_budget, started)
    data = _load(options, preset, budget)
    keras.utils.set_random_seed(options.seed)
    previous_policy = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(options.precision)
    try:
        norm = None
        if MODELS[preset.model].preprocessing == "normalize":
            norm = channel_stats(stats_images(data.x_train, options.seed))
        placement = make_placement(options.strategy)
        batch = preset.train.batch_size
        _check_split(batch, placement)
        distribution = _distribution(options, placement, cluster)
        mode = options.device_data or "auto"
        on_device = use_device_data(mode, data.x_train, placement.replicas)
        options = replace(options, device_data="on" if on_device else "off")  # a resume keeps it
        options = replace(options, jit=_jit(options, budget))
        if writer:
            _write_settings(out, options, preset, data, norm, distribution, resume)
        if resume:
            _print_resuming(out, options, preset)
        with placement.scope():  # the pipeline splits batches evenly across the replicas
            if on_device:
                train_data, model, fit_model = device_resident(preset, data, norm, options.seed)
            else:
                train_data, model, fit_model = host_fed(preset, data, norm, options.seed)
            compile_model(fit_model, preset, len(train_data), options.jit)
        ramp = _ramp(preset, on_device)
        timer = None
        if budget is not None:
            budget.mark("model")
            batches = [-(-len(y) // batch) for y in (data.y_val, data.y_test)]
            timer = TimeBudget(budget, len(train_data), *batches, verbose=writer, ramp=ramp)
        callbacks = _callbacks(out, preset.train, writer, timer)

        fit = _Fit(train_data, data, preset.train, timed=timer is not None, verbose=writer)
        # a streamed folder that changes stops here, before the model and metrics are written
        with placement.scope(), stream_errors(data.x_train, data.x_val, data.x_test):
            if ramp is None:
                fit(fit_model, callbacks)
            else:
                if resume:  # the step the ramp is at
                    load_state(out / CHECKPOINT_DIR, fit_model)
                phases = _PhaseModels(preset, data, model, fit_model, options, len(train_data))
                fixed = len(train_data) * preset.train.epochs
                fit_in_phases(fit, phases.at, ramp, callbacks, fixed)
            if placement.processes > 1:  # predictions span every process: metrics instead
                test = evaluate_compiled(fit_model, data.x_test, data.y_test, batch)
            else:
                test = evaluate_model(model, data.x_test, data.y_test, batch)
        if cluster is not None:  # the replicas agree: the same digest in every process's log
            print(f"{cluster.describe()}: weights sha256 {weights_sha256(model)}", flush=True)
        if not writer:
            barrier("toolkit train: run folder written")  # exit once process 0 wrote it
            return out
        seen = int(keras.ops.convert_to_numpy(fit_model.optimizer.iterations)) * batch
        _write_results(out, model, data, test, _Length(started, budget, seen))
        if cluster is not None:
            barrier("toolkit train: run folder written")
    finally:
        keras.mixed_precision.set_global_policy(previous_policy)
    return out


@dataclass(frozen=True)
class _Fit:
    """One `fit` of the run: its batches, validation and length (a timed run's planner stops
    it), the given model and callbacks."""

    train_data: object
    data: Dataset
    recipe: TrainRecipe
    timed: bool
    verbose: bool

    def __call__(self, trained: keras.Model, callbacks: list) -> None:
        batch = self.recipe.batch_size
        trained.fit(
            self.train_data,
            validation_data=eval_dataset(self.data.x_val, self.data.y_val, batch),
            # a timed run stops at its planned step (TimeBudget), which prints its epochs
            epochs=MAX_EPOCHS if self.timed else self.recipe.epochs,
            callbacks=callbacks,
            shuffle=False,  # the pipeline shuffles, seeded
            verbose=2 if self.verbose and not self.timed else 0,
        )


def _ramp(preset: Preset, on_device: bool) -> ResolutionRamp | None:
    """The recipe's progressive resizing to the model's resolution (None: none); UsageError
    where the data path cannot train at another resolution."""
    if preset.train.progressive_resize is None:
        return None
    if on_device:
        raise UsageError(
            "progressive_resize trains from the host pipeline (the device-resident split is "
            "one model's): pass --device-data off"
        )
    return ramp_of(preset.train.progressive_resize, int(preset.arch.image_size))


class _PhaseModels:
    """What fit trains at each resolution of a progressive run, built and compiled once each:
    the model's layers behind a resize, augmented as `fit_model` is, on its optimizer."""

    def __init__(
        self,
        preset: Preset,
        data: Dataset,
        model: keras.Model,
        fit_model: keras.Model,
        options: TrainOptions,
        steps_per_epoch: int,
    ) -> None:
        self.preset, self.data, self.model, self.options = preset, data, model, options
        self.steps_per_epoch = steps_per_epoch
        self.models = {int(preset.arch.image_size): fit_model}

    def at(self, resolution: int) -> keras.Model:
        if resolution not in self.models:
            recipe, seed = self.preset.train, self.options.seed
            body = MODELS[self.preset.model].at_resolution(self.model, resolution)
            trained = training_model(
                body,
                recipe.augmentation,
                seed,
                x=self.data.x_train,
                rand_augment=recipe.rand_augment,
            )
            optimizer = self.models[int(self.preset.arch.image_size)].optimizer
            compile_model(trained, self.preset, self.steps_per_epoch, self.options.jit, optimizer)
            self.models[resolution] = trained
        return self.models[resolution]


def _load(options: TrainOptions, preset: Preset, budget: Budget | None) -> Dataset:
    """The run's data, checked, its split printed (a timed run notes the seconds it took)."""
    data = load_data(options.data, seed=options.seed, val_fraction=preset.train.val_fraction)
    if budget is not None:
        budget.mark("start-up and data")
    _check_data(data, options)
    height, width, _ = data.image_shape
    print(
        f"data {options.data}: {data.num_classes} classes, {height}x{width} images, split "
        f"{len(data.y_train)} train / {len(data.y_val)} val / {len(data.y_test)} test",
        flush=True,
    )
    return data


def _write_settings(
    out: Path,
    options: TrainOptions,
    preset: Preset,
    data: Dataset,
    norm: tuple | None,
    distribution: dict,
    resume: bool,
) -> None:
    """config.json (and the labels) of a new run; on --resume the kept settings updated with
    the options, preset (a new total of epochs when --epochs changed it) and distribution."""
    out.mkdir(parents=True, exist_ok=True)
    if not resume:
        write_config(out, _run_config(options, preset, data, norm, distribution))
        atomic.write_text(out / LABELS_FILE, labels_text(data.class_names))
        return
    config = read_config_json(out)
    config.update(options=options.__dict__, preset=preset.to_dict(), distribution=distribution)
    write_config(out, config)


def _print_resuming(out: Path, options: TrainOptions, preset: Preset) -> None:
    """The line a resumed run starts with: the settings it keeps and the epochs already run."""
    print(
        f"resuming {out} with its settings: {options.model} {options.preset} on "
        f"{options.data}, {preset.train.epochs} epochs in total "
        f"({epochs_done(out / CHECKPOINT_DIR)} run), batch size "
        f"{preset.train.batch_size}, {options.precision}, seed {options.seed}",
        flush=True,
    )


def _callbacks(
    out: Path, recipe: TrainRecipe, writer: bool, timer: TimeBudget | None = None
) -> list:
    """The fit's callbacks: a divergence stops the run, the learning rate into the logs,
    history and checkpoints (a process that is not the writer only restores process 0's
    checkpoint on --resume), a timed run's planner (after them: it times their writes too), EMA
    swapping and early stopping."""
    clock = None if timer is None else timer.budget.clock
    if writer:  # the history of an epoch first, then its checkpoint (the resume point)
        callbacks = [
            StopOnDivergence(recipe.lr_max),  # before an epoch that diverged is written
            LearningRateLog(),
            HistoryLog(out / HISTORY_FILE),
            Checkpoint(out / CHECKPOINT_DIR, clock=clock),
        ]
    else:  # restores process 0's checkpoint on --resume, writes nothing
        callbacks = [StopOnDivergence(recipe.lr_max), Checkpoint(out / CHECKPOINT_DIR, write=False)]
    return callbacks + ([] if timer is None else [timer]) + recipe_callbacks(recipe)


def _jit(options: TrainOptions, budget: Budget | None) -> bool:
    """--jit as given, else on for a timed run and off for a fixed-epoch one."""
    return options.jit if options.jit is not None else budget is not None


@dataclass(frozen=True)
class _Length:
    """How long a run trained: when its command started, its budget (None: a fixed-epoch
    run), the images it trained on."""

    started: float
    budget: Budget | None
    images_seen: int

    def record(self) -> dict:
        """metrics.json's and config.json's record: the budget, the wall seconds of the run's
        commands (a resumed timed run's earlier ones included), the images seen."""
        budget, before = self.budget, 0.0 if self.budget is None else self.budget.spent_before
        return {
            "time_budget_seconds": None if budget is None else budget.clock()["budget_seconds"],
            "wall_seconds": round(before + time.monotonic() - self.started, 1),
            "images_seen": self.images_seen,
        }


def recipe_callbacks(recipe: TrainRecipe) -> list:
    """The callbacks a recipe asks for: EMA swapped in for validation (what is saved) and early
    stopping on val_accuracy (restoring the best weights only without EMA: with it the saved
    weights are the averages at the end)."""
    callbacks = []
    if recipe.ema is not None:  # validation scores the averages: what is saved
        callbacks.append(keras.callbacks.SwapEMAWeights(swap_on_epoch=False))
    if recipe.early_stopping_patience:
        callbacks.append(
            keras.callbacks.EarlyStopping(
                monitor="val_accuracy",
                mode="max",
                patience=recipe.early_stopping_patience,
                # with ema the saved weights are the averages at the end, not a raw best
                restore_best_weights=recipe.ema is None,
            )
        )
    return callbacks


def _write_results(
    out: Path,
    model: keras.Model,
    data: Dataset,
    test: dict,
    length: _Length,
) -> None:
    """model.keras, the history plot, config.json's record of the run's length and
    metrics.json (last: the run is finished); the checkpoints go."""
    atomic.write_with(out / MODEL_FILE, model.save)
    metrics = {
        "test_top1": test["top1"],
        "test_top5": test["top5"],
        "test_samples": test["samples"],
        "parameters": int(model.count_params()),
        "macs_per_image": int(count_macs(model)),
        "epochs_run": _epochs_logged(out / HISTORY_FILE),
        "dataset": data.name,
        "synthetic_data": data.synthetic,
        "backend": backend_info(),
    }
    plot_history(out / HISTORY_FILE, out / HISTORY_PLOT_FILE, f"{out.name}: {data.name}")
    timing = length.record()  # the wall time as late as it can be taken
    metrics.update(timing)
    config = read_config_json(out)
    config["length"] = {"epochs_run": metrics["epochs_run"], **timing}
    write_config(out, config)
    atomic.write_json(out / METRICS_FILE, metrics)  # last: the run is finished
    shutil.rmtree(out / CHECKPOINT_DIR, ignore_errors=True)


def host_fed(preset: Preset, data: Dataset, norm, seed: int) -> tuple:
    """(training batches, model, what fit trains) fed from the host pipeline: tf.data (which
    augments) on TensorFlow, NumPy batches elsewhere (augmented in the step)."""
    recipe = preset.train
    train_data = train_dataset(
        data.x_train,
        data.y_train,
        recipe.batch_size,
        recipe.augmentation,
        seed,
        mixing(recipe, data.num_classes),  # soft labels for training only
        recipe.rand_augment,
        recipe.repeat_augment,
    )
    model = build_model(preset, data.image_shape, data.num_classes, norm_stats=norm)
    fit_model = training_model(
        model, recipe.augmentation, seed, x=data.x_train, rand_augment=recipe.rand_augment
    )
    return train_data, model, fit_model


def device_resident(preset: Preset, data: Dataset, norm, seed: int) -> tuple:
    """(index batches, model, what fit trains) with the split uploaded to the device once and
    augmented and mixed in the step (toolkit.training.device_data)."""
    recipe = preset.train
    batches = IndexBatches(len(data.y_train), recipe.batch_size, seed, recipe.repeat_augment)
    model = build_model(preset, data.image_shape, data.num_classes, norm_stats=norm)
    fit_model = device_trainer(
        model,
        data.x_train,
        data.y_train,
        data.num_classes,
        recipe.augmentation,
        mixing(recipe, data.num_classes),
        seed,
        recipe.rand_augment,
    )
    return batches, model, fit_model


def _epochs_logged(history: Path) -> int:
    if not history.is_file():
        return 0
    return max(len(history.read_text().strip().splitlines()) - 1, 0)


def rebuild_preset(config: dict) -> Preset:
    """The Preset a run was trained with, from its config.json."""
    return preset_from_dict(config["preset"])
