"""`toolkit train`: arguments and runner for the CLI table (`toolkit eval`'s are in
toolkit.runmodel, a layer above training). Imports stay light (no Keras, no TensorFlow) until
the runner runs, so `--help` is quick."""

from __future__ import annotations

import argparse
import json

from toolkit.common.argtypes import duration, path_arg, positive_int
from toolkit.common.errors import UsageError


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of `toolkit train`."""
    # Defaults are TrainOptions' (None here means "not given"): a resumed run keeps its own.
    p.add_argument("--model", help="shiftvit, vit-lsa or vit (with --resume: the run's)")
    p.add_argument(
        "--preset",
        help="seed, small, tiny, cpu60 and cpu15 (60 and 15 minutes: --time), for a GPU "
        "paper-cifar (the SPT/LSA paper's CIFAR-10 recipe), or for ImageNet shift-t-light, "
        "shift-t, shift-s, shift-b (default tiny; `toolkit presets` lists them)",
    )
    p.add_argument("--data", help="cifar10, cifar100, npz:PATH, folder:PATH, shapes (default)")
    p.add_argument(
        "--epochs",
        type=int,
        help="train this many epochs (default: the preset's, or its --time where it has one); "
        "with --resume: the new total",
    )
    p.add_argument(
        "--time",
        type=duration,
        metavar="DURATION",
        help="train within this wall-clock budget (90s, 15m, 1h: from the command's start to "
        "the saved model, setup and the final test included), the schedule planned to end at "
        "it; not with --epochs (default: the preset's budget, e.g. cpu60's 60m; with --resume: "
        "what is left of the run's, or this much from now)",
    )
    p.add_argument("--batch-size", type=int, help="default: the preset's")
    p.add_argument("--out", type=path_arg, help="run folder (default runs/<model>-<preset>-<time>)")
    p.add_argument("--precision", help="float32 (default), mixed_float16, mixed_bfloat16")
    p.add_argument(
        "--jit",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="compile the train step (XLA on TF, torch.compile on torch; JAX always does); "
        "default: on for a timed run (--time, cpu60, cpu15), whose accuracy is what fits in "
        "the time, off for --epochs; --no-jit: off",
    )
    p.add_argument(
        "--device-data",
        choices=("auto", "on", "off"),
        help="the training split on the device, gathered, augmented and mixed inside the "
        "compiled step: auto (default: on a GPU it fits), on, off (host pipeline)",
    )
    p.add_argument(
        "--strategy",
        help="default (default), mirrored (all GPUs) or multi-process (JAX: one process per "
        "host or GPU, each started with its own --process-id)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the unfinished run in --out with its settings (--epochs, --time, --jit "
        "and --strategy may change)",
    )
    p.add_argument("--seed", type=int, help="data split, shuffling and init seed (default 0)")
    p.add_argument(
        "--recipe",
        metavar="KEY=VALUE[,KEY=VALUE...]",
        help="set TrainRecipe fields over the preset's, e.g. label_smoothing=0.1,ema=0.999 "
        "switch those pieces on, erasing=0.5 sets the augmentation's; 0 or none switches one off "
        "(the keys: docs/presets.md, 'Recipe pieces'; with --resume: the run's)",
    )
    p.add_argument(
        "--arch",
        metavar="KEY=VALUE[,KEY=VALUE...]",
        help="set architecture fields over the preset's, e.g. drop_path=0.2 (stochastic depth), "
        "dropout=0, depths=2:2:6:2 (the keys: docs/presets.md, 'Architecture fields'; with "
        "--resume: the run's)",
    )
    p.add_argument("--author", help="who made the model: the exported .tflite metadata's author")
    p.add_argument("--license", help="its terms of use: the exported .tflite metadata's license")
    _add_cluster(p)


def _add_cluster(p: argparse.ArgumentParser) -> None:
    """train's flags of a multi-process run (--strategy multi-process)."""
    p.add_argument(
        "--coordinator",
        help="multi-process: HOST:PORT of process 0 (default: KERAS_DISTRIBUTION_JOB_ADDRESSES)",
    )
    p.add_argument(
        "--num-processes",
        type=int,
        help="multi-process: how many (default: KERAS_DISTRIBUTION_NUM_PROCESSES)",
    )
    p.add_argument(
        "--process-id",
        type=int,
        help="multi-process: this one's, 0 to N-1; 0 writes the run folder "
        "(default: KERAS_DISTRIBUTION_PROCESS_ID)",
    )
    p.add_argument(
        "--connect-timeout",
        type=positive_int,
        help="multi-process: seconds to wait for the other processes (default 120)",
    )


def run(args: argparse.Namespace) -> int:
    """`toolkit train`: a new run, a resumed one, or a multi-process run's supervisor."""
    from dataclasses import fields

    from toolkit.training import supervise
    from toolkit.training.cluster import cluster_for

    if supervise.is_worker():  # a multi-process run's training child: dies with its supervisor
        supervise.die_with_parent()
    elif _strategy(args) == "multi-process":  # one line where JAX would abort this process
        flags = (args.coordinator, args.num_processes, args.process_id, args.connect_timeout)
        cluster = cluster_for("multi-process", *flags)  # its refusals first, then the backend's
        supervise.check_backend()
        return supervise.supervise(args.argv, cluster, args.out)
    from toolkit.training.options import TrainOptions, resume_options
    from toolkit.training.train import train

    given = {f.name: getattr(args, f.name) for f in fields(TrainOptions)}  # None: not given
    if args.resume:
        if args.out is None:
            raise UsageError("--resume needs --out: the run folder to continue")
        options = resume_options(args.out, given)
    elif args.model is None:
        raise UsageError(
            "--model is required for a new run: shiftvit, vit-lsa or vit "
            "(or continue a run with --out RUN --resume)"
        )
    else:
        options = TrainOptions(**{k: v for k, v in given.items() if v is not None})
    flags = (args.coordinator, args.num_processes, args.process_id, args.connect_timeout)
    cluster = cluster_for(options.strategy, *flags)
    new_budget = args.resume and args.time is not None  # else a timed run has what is left
    out = train(
        options, args.out, args.resume, cluster, new_budget=new_budget, started=args.started
    )
    from toolkit.runfiles.folder import METRICS_FILE

    print(f"run folder: {out}")
    if cluster is not None and not cluster.writer and not (out / METRICS_FILE).is_file():
        return 0  # process 0 wrote the run folder on its own host
    metrics = json.loads((out / METRICS_FILE).read_text())
    print(f"test top-1 {metrics['test_top1']:.2%}  top-5 {metrics['test_top5']:.2%}")
    if metrics.get("time_budget_seconds"):
        from toolkit.common.durations import format_seconds

        print(
            f"{metrics['epochs_run']} epochs, {metrics['images_seen']:,} images in "
            f"{format_seconds(metrics['wall_seconds'])} of a "
            f"{format_seconds(metrics['time_budget_seconds'])} budget"
        )
    return 0


def _strategy(args: argparse.Namespace) -> str | None:
    """The --strategy of this train command: given, or on --resume the run's (None: unknown)."""
    if args.strategy is not None or not args.resume or args.out is None:
        return args.strategy
    from toolkit.runfiles import read_config_json

    try:
        return read_config_json(args.out)["options"]["strategy"]
    except (UsageError, KeyError, TypeError):
        return None  # train() says what is wrong with the folder
