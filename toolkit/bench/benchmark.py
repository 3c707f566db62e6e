"""The bench API: `bench_run(folder, ...)` measures every artifact of a run folder, or of an
export folder copied without its run, on every runtime that opens it, the same way, and writes
bench.json, bench.md and bench.png into the folder; `bench_interleaved` times the CPU files side
by side in one process instead (interleaved.py) and writes bench_interleaved.json and .md.
`toolkit bench` (command.py) maps its arguments to `BenchOptions`.

An export folder (model.json, labels.txt and its files) is benched with LiteRT and ONNX Runtime
alone, as on a device without TensorFlow, Keras or JAX: no Keras row, no top-1 (the data
loaders import Keras), and no MACs, GMAC/s or roofline (model.json records no MAC count).
"""

from __future__ import annotations

import math
import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from toolkit.bench import interleaved, web
from toolkit.bench.benchmarker import KERAS_FORMAT, Artifact, Plan, run_suite
from toolkit.bench.folder import BenchFolder, open_folder
from toolkit.common.argtypes import choose_names, comma_items, positive_ints
from toolkit.common.errors import UsageError
from toolkit.formats import FORMATS
from toolkit.runfiles import write_bench
from toolkit.runfiles.folder import (
    BENCH_FILES,
    BENCH_INTERLEAVED_FILES,
    BENCH_TOP1_FILE,
    MODEL_FILE,
)
from toolkit.runtimes import DEFAULT_RUNTIMES, RUNTIMES
from toolkit.runtimes.timing import Protocol

if TYPE_CHECKING:
    from toolkit.models.macs import LayerCost

DEFAULT_SECONDS = 3.0
# why an export folder's rows have no top-1, and no MACs, GMAC/s or roofline
NO_TOP1 = (
    "an export folder has no test data (toolkit's data loaders import Keras, and the split is "
    "drawn with the run's seed): bench the run folder for top-1"
)
NO_MACS = (
    "model.json records no MAC count, and counting needs the Keras model: bench the run folder "
    "for MACs, GMAC/s and the roofline"
)
NO_ROOFLINE = (
    "the roofline needs each layer's work and weights, which only the Keras model gives: bench "
    "the run folder for the roofline (GMAC/s use model.json's macs_per_image)"
)


@dataclass(frozen=True)
class BenchOptions:
    """What to bench and how (the options of `toolkit bench`; comma lists as on the command line,
    or sequences of names)."""

    run: Path
    runtime: str | Sequence[str] | None = None  # None: DEFAULT_RUNTIMES (all but the browser's)
    format: str | Sequence[str] = "all"
    batch: str | Sequence[int] = "1"
    threads: int | None = None  # ORT/LiteRT threads (default: the core count)
    runs: int | None = None  # stop after this many timed calls
    seconds: float | None = None  # time budget per row (default DEFAULT_SECONDS)
    warmup: int = 10
    data: str | None = None  # data spec for top-1 (default: the run's); its test split
    allow_modified: bool = False  # time files changed after export (sha256) with a warning
    interleaved: bool = False
    segments: int | None = None  # --interleaved only
    calls: int | None = None  # --interleaved only
    no_roofline: str | None = None  # a run folder's bench without the roofline, for this reason
    no_top1: str | None = None  # a run folder's bench without top-1 (ship has verify's), why

    def __post_init__(self) -> None:
        """Sequences of names or sizes as the comma lists the command line gives."""
        for name in ("runtime", "format", "batch"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                object.__setattr__(self, name, ",".join(map(str, value)))
        object.__setattr__(self, "run", Path(self.run))


@dataclass(frozen=True)
class Benched:
    """What a bench wrote: the result (bench.json's or bench_interleaved.json's content) and the
    files."""

    result: dict
    files: list[Path] = field(default_factory=list)


def choose_formats(spec: str, folder: BenchFolder, files: dict[str, Path]) -> list[str]:
    """Formats `--format` picks from the folder's `files`, in the order given; a known format
    the folder lacks is a UsageError saying how to get it, another name one with the choices."""
    for item in comma_items(spec, "--format"):
        name = item.lower()
        if name in files:
            continue
        have = f"choose from {', '.join(files)}"
        if name in FORMATS:
            raise UsageError(
                f"--format {name}: {folder.path} has no {name} file: export it "
                f"(`{folder.export_command(name)}`), or {have}"
            )
        if name == KERAS_FORMAT:
            raise UsageError(
                f"--format {name}: export folder {folder.path} has no {MODEL_FILE}: bench the "
                f"run folder for the keras row, or {have}"
            )
    return choose_names(spec, files, "--format", keep_order=True)


def check_mode_options(args: BenchOptions) -> None:
    """--segments and --calls only with --interleaved; --runs, --seconds and --data not with it."""
    if args.interleaved:
        for option, value in (("--runs", args.runs), ("--seconds", args.seconds)):
            if value is not None:
                raise UsageError(
                    f"{option} does not apply to --interleaved, which times --segments rounds "
                    f"of --calls calls of each file: drop {option}"
                )
        if args.data:
            raise UsageError("--interleaved scores no top-1: drop --data")
        return
    for option, value in (("--segments", args.segments), ("--calls", args.calls)):
        if value is not None:
            raise UsageError(f"{option} applies to --interleaved: add --interleaved, or drop it")


def parse_batches(spec: str | Sequence[int]) -> list[int]:
    """`1,32` (or [1, 32]) -> [1, 32]; anything but positive integers is a UsageError."""
    text = spec if isinstance(spec, str) else ",".join(map(str, spec))
    return list(dict.fromkeys(positive_ints(text, "--batch", "1,32")))


def _check_threads(args: BenchOptions) -> None:
    if args.threads is not None and args.threads < 1:
        raise UsageError(f"--threads must be at least 1, not {args.threads}")


def _protocol(args: BenchOptions) -> Protocol:
    if args.runs is not None and args.runs < 1:
        raise UsageError(f"--runs must be at least 1, not {args.runs}")
    if args.seconds is not None and not 0 < args.seconds < math.inf:  # nan, inf never end
        raise UsageError(f"--seconds must be a positive finite number, not {args.seconds}")
    if args.warmup < 0:
        raise UsageError(f"--warmup must be 0 or more, not {args.warmup}")
    _check_threads(args)
    seconds = DEFAULT_SECONDS if args.runs is None and args.seconds is None else args.seconds
    return Protocol(args.warmup, args.runs, seconds)


def chosen_runtimes(spec: str | Sequence[str] | None) -> list[str]:
    """The runtimes `--runtime` names (`all`: every one), in its order; None: the default
    ones, every runtime but the browser's (asked for by name, or `all`)."""
    return choose_names(spec or DEFAULT_RUNTIMES, RUNTIMES, "--runtime", keep_order=True)


def make_plan(args: BenchOptions) -> Plan:
    """Check every argument and the folder; nothing is written before this succeeds."""
    check_mode_options(args)
    protocol = _protocol(args)
    batches = parse_batches(args.batch)
    runtimes = chosen_runtimes(args.runtime)
    folder = open_folder(args.run)
    run = folder.run
    runtimes = _runtimes_here(args, folder, runtimes)
    _check_outputs(folder)
    files, formats = _chosen_files(args, folder, runtimes)
    split = None  # other classes than the run's would score top-1 against the wrong names
    if args.data:
        from toolkit.runfiles.data import load_split  # the data loaders import Keras

        split = load_split(run, "test", args.data)[:2]
    layers = layer_costs_of(run) if run is not None else []
    export_macs = folder.manifest.macs_per_image if run is None else None
    return Plan(
        run_dir=folder.path,
        artifacts=[
            Artifact(f, files[f], files[f].stat().st_size if files[f].is_file() else 0)
            for f in formats
        ],
        runtimes=runtimes,
        batches=batches,
        protocol=protocol,
        threads=args.threads or os.cpu_count(),
        macs_per_image=sum(layer.macs for layer in layers) if run is not None else export_macs,
        layers=tuple(layers),
        data_spec=args.data,
        command=_command(args, runtimes, formats, batches, protocol),
        test_split=split,
        model=folder.model,
        preset=folder.preset,
        kind=folder.kind,
        no_top1=args.no_top1 if run is not None else NO_TOP1,
        no_macs=args.no_roofline if run is not None else (NO_ROOFLINE if export_macs else NO_MACS),
        web_threads=args.threads,
        web_protocol=_web_protocol(args, protocol),
    )


def _runtimes_here(args: BenchOptions, folder: BenchFolder, runtimes: list[str]) -> list[str]:
    """The chosen `runtimes` for this folder: a run folder's model.keras checked first
    (another program's is refused before any timing); an export folder has no Keras row where
    all are asked for, and no --data (toolkit's data loaders import Keras)."""
    if folder.run is not None:
        from toolkit.runmodel import load_run_model  # Keras: only for a run folder

        load_run_model(folder.run)
        return runtimes
    if args.data:
        raise UsageError(
            f"--data needs the run folder: {folder.path} is an export folder, and toolkit's "
            "data loaders import Keras; bench the run folder for top-1, or drop --data"
        )
    return [r for r in runtimes if not RUNTIMES[r].loads_keras] or runtimes


def _check_outputs(folder: BenchFolder) -> None:
    """UsageError unless bench.json (and the run's top-1 cache) can be written: the results
    must not be lost after the work."""
    from toolkit.common import atomic

    outputs = (*BENCH_FILES, BENCH_TOP1_FILE) if folder.run is not None else BENCH_FILES
    for name in outputs:
        atomic.check_writable(
            folder.path / name, hint=f"copy the {folder.kind} to a writable place"
        )


def _chosen_files(
    args: BenchOptions, folder: BenchFolder, runtimes: list[str]
) -> tuple[dict[str, Path], list[str]]:
    """(format -> file, the formats `--format` picks): unmodified since export (unless
    allowed), something to time on `runtimes`, and each file one they take."""
    files = folder.files()
    formats = choose_formats(args.format, folder, files)
    folder.check_unmodified(formats, args.allow_modified)
    nothing = _nothing_to_bench(folder, runtimes, formats, files)
    if nothing:  # decided before any work: an empty table is no result, and nothing is written
        raise UsageError(nothing)
    _check_runtimes_take(runtimes, [files[f] for f in formats])
    return files, formats


def _web_protocol(args: BenchOptions, protocol: Protocol) -> Protocol:
    """The web rows' protocol: `protocol`, but web.WEB_SECONDS where no budget was given."""
    if args.runs is None and args.seconds is None:
        return Protocol(protocol.warmup, None, web.WEB_SECONDS)
    return protocol


def _opens(runtime: str, path: Path) -> bool:
    """Whether `runtime` opens the file at `path` (as `Plan.cells` pairs them)."""
    from toolkit.runtimes import RUNTIMES

    return path.suffix.lower() in RUNTIMES[runtime].suffixes


def _nothing_to_bench(
    folder: BenchFolder, runtimes: list[str], formats: list[str], files: dict[str, Path]
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
        ways.append(f"add --format {','.join(others)}")
    elif exportable:
        ways.append(f"export one it opens (`{folder.export_command(exportable[0])}`)")
    return (
        f"nothing to bench: --runtime {','.join(runtimes)} opens none of the chosen formats "
        f"{chosen}; {', or '.join(ways) or 'export the run first'}"
    )


def _check_runtimes_take(runtimes: list[str], paths: list[Path]) -> None:
    """UsageError before any timing when a chosen runtime refuses a file it would open (e.g.
    MediaPipe a .tflite without metadata)."""
    from toolkit.runtimes import RUNTIMES

    for path in paths:
        for runtime in runtimes:
            if _opens(runtime, path) and (why := RUNTIMES[runtime].refuses(path)):
                raise UsageError(why)


def layer_costs_of(run) -> list[LayerCost]:
    """MACs per image and parameters of each layer of the run's model (`layer_costs`), counted
    now rather than read from metrics.json, whose MACs are stale for runs trained before a
    counting fix."""
    from toolkit.models import build_model, layer_costs, preset_from_dict
    from toolkit.runmodel import load_run_model

    config = run.config
    try:
        preset = preset_from_dict(dict(config.preset_json))
        net = build_model(preset, config.image_shape, config.num_classes)
    except (KeyError, TypeError):  # a config.json without the architecture: load the model
        net = load_run_model(run)
    return layer_costs(net)


def _command(args: BenchOptions, runtimes, formats, batches, protocol: Protocol) -> str:
    """The exact `toolkit bench` command line that reproduces this plan."""
    argv = ["toolkit", "bench", str(args.run), "--runtime", ",".join(runtimes)]
    argv += ["--format", ",".join(formats), "--batch", ",".join(map(str, batches))]
    # --threads only as given: without it the web rows run at 1 and at the page's most
    argv += ["--threads", str(args.threads)] if args.threads is not None else []
    argv += ["--warmup", str(protocol.warmup)]
    argv += ["--runs", str(protocol.runs)] if protocol.runs is not None else []
    argv += ["--seconds", f"{protocol.seconds:g}"] if protocol.seconds is not None else []
    return shlex.join(argv + (["--data", args.data] if args.data else []))


def write_outputs(result: dict, folder: Path) -> list[Path]:
    """bench.json, bench.md and bench.png in the folder benched, each written atomically;
    bench.png only where matplotlib is installed (not on a device with the runtimes alone)."""
    from toolkit.bench.bench_tables import markdown
    from toolkit.bench.plot import plot
    from toolkit.common import atomic
    from toolkit.common.backend import installed

    json_path = write_bench(folder, result)
    md_path, png_path = (folder / name for name in BENCH_FILES[1:])
    atomic.write_text(md_path, markdown(result))
    if not installed("matplotlib"):
        png_path.unlink(missing_ok=True)  # an older plot would not show this table
        return [json_path, md_path]
    atomic.write_with(png_path, lambda tmp: plot(result, tmp))
    return [json_path, md_path, png_path]


def bench_run(folder: str | Path | BenchOptions, quiet: bool = True, **options) -> Benched:
    """Plan (every check before any timing), measure and write into the folder; `options` are
    BenchOptions' fields (runtime, format, batch, threads, runs, seconds, warmup, data). Unless
    quiet, prints the plan and the table."""
    from toolkit.bench.bench_tables import terminal_table

    args = folder if isinstance(folder, BenchOptions) else BenchOptions(Path(folder), **options)
    plan = make_plan(args)
    if not quiet:
        n = len(plan.rows())
        print(f"benchmarking {n} rows of {plan.run_dir} ({plan.command})", flush=True)
    result = run_suite(plan)  # one progress line per row on stderr; the table at the end
    if not quiet:  # shown before writing: a full disk then loses no measurement
        print(terminal_table(result))
    paths = write_outputs(result, plan.run_dir)
    return Benched(result, paths)


def _interleaved_files(args: BenchOptions, folder: BenchFolder) -> dict[str, tuple[Path, str]]:
    """Format -> (file, CPU runtime) of the files `--format` and `--runtime` pick that LiteRT or
    ONNX Runtime CPU opens; none is a UsageError."""

    runtimes = chosen_runtimes(args.runtime)
    files = folder.files()
    formats = choose_formats(args.format, folder, files)
    folder.check_unmodified(formats, args.allow_modified)
    chosen = {
        f: (files[f], runtime)
        for f in formats
        if (runtime := interleaved.cpu_runtime(files[f], runtimes)) is not None
    }
    for path, runtime in chosen.values():  # a corrupt file is refused before any timing
        _check_runtimes_take([runtime], [path])
    if not chosen:
        cpu = ",".join(interleaved.CPU_RUNTIMES)
        raise UsageError(
            f"nothing to time side by side: --interleaved times {cpu} files, and --runtime "
            f"{','.join(runtimes)} --format {','.join(formats)} picks none; choose "
            f"--runtime {cpu} and their formats ({', '.join(f for f in files if f in FORMATS)})"
        )
    return chosen


def bench_interleaved(folder: str | Path | BenchOptions, **options) -> Benched:
    """Check the options and the folder, time the CPU files side by side, write
    bench_interleaved.json and .md into the folder; the report and the files written."""
    from toolkit.bench.machine import describe
    from toolkit.common import atomic
    from toolkit.runtimes.worker import TIMED_CALL

    if isinstance(folder, BenchOptions):
        args = folder
    else:
        args = BenchOptions(Path(folder), **{"interleaved": True, **options})
    check_mode_options(args)
    if args.warmup < 0:
        raise UsageError(f"--warmup must be 0 or more, not {args.warmup}")
    _check_threads(args)
    batches = parse_batches(args.batch)
    if len(batches) > 1:
        raise UsageError(f"--interleaved times one batch size, not {args.batch}: pass --batch N")
    folder = open_folder(args.run)
    hint = f"copy the {folder.kind} to a writable place"
    for name in BENCH_INTERLEAVED_FILES:  # the results must not be lost after the work
        atomic.check_writable(folder.path / name, hint=hint)
    files = _interleaved_files(args, folder)
    threads = args.threads or os.cpu_count() or 1
    segments = args.segments or interleaved.DEFAULT_SEGMENTS
    calls = args.calls or interleaved.DEFAULT_CALLS
    argv = ["toolkit", "bench", str(args.run), "--interleaved"]
    argv += ["--runtime", ",".join(dict.fromkeys(r for _, r in files.values()))]
    argv += ["--format", ",".join(files), "--batch", str(batches[0]), "--threads", str(threads)]
    argv += ["--warmup", str(args.warmup), "--segments", str(segments), "--calls", str(calls)]
    report = {
        "folder": str(folder.path),
        "kind": folder.kind,
        "model": folder.model,
        "preset": folder.preset,
        "command": shlex.join(argv),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": describe(),
        "batch": batches[0],
        "threads": threads,
        "warmup": args.warmup,
        "segments": segments,
        "calls": calls,
        "order": interleaved.ORDER,
        "call": TIMED_CALL,
    }
    report |= interleaved.measure(files, threads, batches[0], args.warmup, segments, calls)
    json_path, md_path = (folder.path / name for name in BENCH_INTERLEAVED_FILES)
    atomic.write_json(json_path, report)
    atomic.write_text(md_path, interleaved.markdown(report))
    return Benched(report, [json_path, md_path])
