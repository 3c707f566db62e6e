"""Before/after speed ratios: a run's CPU files and another export's, timed side by side.

    python -m studies.interleaved RUN [--before RUN0] [--format F,...] [--threads N]
        [--segments N] [--calls N] [--warmup N] [--json FILE]

The measuring is `toolkit bench RUN --interleaved` (bench/interleaved.py: every CPU file opened
once in one process and timed in round-robin segments; ratios are medians of per-segment
ratios). This lab wrapper prints the report instead of writing it into RUN, and adds
`--before RUN0` (the same model exported by an earlier toolkit, or another recipe): RUN0's files
of the same formats join the round robin, each right after RUN's, and each row also gives RUN0's
p50 and RUN0 / RUN per segment, a before/after table. `--json` writes the whole report (what
records/interleaved.jsonl rows are made from).
"""

from __future__ import annotations

import os
import shlex
import statistics
import sys
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from studies.provenance import publish
from toolkit.bench import interleaved
from toolkit.bench.machine import describe
from toolkit.common.argtypes import OneLineParser, positive_int
from toolkit.common.atomic import check_writable
from toolkit.common.errors import UsageError
from toolkit.formats import FORMATS, parse_formats
from toolkit.runfiles.folder import open_run
from toolkit.runtimes.worker import TIMED_CALL

BATCH = 1


def _files(run_dir: Path, formats: list[str]) -> dict[str, tuple[Path, str]]:
    """Format -> (file, runtime) of the chosen formats RUN exported for a CPU runtime."""
    run = open_run(run_dir)
    artifacts = run.manifest().artifacts
    chosen = {
        f: (run.export_dir / artifacts[f].file, FORMATS[f].runtime)
        for f in formats
        if f in artifacts and FORMATS[f].runtime in interleaved.CPU_RUNTIMES
    }
    if not chosen:
        raise UsageError(
            f"{run_dir} has none of {', '.join(formats)} exported for "
            f"{', '.join(interleaved.CPU_RUNTIMES)}: run `toolkit export {run_dir} --format all` "
            "first"
        )
    return chosen


def measure(
    run_dir: Path,
    formats: list[str],
    threads: int,
    segments: int,
    calls: int,
    warmup: int,
    before: Path | None = None,
) -> dict:
    """Open every chosen file (and RUN0's, `before`), warm each up, time them round-robin; the
    rows (with RUN0's figures) and the ORT/LiteRT ratio."""
    files = _files(run_dir, formats)
    before_files = {} if before is None else _files(before, list(files))
    rows, after_calls = interleaved.open_rows(files, threads, BATCH, warmup)
    _, before_calls = interleaved.open_rows(before_files, threads, BATCH, warmup)
    order = []  # (format, is RUN0's, call), each RUN0 file right after its RUN file
    for name, call in after_calls.items():
        order.append((name, False, call))
        if name in before_calls:
            order.append((name, True, before_calls[name]))
    series = interleaved.time_round_robin([call for *_, call in order], segments, calls)
    by_format = {r.format: r for r in rows}
    before_series = {}
    for (name, is_before, _), timings in zip(order, series, strict=True):
        if is_before:
            before_series[name] = timings
        else:
            by_format[name].segment_p50_ms = timings
            by_format[name].p50_ms = statistics.median(timings)
    ort_over_litert = interleaved.fp32_ratios(rows)
    report_rows = []
    for row in rows:
        entry = asdict(row)
        timings = before_series.get(row.format)
        if timings is not None:
            entry["before_segment_p50_ms"] = timings
            entry["before_p50_ms"] = statistics.median(timings)
            entry["vs_before"] = interleaved.median_ratio(timings, row.segment_p50_ms)
        report_rows.append(entry)
    return {
        "before": None if before is None else str(before),
        "rows": report_rows,
        "ort_fp32_over_litert_fp32": ort_over_litert,
    }


def markdown(report: dict) -> str:
    """`toolkit bench --interleaved`'s table, then RUN0's figures when --before was given."""
    text = interleaved.markdown(report)
    if not report.get("before"):
        return text
    lines = [
        "",
        f"Before: `{report['before']}`, its files timed in the same segments, each right after "
        "the same format's file above:",
        "",
        "| format | before p50 ms | before / now |",
        "|---|---:|---:|",
    ]
    for r in report["rows"]:
        if r.get("vs_before") is not None:
            lines.append(f"| `{r['format']}` | {r['before_p50_ms']:.3f} | {r['vs_before']:.2f}x |")
    return text + "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(
        prog="python -m studies.interleaved", description=__doc__.splitlines()[0]
    )
    parser.add_argument("run", type=Path, help="a run folder with RUN/export/model.json")
    parser.add_argument(
        "--before", type=Path, help="another export of the model, timed alongside: before/after"
    )
    parser.add_argument(
        "--format", "--formats", dest="format", default="all", help="formats (default: all)"
    )
    parser.add_argument("--threads", type=positive_int, default=os.cpu_count() or 1)
    parser.add_argument("--segments", type=positive_int, default=interleaved.DEFAULT_SEGMENTS)
    parser.add_argument(
        "--calls",
        type=positive_int,
        default=interleaved.DEFAULT_CALLS,
        help="calls per file per segment",
    )
    parser.add_argument("--warmup", type=positive_int, default=20, help="untimed calls per file")
    parser.add_argument("--json", type=Path, help="also write the report here")
    try:
        args = parser.parse_args(argv)
        if args.json is not None:
            check_writable(args.json, "--json")
        formats = parse_formats(args.format)
        run = open_run(args.run)
        machine = describe()
        started = datetime.now(UTC).isoformat(timespec="seconds")
        measured = measure(
            args.run, formats, args.threads, args.segments, args.calls, args.warmup, args.before
        )
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report = {
        "folder": str(args.run),
        "kind": "run folder",
        "model": run.config.model,
        "preset": run.config.preset,
        "command": "python -m studies.interleaved " + shlex.join(argv or sys.argv[1:]),
        "date": started,
        "machine": machine,
        "batch": BATCH,
        "threads": args.threads,
        "warmup": args.warmup,
        "segments": args.segments,
        "calls": args.calls,
        "order": interleaved.ORDER,
        "call": TIMED_CALL,
        **measured,
    }
    return publish(report, markdown(report), args.json)


if __name__ == "__main__":
    sys.exit(main())
