"""`toolkit train`'s options: what a run is asked to be (TrainOptions, written to
config.json), the checks that refuse what cannot train before anything is written, and the
options a `--resume` continues with."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from toolkit.common.durations import format_seconds
from toolkit.common.errors import UsageError
from toolkit.models import MODELS, Preset, get_preset
from toolkit.models.architectures import check_arch
from toolkit.models.geometry import check_geometry
from toolkit.models.overrides import parse_arch, parse_recipe
from toolkit.models.recipes import TrainRecipe, check_recipe, with_recipe
from toolkit.runfiles import config_path, has_config, read_config_json
from toolkit.runfiles.folder import CHECKPOINT_DIR, CONFIG_FILE, METRICS_FILE
from toolkit.training.checkpoint import epochs_done
from toolkit.training.cluster import MULTI_PROCESS
from toolkit.training.device_data import MODES as DEVICE_DATA_MODES
from toolkit.training.strategies import PRECISIONS, STRATEGIES, check_strategy


@dataclass(frozen=True)
class TrainOptions:
    """Everything `toolkit train` takes; written to config.json so a run can be rebuilt."""

    model: str
    preset: str = "tiny"
    data: str = "shapes"
    epochs: int | None = None
    time: float | None = None  # seconds of wall clock the run may take (--time); not with epochs
    batch_size: int | None = None
    precision: str = "float32"
    # compile the step: XLA on TF, torch.compile on torch; JAX always does. None: on for a timed
    # run (its accuracy is what fits in the time; XLA was the fastest step measured on every
    # CPU, records/train_throughput.jsonl), off for a fixed-epoch run; config.json records it
    jit: bool | None = None
    strategy: str = "default"
    seed: int = 0
    author: str | None = None  # the exported files' metadata: who made the model
    license: str | None = None  # and under which terms it may be used
    recipe: str | None = None  # KEY=VALUE[,KEY=VALUE...]: TrainRecipe fields set over the preset's
    arch: str | None = None  # KEY=VALUE[,KEY=VALUE...]: architecture fields over the preset's
    # the split on the device, augmented in the step (device_data.py): auto, on, off; None is
    # auto for a new run and the run's own choice on --resume (config.json records on or off)
    device_data: str | None = None


SEEDS = range(2**32)  # what numpy's and Keras' random generators take


def default_out(options: TrainOptions) -> Path:
    """runs/<model>-<preset>-<UTC time>: a fresh folder per run."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{options.model}-{options.preset}-{stamp}"


def validate(options: TrainOptions, processes: int = 1) -> Preset:
    """The preset `options` train, overrides applied; UsageError for anything it cannot train
    (its geometry and first batch, of the batch's share per process, included)."""
    preset = get_preset(options.model, options.preset)
    if options.precision not in PRECISIONS:
        raise UsageError(
            f"unknown precision '{options.precision}': choose one of {', '.join(PRECISIONS)}"
        )
    if options.strategy not in STRATEGIES:
        raise UsageError(
            f"unknown strategy '{options.strategy}': choose one of {', '.join(STRATEGIES)}"
        )
    check_strategy(options.strategy)
    if options.device_data not in (None, *DEVICE_DATA_MODES):
        raise UsageError(
            f"unknown --device-data '{options.device_data}': choose one of "
            f"{', '.join(DEVICE_DATA_MODES)}"
        )
    for name in ("epochs", "batch_size"):
        value = getattr(options, name)
        if value is not None and value < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be a positive integer, got {value}")
    _check_length(options)
    for name in ("author", "license"):
        value = getattr(options, name)
        if value is not None and (not value.strip() or not value.isprintable()):
            raise UsageError(
                f"--{name} {value!r} must be printable text on one line: it goes into the "
                "metadata of every exported .tflite"
            )
    if options.seed not in SEEDS:
        raise UsageError(
            f"--seed must be an integer from 0 to {SEEDS[-1]} (what NumPy and Keras seed with), "
            f"got {options.seed}"
        )
    train = with_recipe(preset.train, parse_recipe(options.recipe))
    check_recipe(train)
    arch = replace(preset.arch, **parse_arch(options.model, options.arch))
    check_arch(arch)
    _check_progressive(options.model, train, arch.image_size)
    share = -(-(options.batch_size or train.batch_size) // processes)  # a process's batch
    check_geometry(arch, share, options.precision)
    return replace(
        preset,
        arch=arch,
        train=replace(
            train,
            epochs=options.epochs or train.epochs,
            batch_size=options.batch_size or train.batch_size,
            # --epochs makes a fixed-epoch run of a timed preset; --time times any preset
            time_budget=None if options.epochs else (options.time or train.time_budget),
        ),
    )


def _check_length(options: TrainOptions) -> None:
    """UsageError when the run's length is asked for twice or cannot be timed."""
    if options.time is None:
        return
    if options.epochs is not None:
        raise UsageError(
            f"--time and --epochs both set how long the run trains: pass --time "
            f"{format_seconds(options.time)} for a run planned to end within it, or --epochs "
            f"{options.epochs} for that many epochs"
        )
    if not options.time > 0:
        raise UsageError(f"--time must be above 0, got {options.time}: pass --time 15m, say")
    if options.strategy == MULTI_PROCESS:
        raise UsageError(
            f"--time cannot plan a --strategy {MULTI_PROCESS} run yet (its processes would "
            "each plan their own number of steps): pass --epochs"
        )


# What --resume may change: --epochs sets the new total, --time a new budget from the resume on
# (without it a timed run has what is left of its own); --jit and --strategy change how the
# same steps run. Every other setting (model, data, batch size, precision, seed) is the run's.
RESUME_CHANGES = ("epochs", "time", "jit", "strategy")


def resume_options(out: Path, given: Mapping[str, object]) -> TrainOptions:
    """The options of the unfinished run in `out`, with the RESUME_CHANGES of `given` applied.

    Any other setting in `given` (None: not given) must equal the run's (config.json): a
    resumed run keeps its model, data, batch size, precision, ...; a conflict is a UsageError.
    """
    if not has_config(out):
        raise UsageError(f"cannot resume: {out} has no {CONFIG_FILE}; start a new run instead")
    if (out / METRICS_FILE).is_file():
        raise UsageError(f"{out} already finished; start a new run with another --out")
    config = read_config_json(out)
    stored = dict(config["options"])
    recipe = (config.get("preset") or {}).get("train") or {}
    if "time" not in stored:  # a run from before --time trained epochs: it goes on doing so
        stored["epochs"] = stored.get("epochs") or recipe.get("epochs")
    for name, value in given.items():
        kept = stored.get(name) if stored.get(name) is not None else recipe.get(name)
        if value is None or value == kept:
            continue
        flag = f"--{name.replace('_', '-')}"
        if name in RESUME_CHANGES:
            stored[name] = value
            continue
        had = f"{flag} {kept}" if kept is not None else f"{flag} (it had none)"
        raise UsageError(
            f"--resume keeps the run's {had} ({config_path(out)}): drop {flag} {value}, "
            "or start a new run with another --out"
        )
    done = epochs_done(out / CHECKPOINT_DIR)
    if stored.get("epochs") is not None and stored["epochs"] < done:
        raise UsageError(
            f"--epochs {stored['epochs']} is fewer than the {done} epochs {out} already ran: "
            f"pass --epochs {done} or more (the new total)"
        )
    for name in ("recipe", "arch"):  # empty: an override earlier versions accepted
        stored[name] = stored.get(name) or None
    return TrainOptions(**stored)


def _check_progressive(model: str, recipe: TrainRecipe, image_size: int) -> None:
    """UsageError where the recipe's progressive resizing cannot train this model."""
    progressive = recipe.progressive_resize
    if progressive is None:
        return
    if MODELS[model].at_resolution is None:
        able = [name for name, entry in MODELS.items() if entry.at_resolution is not None]
        raise UsageError(
            f"progressive_resize needs weights that hold at any resolution; {model}'s "
            f"position embedding does not: train {', '.join(able)} with it, or pass --recipe "
            "progressive_resize=none"
        )
    if not progressive[0] < image_size:
        raise UsageError(
            f"progressive_resize starts at {progressive[0]} pixels, not below the model's "
            f"{image_size}: pass --recipe progressive_resize={image_size // 2}:0.5, say"
        )
