"""`toolkit bench RUN`: every artifact of a run on every runtime that opens it, measured the
same way; writes RUN/bench.json, RUN/bench.md and RUN/bench.png.
"""

from __future__ import annotations

import argparse
import difflib
import math
import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from bench.suite import KERAS_FORMAT, Artifact, Plan, run_suite
from toolkit.argtypes import finite_float, positive_ints
from toolkit.errors import UsageError
from toolkit.formats import FORMATS
from toolkit.runfolder import BENCH_FILES, BENCH_TOP1_FILE
from toolkit.runtimes.timing import Protocol

if TYPE_CHECKING:
    from toolkit.models.macs import LayerCost

DEFAULT_SECONDS = 3.0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", type=Path, help="run folder, exported with `toolkit export`")
    p.add_argument("--runtime", default="all", help="comma list of runtimes (default all)")
    p.add_argument(
        "--formats", default="all", help="comma list of formats and/or keras (default all)"
    )
    p.add_argument("--batch", default="1", help="comma list of batch sizes (default 1)")
    p.add_argument("--threads", type=int, help="ORT/LiteRT threads (default: the core count)")
    p.add_argument("--runs", type=int, help="stop after this many timed calls")
    p.add_argument(
        "--seconds", type=finite_float, help=f"time budget per row (default {DEFAULT_SECONDS:g})"
    )
    p.add_argument("--warmup", type=int, default=10, help="untimed calls first (default 10)")
    p.add_argument("--data", help="data spec for top-1 (default: the run's); test split used")


def _choose(spec: str, known: list[str], what: str) -> list[str]:
    """`a,b` or `all` -> names from `known` in the given order; unknown is a UsageError."""
    names: list[str] = []
    for item in (s.strip() for s in spec.split(",")):
        chosen = known if item == "all" else [item]
        if item not in known and item != "all":
            close = difflib.get_close_matches(item, known, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise UsageError(f"unknown {what} '{item}': {hint}choose from {', '.join(known)}")
        names += [n for n in chosen if n not in names]
    if not names:
        raise UsageError(f"--{what} is empty: choose from {', '.join(known)}")
    return names


def parse_batches(spec: str) -> list[int]:
    """`1,32` -> [1, 32]; anything but positive integers is a UsageError."""
    return list(dict.fromkeys(positive_ints(spec, "--batch", "1,32")))


def _protocol(args: argparse.Namespace) -> Protocol:
    if args.runs is not None and args.runs < 1:
        raise UsageError(f"--runs must be at least 1, not {args.runs}")
    if args.seconds is not None and not 0 < args.seconds < math.inf:  # nan, inf never end
        raise UsageError(f"--seconds must be a positive finite number, not {args.seconds}")
    if args.warmup < 0:
        raise UsageError(f"--warmup must be 0 or more, not {args.warmup}")
    if args.threads is not None and args.threads < 1:
        raise UsageError(f"--threads must be at least 1, not {args.threads}")
    seconds = DEFAULT_SECONDS if args.runs is None and args.seconds is None else args.seconds
    return Protocol(args.warmup, args.runs, seconds)


def make_plan(args: argparse.Namespace) -> Plan:
    """Check every argument and the run folder; nothing is written before this succeeds."""
    from toolkit import atomic
    from toolkit.rundata import load_split
    from toolkit.runfolder import MODEL_FILE, open_run
    from toolkit.runtimes import RUNTIMES

    protocol = _protocol(args)
    batches = parse_batches(args.batch)
    runtimes = _choose(args.runtime, list(RUNTIMES), "runtime")
    run = open_run(args.run)
    run.load_model()  # another program's model.keras is refused before any timing
    for name in (*BENCH_FILES, BENCH_TOP1_FILE):  # the results must not be lost after the work
        atomic.check_writable(run.path / name, hint="copy the run folder to a writable place")
    exported = run.manifest()["artifacts"]
    files = {KERAS_FORMAT: run.path / MODEL_FILE}
    files |= {fmt: run.export_dir / e["file"] for fmt, e in exported.items()}
    formats = _choose(args.formats, list(files), "formats")
    nothing = _nothing_to_bench(args.run, runtimes, formats, files)
    if nothing:  # decided before any work: an empty table is no result, and nothing is written
        raise UsageError(nothing)
    split = None  # other classes than the run's would score top-1 against the wrong names
    if args.data:
        split = load_split(run, "test", args.data)[:2]
    layers = layer_costs_of(run)
    threads = args.threads or os.cpu_count()
    return Plan(
        run_dir=run.path,
        artifacts=[
            Artifact(f, files[f], files[f].stat().st_size if files[f].is_file() else 0)
            for f in formats
        ],
        runtimes=runtimes,
        batches=batches,
        protocol=protocol,
        threads=threads,
        macs_per_image=sum(layer.macs for layer in layers),
        layers=tuple(layers),
        data_spec=args.data,
        command=_command(args, runtimes, formats, batches, protocol, threads),
        test_split=split,
    )


def _opens(runtime: str, path: Path) -> bool:
    """Whether `runtime` opens the file at `path` (as `Plan.cells` pairs them)."""
    from toolkit.runtimes import RUNTIMES

    return path.suffix.lower() in RUNTIMES[runtime].suffixes


def _nothing_to_bench(
    run: Path, runtimes: list[str], formats: list[str], files: dict[str, Path]
) -> str | None:
    """Why no chosen runtime opens any chosen format's file (the way out included); None when
    at least one row will run."""
    if any(_opens(r, files[f]) for r in runtimes for f in formats):
        return None
    from toolkit.runtimes import RUNTIMES

    chosen = ", ".join(f"{f} ({files[f].name})" for f in formats)
    fits = [r for r in RUNTIMES if any(_opens(r, files[f]) for f in formats)]
    ways = [f"choose --runtime {','.join(fits)} for them"] if fits else []
    others = [f for f in files if f not in formats and any(_opens(r, files[f]) for r in runtimes)]
    exportable = [
        name
        for name, fmt in FORMATS.items()
        if name not in files and any(_opens(r, Path(fmt.filename)) for r in runtimes)
    ]
    if others:
        ways.append(f"add --formats {','.join(others)}")
    elif exportable:
        ways.append(f"export one it opens (`toolkit export {run} --format {exportable[0]}`)")
    return (
        f"nothing to bench: --runtime {','.join(runtimes)} opens none of the chosen formats "
        f"{chosen}; {', or '.join(ways) or 'export the run first'}"
    )


def layer_costs_of(run) -> list[LayerCost]:
    """MACs per image and parameters of each layer of the run's model (`layer_costs`), counted
    now rather than read from metrics.json, whose MACs are stale for runs trained before a
    counting fix."""
    from toolkit.models import build_model, layer_costs, preset_from_dict

    try:
        data = run.config["dataset"]
        preset = preset_from_dict(run.config["preset"])
        net = build_model(preset, tuple(data["image_shape"]), int(data["num_classes"]))
    except (KeyError, TypeError):  # a config.json without the architecture: load the model
        net = run.load_model()
    return layer_costs(net)


def _command(args, runtimes, formats, batches, protocol: Protocol, threads) -> str:
    """The exact `toolkit bench` command line that reproduces this plan."""
    argv = ["toolkit", "bench", str(args.run), "--runtime", ",".join(runtimes)]
    argv += ["--formats", ",".join(formats), "--batch", ",".join(map(str, batches))]
    argv += ["--threads", str(threads), "--warmup", str(protocol.warmup)]
    argv += ["--runs", str(protocol.runs)] if protocol.runs is not None else []
    argv += ["--seconds", f"{protocol.seconds:g}"] if protocol.seconds is not None else []
    return shlex.join(argv + (["--data", args.data] if args.data else []))


def write_outputs(result: dict, run_dir: Path) -> list[Path]:
    """bench.json, bench.md and bench.png in the run folder, each written atomically."""
    from bench.plot import plot
    from bench.report import markdown
    from toolkit import atomic

    atomic.write_json(run_dir / BENCH_FILES[0], result)
    atomic.write_text(run_dir / BENCH_FILES[1], markdown(result))
    atomic.write_with(run_dir / BENCH_FILES[2], lambda tmp: plot(result, tmp))
    return [run_dir / name for name in BENCH_FILES]


def bench_run(args: argparse.Namespace, quiet: bool = False) -> tuple[dict, list[Path]]:
    """Plan, measure and write; returns the result and the files written."""
    from bench.report import terminal_table

    plan = make_plan(args)
    if not quiet:
        n = len(plan.cells())
        print(f"benchmarking {n} rows of {plan.run_dir} ({plan.command})", flush=True)
    result = run_suite(plan)  # one progress line per row on stderr; the table at the end
    paths = write_outputs(result, plan.run_dir)
    if not quiet:
        print(terminal_table(result))
    return result, paths


def run(args: argparse.Namespace) -> int:
    _, paths = bench_run(args)
    for path in paths:
        print(f"   {path.name:10s} -> {path}")
    return 0


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The namespace `toolkit bench` would get for `argv` (used by `toolkit demo`)."""
    parser = argparse.ArgumentParser(prog="toolkit bench")
    add_arguments(parser)
    return parser.parse_args(argv)
