"""Speed ratios of a run's exported files, timed interleaved in one process.

    python -m studies.interleaved RUN [--before RUN0] [--formats F,...] [--threads N]
        [--segments N] [--calls N] [--warmup N] [--json FILE]

`toolkit bench` times each file in a fresh process, one after the other, so that each row has
its own peak memory. On a shared VM whose speed moves over seconds, a ratio between two rows
timed a minute apart carries that drift. Here every CPU file of RUN/export/model.json is opened
once in this process, in its format's runtime, and timed in round-robin segments (`--calls`
batch-1 calls of each file per segment, every other segment in reverse order, so that no file
always runs right after the same one). A call is what `toolkit bench` times (`TIMED_CALL`). A
file's figure is the median of its segment p50s; a ratio is the median over segments of the
two files' p50 ratio within the same segment. Ratios: each file against the fp32 file of its
runtime (`tflite` on LiteRT, `onnx` on ONNX Runtime CPU), and ONNX Runtime fp32 against LiteRT
fp32. With `--before RUN0` (the same model exported by an earlier toolkit, or another recipe),
RUN0's files of the same formats join the round robin and each row also gives RUN0's p50 and
RUN0 / RUN per segment: a before/after table.
"""

from __future__ import annotations

import os
import shlex
import statistics
import sys
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from bench.machine import describe
from studies.provenance import header_lines, publish
from toolkit.argtypes import OneLineParser, positive_int
from toolkit.atomic import check_writable
from toolkit.errors import UsageError
from toolkit.formats import FORMATS, parse_formats
from toolkit.progress import progress
from toolkit.runfolder import open_run
from toolkit.runtimes import open_artifact
from toolkit.runtimes.base import RuntimeOptions
from toolkit.runtimes.timing import Protocol, time_calls
from toolkit.runtimes.worker import TIMED_CALL, input_batch

CPU_RUNTIMES = ("litert", "ort-cpu")  # the runtimes whose files this study times together
FP32 = {f.runtime: name for name, f in FORMATS.items() if f.precision == "fp32"}
LITERT_FP32, ORT_FP32 = FP32["litert"], FP32["ort-cpu"]


@dataclass
class Row:
    """One file: its p50 per segment and the medians and ratios drawn from them."""

    format: str
    runtime: str
    segment_p50_ms: list[float]
    p50_ms: float = 0.0  # median of segment_p50_ms
    vs_fp32: float | None = None  # median over segments of (its runtime's fp32 p50 / this p50)
    before_segment_p50_ms: list[float] | None = None  # --before: RUN0's file, same segments
    before_p50_ms: float | None = None
    vs_before: float | None = None  # median over segments of (RUN0's p50 / this p50)


def time_segment(call, calls: int) -> float:
    """p50 in ms of `calls` consecutive timed calls."""
    return float(np.median(time_calls(call, Protocol(warmup=0, runs=calls, seconds=None)))) / 1e6


def median_ratio(numerator: list[float], denominator: list[float]) -> float:
    """Median over segments of numerator[i] / denominator[i]."""
    return statistics.median(a / b for a, b in zip(numerator, denominator, strict=True))


def _calls(run_dir: Path, formats: list[str], threads: int, warmup: int) -> dict:
    """A warmed-up batch-1 call per chosen CPU file of the run, by format."""
    run = open_run(run_dir)
    artifacts = run.manifest()["artifacts"]
    chosen = [f for f in formats if f in artifacts and FORMATS[f].runtime in CPU_RUNTIMES]
    if not chosen:
        raise UsageError(
            f"{run_dir} has none of {', '.join(formats)} exported for {', '.join(CPU_RUNTIMES)}: "
            f"run `toolkit export {run_dir} --format all` first"
        )
    calls = {}
    for name in chosen:
        path = run.export_dir / artifacts[name]["file"]
        session = open_artifact(path, FORMATS[name].runtime, RuntimeOptions(threads=threads))
        calls[name] = session.bind(input_batch(session.input.shape, 1)).run  # as bench times
        for _ in range(warmup):
            calls[name]()
    return calls


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
    rows and ratios."""
    after_calls = _calls(run_dir, formats, threads, warmup)
    before_calls = {} if before is None else _calls(before, list(after_calls), threads, warmup)
    rows = {n: Row(n, FORMATS[n].runtime, []) for n in after_calls}
    for name in before_calls:
        rows[name].before_segment_p50_ms = []
    # (series, call) in round-robin order, each RUN0 file right after its RUN file
    order = []
    for name, call in after_calls.items():
        order.append((rows[name].segment_p50_ms, call))
        if name in before_calls:
            order.append((rows[name].before_segment_p50_ms, before_calls[name]))
    for segment in range(segments):
        progress("segment", segment + 1, segments, f"{calls} calls of each file")
        # every other segment in reverse: a file timed right after another one runs a few
        # percent faster than it would first (two identical files differ by ~5% otherwise)
        for series, call in order if segment % 2 == 0 else order[::-1]:
            series.append(time_segment(call, calls))
    for row in rows.values():
        row.p50_ms = statistics.median(row.segment_p50_ms)
        fp32 = rows.get(FP32[row.runtime])
        if fp32 is not None:
            row.vs_fp32 = median_ratio(fp32.segment_p50_ms, row.segment_p50_ms)
        if row.before_segment_p50_ms:
            row.before_p50_ms = statistics.median(row.before_segment_p50_ms)
            row.vs_before = median_ratio(row.before_segment_p50_ms, row.segment_p50_ms)
    ort_vs_litert = None
    if LITERT_FP32 in rows and ORT_FP32 in rows:
        ort_vs_litert = median_ratio(
            rows[ORT_FP32].segment_p50_ms, rows[LITERT_FP32].segment_p50_ms
        )
    return {
        "before": None if before is None else str(before),
        "rows": [asdict(r) for r in rows.values()],
        "ort_fp32_over_litert_fp32": ort_vs_litert,
    }


def markdown(report: dict) -> str:
    """The report as a Markdown table with its command, date and machine."""
    lines = [
        *header_lines(report),
        f"- protocol: batch 1, {report['threads']} threads, {report['warmup']} warmup calls per "
        f"file, then {report['segments']} round-robin segments of {report['calls']} calls of "
        "each file in one process, every other segment in reverse order; " + report["call"],
    ]
    before = report.get("before")
    head = "| format | runtime | p50 ms (median of segments) | x its runtime's fp32 |"
    rule = "|---|---|---:|---:|"
    if before:
        lines.insert(1, f"- before: `{before}`, its files timed in the same segments")
        head += " before p50 ms | before / now |"
        rule += "---:|---:|"
    lines += ["", head, rule]
    for r in report["rows"]:
        ratio = "-" if r["vs_fp32"] is None else f"{r['vs_fp32']:.2f}x"
        line = f"| `{r['format']}` | {r['runtime']} | {r['p50_ms']:.3f} | {ratio} |"
        if before:
            line += (
                " - | - |"
                if r.get("vs_before") is None
                else f" {r['before_p50_ms']:.3f} | {r['vs_before']:.2f}x |"
            )
        lines.append(line)
    if report["ort_fp32_over_litert_fp32"] is not None:
        lines += [
            "",
            f"ONNX Runtime fp32 / LiteRT fp32 p50: {report['ort_fp32_over_litert_fp32']:.2f}x",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(
        prog="python -m studies.interleaved", description=__doc__.splitlines()[0]
    )
    parser.add_argument("run", type=Path, help="a run folder with RUN/export/model.json")
    parser.add_argument(
        "--before", type=Path, help="another export of the model, timed alongside: before/after"
    )
    parser.add_argument("--formats", default="all", help="formats to time (default: all)")
    parser.add_argument("--threads", type=positive_int, default=os.cpu_count() or 1)
    parser.add_argument("--segments", type=positive_int, default=20)
    parser.add_argument(
        "--calls", type=positive_int, default=100, help="calls per file per segment"
    )
    parser.add_argument("--warmup", type=positive_int, default=20, help="untimed calls per file")
    parser.add_argument("--json", type=Path, help="also write the report here")
    try:
        args = parser.parse_args(argv)
        if args.json is not None:
            check_writable(args.json, "--json")
        formats = parse_formats(args.formats)
        machine = describe()
        started = datetime.now(UTC).isoformat(timespec="seconds")
        measured = measure(
            args.run, formats, args.threads, args.segments, args.calls, args.warmup, args.before
        )
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report = {
        "command": "python -m studies.interleaved " + shlex.join(argv or sys.argv[1:]),
        "date": started,
        "machine": machine,
        "threads": args.threads,
        "segments": args.segments,
        "calls": args.calls,
        "warmup": args.warmup,
        "call": TIMED_CALL,
        **measured,
    }
    return publish(report, markdown(report), args.json)


if __name__ == "__main__":
    sys.exit(main())
