"""The `toolkit` command line: one table maps each sub-command to its arguments and runner."""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import json
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata

from toolkit.common.argtypes import OneLineParser, duration, path_arg, positive_int
from toolkit.common.durations import process_age
from toolkit.common.errors import RunError, UsageError


def _add_train(p: argparse.ArgumentParser) -> None:
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


def _run_train(args: argparse.Namespace) -> int:
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
    from toolkit.training.train import TrainOptions, resume_options, train

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


def _add_eval(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", type=path_arg, help="run folder written by `toolkit train`")
    p.add_argument("--data", help="data spec (default: the run's data); its test split is used")


def _run_eval(args: argparse.Namespace) -> int:
    from toolkit.runmodel import evaluate_run

    result = evaluate_run(args.run, args.data)
    print(
        f"{result['run']} on {result['data']} (test split, {result['samples']} images): "
        f"top-1 {result['top1']:.2%}  top-5 {result['top5']:.2%}"
    )
    return 0


def _add_demo(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", default="shapes", help="data spec (default: synthetic shapes)")
    p.add_argument("--out", type=path_arg, help="demo folder (default runs/demo-<time>)")
    p.add_argument("--epochs", type=int, help="default: the tiny preset's")


def _run_demo(args: argparse.Namespace) -> int:
    from toolkit.cli.demo import run_demo

    root, passed = run_demo(args.data, args.out, args.epochs)
    verdict = "every verification passed" if passed else "a verification FAILED (see above)"
    print(f"demo finished, {verdict}: everything is under {root}")
    return 0 if passed else 1


def _add_export(p: argparse.ArgumentParser) -> None:
    from toolkit.export import command

    command.add_arguments(p)


def _run_export(args: argparse.Namespace) -> int:
    from toolkit.export import command

    return command.run(args)


def _add_verify(p: argparse.ArgumentParser) -> None:
    from toolkit.verify import command

    command.add_arguments(p)


def _run_verify(args: argparse.Namespace) -> int:
    from toolkit.verify import command

    return command.run(args)


def _add_predict(p: argparse.ArgumentParser) -> None:
    from toolkit import predict

    predict.add_arguments(p)


def _run_predict(args: argparse.Namespace) -> int:
    from toolkit import predict

    return predict.run(args)


def _add_bench(p: argparse.ArgumentParser) -> None:
    from toolkit.bench import command

    command.add_arguments(p)


def _run_bench(args: argparse.Namespace) -> int:
    from toolkit.bench import command

    return command.run(args)


def _add_ship(p: argparse.ArgumentParser) -> None:
    from toolkit.ship import command

    command.add_arguments(p)


def _run_ship(args: argparse.Namespace) -> int:
    from toolkit.ship import command

    return command.run(args)


def _add_presets(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--classes",
        type=positive_int,
        help="number of classes (default: each preset's own, 10 or 1000 for ImageNet presets)",
    )
    p.add_argument(
        "--resolution",
        type=positive_int,
        help="input image size (default: each preset's own, 32 or 224 for ImageNet presets); "
        "any positive size fits: each model resizes its input to its preset's image size (a "
        "multiple of the patch size) before the patches",
    )


def _run_presets(args: argparse.Namespace) -> int:
    from toolkit.models import table
    from toolkit.models.presets import IMAGENET, SMALL_IMAGES

    if args.classes is None and args.resolution is None:  # the tables of docs/presets.md
        print(f"{SMALL_IMAGES.title}:\n\n{table.preset_table_markdown()}")
        print(f"{table.LENGTH_NOTE}\n")
        print(
            f"The SPT/LSA paper's CIFAR-10 presets (`paper-cifar`), beside its figures:\n\n"
            f"{table.cifar_paper_table()}\n"
        )
        print(f"{IMAGENET.title}, beside the paper's figures:\n\n{table.paper_table()}")
        return 0
    resolution = args.resolution or table.README_INPUT[0]
    print(table.preset_table((resolution, resolution, 3), args.classes or table.README_CLASSES))
    return 0


@dataclass(frozen=True)
class Command:
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    needs: tuple[str, ...] = ()  # modules that must be installed (checked before arguments)
    keras_backend: bool = False  # runs Keras: its backend must be installed


# Converters a JAX-only or runtime-only install may lack; module -> its name in the error.
CONVERTERS = ("tensorflow", "tf2onnx")
_NEED_NAMES = {"tensorflow": "TensorFlow", "tf2onnx": "tf2onnx"}

COMMANDS: dict[str, Command] = {
    "train": Command("train a model into a run folder", _add_train, _run_train, keras_backend=True),
    "eval": Command(
        "top-1/top-5 of a run on a test split", _add_eval, _run_eval, keras_backend=True
    ),
    "demo": Command(
        "tiny presets end to end on offline data", _add_demo, _run_demo, needs=CONVERTERS
    ),
    "export": Command(
        "ONNX and TFLite artifacts of a run", _add_export, _run_export, needs=CONVERTERS
    ),
    "verify": Command(
        "numerical parity of ops and models across runtimes",
        _add_verify,
        _run_verify,
        needs=CONVERTERS,
    ),
    "predict": Command(
        "top-k classes of image files with any artifact", _add_predict, _run_predict
    ),
    "bench": Command(
        "latency, throughput, memory, size and top-1 of every artifact per runtime",
        _add_bench,
        _run_bench,  # a run folder needs Keras, an export folder the runtimes alone (bench/)
    ),
    "ship": Command(  # exports, verifies and benches what is missing: the converters
        "the fastest file per target (android, ios, web, server) within a top-1 budget, in an "
        "app bundle with its model card, report and web app",
        _add_ship,
        _run_ship,
        needs=CONVERTERS,
    ),
    "presets": Command(  # counts are shipped; other --classes/--resolution build (Keras)
        "table of presets: parameters and MACs", _add_presets, _run_presets
    ),
}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken install counts as missing
        return False


def _install_hint(modules: list[str]) -> str:
    """`pip install ...` for `modules`, pinned as the installed toolkit's metadata pins them."""
    try:
        requirements = metadata.requires("toolkit") or []
    except metadata.PackageNotFoundError:
        requirements = []
    pins: list[str] = []
    extras: list[str] = []
    for module in modules:
        found = [r for r in requirements if re.match(rf"{re.escape(module)}\s*[=<>!~;\[]", r)]
        spec, _, marker = (found[0] if found else module).partition(";")
        extra = re.search(r"extra\s*==\s*[\"']([^\"']+)", marker)
        if extra and extra.group(1) not in extras:
            extras.append(extra.group(1))
        elif not extra:
            pins.append(spec.strip().replace(" ", ""))
    if extras:
        return f"pip install 'toolkit[{','.join(extras)}]'"
    return "pip install " + " ".join(pins)


def check_needs(name: str) -> None:
    """UsageError naming what `toolkit NAME` needs and how to install it, if anything is missing."""
    missing = [module for module in COMMANDS[name].needs if not _installed(module)]
    if missing:
        what = " and ".join(_NEED_NAMES.get(module, module) for module in missing)
        raise UsageError(f"toolkit {name} needs {what}: {_install_hint(missing)}")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser, with the arguments of `command` only.

    Other sub-commands are listed by name and help, so building the parser imports just the
    chosen command's argument module (none for `toolkit --help`).
    """
    parser = OneLineParser(prog="toolkit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    for name, entry in COMMANDS.items():
        p = sub.add_parser(name, help=entry.help, description=entry.help)
        if name == command:
            check_needs(name)
            entry.add_arguments(p)
            parser.long_options = p.long_options  # the chosen command's, for typo hints
            parser.chosen = p  # its empty values are refused (`check_no_empty`)
    return parser


def _unknown_arguments(options: list[str], command: str, unknown: list[str]) -> str:
    """The error for `unknown` arguments of `toolkit COMMAND`, with a "did you mean" for the
    first option that nearly matches one of the command's `options` (`--epochz` -> `--epochs`)."""
    hint = ""
    for item in unknown:
        close = item.startswith("-") and difflib.get_close_matches(item.split("=")[0], options, 1)
        if close:
            hint = f": did you mean '{close[0]}'?"
            break
    return f"unrecognized arguments: {' '.join(unknown)}{hint} (see `toolkit {command} --help`)"


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `toolkit` console script."""
    # when the command started: the process's start as a console script (a `--time` budget
    # counts Python's start-up and imports), this call's when called in a process
    started = time.monotonic() - (process_age() if argv is None else 0.0)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        command = argv[0] if argv and argv[0] in COMMANDS else None
        parser = build_parser(command)
        args, unknown = parser.parse_known_args(argv)
        if unknown:  # name the sub-command's help, whose options the user was typing
            raise UsageError(_unknown_arguments(parser.long_options, args.command, unknown))
        if (chosen := getattr(parser, "chosen", None)) is not None:
            chosen.check_no_empty(args)
        if COMMANDS[args.command].keras_backend:  # after parsing, so --help works without it
            from toolkit.common.backend import require_backend
            from toolkit.keras_setup import setup_keras

            require_backend()
            setup_keras()  # TensorFlow's start-up log lines kept off the terminal
        args.argv = argv  # what a supervised `toolkit train` runs again in its child
        args.started = started
        return COMMANDS[args.command].run(args)
    except UsageError as exc:
        print(f"toolkit: error: {exc}", file=sys.stderr)
        return 2
    except RunError as exc:
        print(f"toolkit: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("toolkit: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
