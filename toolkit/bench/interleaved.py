"""`toolkit bench --interleaved`: speed ratios of the CPU files of a run or export folder, timed
side by side in one process.

`toolkit bench` times each row in a fresh process, one after the other, so that each row has its
own peak memory. On a shared VM whose speed moves over seconds, a ratio between two rows timed a
minute apart carries that drift. Here every chosen LiteRT and ONNX Runtime CPU file is opened
once in this process and timed in round-robin segments (`calls` calls of each file per segment,
every other segment in reverse order, so that no file always runs right after the same one). A
call is what `toolkit bench` times (`TIMED_CALL`). A file's figure is the median of its segment
p50s; a ratio is the median over segments of the two files' p50 ratio within the same segment:
each file against the fp32 file of its runtime (`tflite` on LiteRT, `onnx` on ONNX Runtime CPU),
and ONNX Runtime fp32 against LiteRT fp32. `python -m studies.interleaved --before RUN0` builds
a before/after table on these pieces.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from toolkit.bench.machine import cpu_text
from toolkit.common.errors import first_line
from toolkit.common.progress import progress
from toolkit.formats import FORMATS
from toolkit.runtimes import RUNTIMES, RuntimeUnavailable, open_artifact
from toolkit.runtimes.base import RuntimeOptions
from toolkit.runtimes.timing import Protocol, time_calls
from toolkit.runtimes.worker import input_batch

CPU_RUNTIMES = ("litert", "ort-cpu")  # the runtimes whose files are timed together
# runtime -> its reference fp32 format: the first fp32 row of the registry it runs (onnx, not
# onnx-mobile's fixed-batch .ort)
FP32 = {
    runtime: next(n for n, f in FORMATS.items() if f.runtime == runtime and f.precision == "fp32")
    for runtime in CPU_RUNTIMES
}
LITERT_FP32, ORT_FP32 = FP32["litert"], FP32["ort-cpu"]
DEFAULT_SEGMENTS = 20
DEFAULT_CALLS = 100  # calls of each file per segment
ORDER = (
    "every chosen file opened once in one process, then round-robin segments of the same "
    "number of calls of each file, every other segment in reverse order"
)


@dataclass
class Row:
    """One file: its p50 per segment and the median and ratio drawn from them; a file that
    could not be opened has its status and reason and no figures."""

    format: str
    runtime: str
    file: str
    status: str = "ok"
    reason: str | None = None
    segment_p50_ms: list[float] = field(default_factory=list)
    p50_ms: float | None = None  # median of segment_p50_ms
    vs_fp32: float | None = None  # median over segments of (its runtime's fp32 p50 / this p50)


def cpu_runtime(path: Path, runtimes: list[str]) -> str | None:
    """The first of `runtimes` in CPU_RUNTIMES that opens `path`, or None."""
    fits = [r for r in runtimes if r in CPU_RUNTIMES]
    return next((r for r in fits if path.suffix.lower() in RUNTIMES[r].suffixes), None)


def time_segment(call: Callable[[], object], calls: int) -> float:
    """p50 in ms of `calls` consecutive timed calls."""
    return float(np.median(time_calls(call, Protocol(warmup=0, runs=calls, seconds=None)))) / 1e6


def median_ratio(numerator: list[float], denominator: list[float]) -> float:
    """Median over segments of numerator[i] / denominator[i]."""
    return statistics.median(a / b for a, b in zip(numerator, denominator, strict=True))


def open_call(
    path: Path, runtime: str, threads: int | None, batch: int, warmup: int
) -> Callable[[], object]:
    """A warmed-up call of `path` in `runtime` on a seeded batch, bound as `toolkit bench` times
    it; a file that cannot be opened raises UsageError (RuntimeUnavailable where the runtime
    cannot run here)."""
    session = open_artifact(path, runtime, RuntimeOptions(threads=threads))
    call = session.bind(input_batch(session.input.shape, batch)).run
    for _ in range(warmup):
        call()
    return call


def time_round_robin(
    calls: list[Callable[[], object]], segments: int, per_segment: int
) -> list[list[float]]:
    """Each call's p50 in ms in each of `segments` round-robin segments of `per_segment` calls,
    every other segment in reverse order: a file timed right after another one runs a few
    percent faster than it would first (two identical files differ by ~5% otherwise)."""
    series: list[list[float]] = [[] for _ in calls]
    order = list(zip(series, calls, strict=True))
    for segment in range(segments):
        progress("segment", segment + 1, segments, f"{per_segment} calls of each file")
        for timings, call in order if segment % 2 == 0 else order[::-1]:
            timings.append(time_segment(call, per_segment))
    return series


def fp32_ratios(rows: list[Row]) -> float | None:
    """Set each timed row's vs_fp32 against its runtime's fp32 row (when timed); returns ONNX
    Runtime fp32 over LiteRT fp32 (None unless both were timed)."""
    timed = {r.format: r for r in rows if r.segment_p50_ms}
    for row in timed.values():
        fp32 = timed.get(FP32[row.runtime])
        if fp32 is not None:
            row.vs_fp32 = median_ratio(fp32.segment_p50_ms, row.segment_p50_ms)
    if LITERT_FP32 in timed and ORT_FP32 in timed:
        return median_ratio(timed[ORT_FP32].segment_p50_ms, timed[LITERT_FP32].segment_p50_ms)
    return None


def open_rows(
    files: dict[str, tuple[Path, str]], threads: int | None, batch: int, warmup: int
) -> tuple[list[Row], dict[str, Callable[[], object]]]:
    """A row per file (format -> (path, runtime)), and a warmed-up call per file that opened;
    one that did not is a failed (or unavailable) row with its reason, not a crash."""
    rows, calls = [], {}
    for i, (fmt, (path, runtime)) in enumerate(files.items(), 1):
        progress("open", i, len(files), f"{fmt} on {runtime}, {warmup} warmup calls")
        row = Row(fmt, runtime, path.name)
        try:
            calls[fmt] = open_call(path, runtime, threads, batch, warmup)
        except RuntimeUnavailable as exc:
            row.status, row.reason = "unavailable", exc.reason
        except Exception as exc:  # noqa: BLE001  (exported but unusable: say why, keep the table)
            row.status, row.reason = "failed", first_line(exc)
        rows.append(row)
    return rows, calls


def measure(
    files: dict[str, tuple[Path, str]],
    threads: int | None,
    batch: int,
    warmup: int,
    segments: int,
    calls: int,
) -> dict:
    """Open and warm up every file, time them round-robin; the rows and the ORT/LiteRT ratio."""
    rows, opened = open_rows(files, threads, batch, warmup)
    series = time_round_robin(list(opened.values()), segments, calls)
    by_format = {r.format: r for r in rows}
    for fmt, timings in zip(opened, series, strict=True):
        by_format[fmt].segment_p50_ms = timings
        by_format[fmt].p50_ms = statistics.median(timings)
    ort_over_litert = fp32_ratios(rows)
    return {
        "rows": [asdict(r) for r in rows],
        "ort_fp32_over_litert_fp32": ort_over_litert,
    }


def markdown(report: dict) -> str:
    """bench_interleaved.md: what ran where and how, the table, and the ORT/LiteRT ratio."""
    m = report["machine"]
    lines = [
        f"# toolkit bench --interleaved: {report['model']} {report['preset']} "
        f"({report['kind']} {report['folder']})",
        "",
        f"- command: `{report['command']}`",
        f"- date: {report['date']} (start)",
        f"- machine: {cpu_text(m)}, {m['cores']} cores, load average {m['load_average']} "
        "at start" + (f", GPU {m['gpu']}" if m["gpu"] else ""),
        "- versions: " + ", ".join(f"{k} {v}" for k, v in m["versions"].items()),
        f"- protocol: batch {report['batch']}, {report['threads']} threads, "
        f"{report['warmup']} warmup calls per file, then {report['segments']} segments of "
        f"{report['calls']} calls of each file; {report['order']}; {report['call']}",
        "- p50: the median of the file's segment p50s; x fp32: the median over segments of "
        "(its runtime's fp32 file's p50 / the file's p50), both timed in the same segment",
        "",
        "| format | runtime | file | status | p50 ms | x its runtime's fp32 |",
        "|---|---|---|---|---:|---:|",
    ]
    for r in report["rows"]:
        p50 = "-" if r["p50_ms"] is None else f"{r['p50_ms']:.3f}"
        ratio = "-" if r["vs_fp32"] is None else f"{r['vs_fp32']:.2f}x"
        lines.append(
            f"| `{r['format']}` | {r['runtime']} | {r['file']} | {r['status']} | {p50} | {ratio} |"
        )
    if report["ort_fp32_over_litert_fp32"] is not None:
        lines += [
            "",
            f"ONNX Runtime fp32 / LiteRT fp32 p50: {report['ort_fp32_over_litert_fp32']:.2f}x",
        ]
    why = [f"{r['format']}: {r['status']}: {r['reason']}" for r in report["rows"] if r["reason"]]
    if why:
        lines += ["", "Files not timed:", "", *(f"- {w}" for w in why)]
    return "\n".join(lines) + "\n"
