"""The `toolkit` command line: one table maps each sub-command to its arguments and runner."""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata

from toolkit.common.argtypes import OneLineParser, path_arg, positive_int
from toolkit.common.durations import process_age
from toolkit.common.errors import RunError, UsageError


def _add_train(p: argparse.ArgumentParser) -> None:
    from toolkit.training import command

    command.add_arguments(p)


def _run_train(args: argparse.Namespace) -> int:
    from toolkit.training import command

    return command.run(args)


def _add_eval(p: argparse.ArgumentParser) -> None:
    from toolkit import runmodel

    runmodel.add_eval_arguments(p)


def _run_eval(args: argparse.Namespace) -> int:
    from toolkit import runmodel

    return runmodel.run_eval(args)


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
