"""`toolkit bench FOLDER`: its arguments, mapped to the bench API (`benchmark.BenchOptions`,
`bench_run`, `bench_interleaved`), and what it prints."""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields

from toolkit.bench import interleaved
from toolkit.bench.benchmark import DEFAULT_SECONDS, BenchOptions, bench_interleaved, bench_run
from toolkit.bench.web import WEB_SECONDS
from toolkit.common import atomic
from toolkit.common.argtypes import finite_float, path_arg, positive_int
from toolkit.runfiles.folder import BENCH_FILES


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of `toolkit bench`: one per BenchOptions field."""
    p.add_argument(
        "run",
        type=path_arg,
        metavar="FOLDER",
        help="run folder, exported with `toolkit export`; or an export folder (model.json and "
        "its files) copied without the run: no Keras needed",
    )
    p.add_argument(
        "--runtime",
        help="comma list of runtimes (default: all but the browser's web-*, which `all` or their "
        "names add)",
    )
    p.add_argument(
        "--format",
        "--formats",
        dest="format",
        default="all",
        help="comma list of formats and/or keras (default all)",
    )
    p.add_argument("--batch", default="1", help="comma list of batch sizes (default 1)")
    p.add_argument(
        "--threads",
        type=int,
        help="ORT/LiteRT threads (default: the core count); the web-* rows' (default: a row at "
        "1 and one at the most the page may use)",
    )
    p.add_argument("--runs", type=int, help="stop after this many timed calls")
    p.add_argument(
        "--seconds",
        type=finite_float,
        help=f"time budget per row (default {DEFAULT_SECONDS:g}; the web-* rows {WEB_SECONDS:g})",
    )
    p.add_argument("--warmup", type=int, default=10, help="untimed calls first (default 10)")
    p.add_argument("--data", help="data spec for top-1 (default: the run's); test split used")
    p.add_argument(
        "--allow-modified",
        action="store_true",
        help="time files changed after export (their sha256 is not model.json's) as they are, "
        "with a warning; without it they are refused",
    )
    p.add_argument(
        "--interleaved",
        action="store_true",
        help="time the litert and ort-cpu files side by side in one process, in round-robin "
        "segments: ratios free of drift between rows (bench_interleaved.json, .md)",
    )
    p.add_argument(
        "--segments",
        type=positive_int,
        help=f"--interleaved: round-robin segments (default {interleaved.DEFAULT_SEGMENTS})",
    )
    p.add_argument(
        "--calls",
        type=positive_int,
        help=f"--interleaved: calls of each file per segment (default {interleaved.DEFAULT_CALLS})",
    )


def options_from(args: argparse.Namespace) -> BenchOptions:
    """The parsed arguments as BenchOptions (a field no flag sets, e.g. the API's no_roofline,
    keeps its default)."""
    given = {f.name: getattr(args, f.name) for f in fields(BenchOptions) if hasattr(args, f.name)}
    return BenchOptions(**given)


def run(args: argparse.Namespace) -> int:
    """Bench (or time side by side), print the table and the files written."""
    options = options_from(args)
    try:
        if options.interleaved:
            benched = bench_interleaved(options)
            print(interleaved.markdown(benched.result), end="")
        else:
            benched = bench_run(options, quiet=False)
    except OSError as exc:  # a full disk: one line; each file written whole or left as it was
        fault = atomic.full_disk_error(exc)
        if fault is None:
            raise
        raise fault from None
    for path in benched.files:
        print(f"   {path.name:10s} -> {path}")
    if not options.interleaved and len(benched.files) < len(BENCH_FILES):
        print(f"   {BENCH_FILES[2]:10s} -- not drawn: matplotlib is not installed", file=sys.stderr)
    return 0
