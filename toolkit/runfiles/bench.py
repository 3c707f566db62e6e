"""bench.json: the latency (and top-1) rows `toolkit bench` writes into the folder it benched."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from toolkit.runfiles import jsonfile
from toolkit.runfiles.jsonfile import integer, number, numbers, section, text

BENCH_FILE = "bench.json"


@dataclass(frozen=True)
class BenchRow:
    """One (file, runtime, batch) row; `raw` is the row as written."""

    format: str | None
    runtime: str | None
    batch: int | None
    status: str | None
    file: str | None = None
    p50_ms: float | None = None
    top1: float | None = None
    size_bytes: int | None = None
    sha256: str | None = None  # None: rows of benches older than the hash
    reason: str | None = None
    threads: int | None = None  # the threads it ran on (a web row's: what the page used)
    backend: str | None = None  # the web rows': wasm or webgpu; None for the native runtimes
    round_p50_ms: tuple[float, ...] = ()  # the p50 of each consecutive slice of its timed calls
    peak_rss_mb: float | None = None  # the timing process's peak resident memory
    raw: Mapping[str, object] = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping) -> BenchRow:
        """The row in `data` (tolerant of keys older benches lacked)."""
        return cls(
            format=text(data.get("format")),
            runtime=text(data.get("runtime")),
            batch=integer(data.get("batch")),
            status=text(data.get("status")),
            file=text(data.get("file")),
            p50_ms=number(data.get("p50_ms")),
            top1=number(data.get("top1")),
            size_bytes=integer(data.get("size_bytes")),
            sha256=text(data.get("sha256")) or None,
            reason=text(data.get("reason")),
            threads=integer(data.get("threads")),
            backend=text(data.get("backend")),
            round_p50_ms=numbers(data.get("round_p50_ms")),
            peak_rss_mb=number(data.get("peak_rss_mb")),
            raw=dict(data),
        )

    @property
    def ok(self) -> bool:
        """Whether the row ran."""
        return self.status == "ok"


@dataclass(frozen=True)
class BenchReport:
    """bench.json: what was benched, how, on what machine, and the rows."""

    rows: tuple[BenchRow, ...]
    run: str | None = None
    kind: str | None = None  # "run folder" or "export folder"
    model: str | None = None
    preset: str | None = None
    command: str | None = None
    date: str | None = None
    machine: Mapping[str, object] = field(default_factory=dict)  # cpu, cores, versions...
    protocol: Mapping[str, object] = field(default_factory=dict)  # warmup, threads, batches...
    data: Mapping[str, object] = field(default_factory=dict)
    roofline: Mapping[str, object] = field(default_factory=dict)
    raw: Mapping[str, object] = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping) -> BenchReport:
        """The report in `data` (tolerant of keys older benches lacked)."""
        rows = data.get("rows") if isinstance(data.get("rows"), list) else []
        return cls(
            rows=tuple(BenchRow.from_json(r) for r in rows if isinstance(r, dict)),
            run=text(data.get("run")),
            kind=text(data.get("kind")),
            model=text(data.get("model")),
            preset=text(data.get("preset")),
            command=text(data.get("command")),
            date=text(data.get("date")),
            machine=section(data, "machine"),
            protocol=section(data, "protocol"),
            data=section(data, "data"),
            roofline=section(data, "roofline"),
            raw=dict(data),
        )

    def to_json(self) -> dict:
        """The object bench.json holds."""
        return dict(self.raw)

    def row(self, fmt: str, runtime: str, batch: int = 1) -> BenchRow | None:
        """The row of `fmt` on `runtime` at `batch`, or None."""
        for row in self.rows:
            if (row.format, row.runtime, row.batch) == (fmt, runtime, batch):
                return row
        return None

    @property
    def threads(self) -> int | None:
        """The threads each runtime was given."""
        return integer(self.protocol.get("threads"))

    @property
    def versions(self) -> Mapping[str, object]:
        """The package versions of the machine the rows were timed on."""
        return section(self.machine, "versions")


def bench_path(folder: Path) -> Path:
    """Where `toolkit bench` writes a folder's bench.json."""
    return Path(folder) / BENCH_FILE


def read_bench(folder: Path) -> BenchReport:
    """FOLDER/bench.json; missing or unreadable is a UsageError saying to run `toolkit bench`."""
    return BenchReport.from_json(jsonfile.load(bench_path(folder), f"run `toolkit bench {folder}`"))


def find_bench(folder: Path) -> BenchReport | None:
    """FOLDER/bench.json, or None when there is none; unreadable is a UsageError."""
    data = jsonfile.find(bench_path(folder), f"run `toolkit bench {folder}` again")
    return None if data is None else BenchReport.from_json(data)


def write_bench(folder: Path, result: Mapping | BenchReport) -> Path:
    """Write bench.json (bench's result object, or a BenchReport) atomically; its path."""
    data = result.to_json() if isinstance(result, BenchReport) else dict(result)
    path = bench_path(folder)
    jsonfile.write(path, data)
    return path
