"""A run's benchmark: one worker subprocess per (artifact, runtime, batch), then accuracy,
size, MACs, achieved GMAC/s and the roofline attached to each row.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property, partial
from pathlib import Path

import numpy as np

from toolkit.bench import roofline, web
from toolkit.bench.machine import describe
from toolkit.common.progress import progress
from toolkit.formats import FORMATS
from toolkit.runfiles.folder import BENCH_TOP1_FILE
from toolkit.runfiles.hashes import sha256
from toolkit.runtimes import RUNTIMES
from toolkit.runtimes.base import Session
from toolkit.runtimes.timing import Protocol
from toolkit.runtimes.web.session import one_browser
from toolkit.runtimes.worker import TIMED_CALL, run_worker

KERAS_FORMAT = roofline.KERAS_FORMAT
ROOFLINE_PROTOCOL = Protocol(warmup=3, runs=30, seconds=2.0)
PEAK_ROUNDS = 2  # each peak kernel is timed this many times, a round over all kernels apart


@dataclass(frozen=True)
class Artifact:
    """One model file of the run: its format name, path and size."""

    format: str
    path: Path
    size_bytes: int


@dataclass(frozen=True)
class Plan:
    """What to measure: artifacts x runtimes (those that open them) x batch sizes."""

    run_dir: Path  # the folder benched (a run folder or an export folder): results go here
    artifacts: list[Artifact]
    runtimes: list[str]
    batches: list[int]
    protocol: Protocol
    threads: int | None
    macs_per_image: int | None
    layers: tuple = ()  # the model's LayerCost per layer: the per-layer roofline's input
    data_spec: str | None = None
    command: str = ""
    # (images, labels) of --data's test split, loaded once when the plan checked its classes
    test_split: tuple | None = field(default=None, repr=False, compare=False)
    model: str | None = None
    preset: str | None = None
    kind: str = "run folder"  # or "export folder": model.json's files without their run
    no_top1: str | None = None  # why no top-1 is computed (an export folder has no data)
    no_macs: str | None = None  # why MACs, GMAC/s and the roofline are not available
    web_threads: int | None = None  # --threads as given: the web rows' (else 1 and the most)
    web_protocol: Protocol | None = None  # the web rows' protocol, when not `protocol`

    def cells(self) -> list[tuple[Artifact, str, int]]:
        """Every (artifact, runtime, batch) row in table order; a file whose format fixes its
        batch (onnx-mobile's batch 1) only at that batch."""
        return [
            (a, r, b)
            for a in self.artifacts
            for r in self.runtimes
            if a.path.suffix.lower() in RUNTIMES[r].suffixes
            for b in self.batches
            if fixed_batch(a.format) in (None, b)
        ]

    def rows(self) -> list[Cell]:
        """Every timed row in table order: a cell per thread request of its runtime (`threads`
        for the native ones; the web ones' at one thread and the page's most, bench/web.py)."""
        return [Cell(a, r, b, t) for a, r, b in self.cells() for t in self.thread_requests(r)]

    def thread_requests(self, runtime: str) -> tuple[int | None, ...]:
        """The thread counts `runtime`'s rows ask for, a row each."""
        if web.is_web(runtime):
            return web.thread_requests(runtime, self.web_threads)
        return (self.threads,)

    def protocol_of(self, runtime: str) -> Protocol:
        """How long `runtime`'s rows are timed (the web rows' own default budget)."""
        return (self.web_protocol or self.protocol) if web.is_web(runtime) else self.protocol


@dataclass(frozen=True)
class Cell:
    """One timed row: an artifact in a runtime at a batch size, asking for `threads`."""

    artifact: Artifact
    runtime: str
    batch: int
    threads: int | None


def fixed_batch(fmt: str) -> int | None:
    """The one batch size format `fmt`'s file takes (its FORMATS row), or None: any."""
    row = FORMATS.get(fmt)
    return row.batch if row is not None else None


def row_base(plan: Plan, artifact: Artifact, runtime: str, batch: int) -> dict:
    """The fields every row of `artifact` on `runtime` at `batch` opens with."""
    return {
        "format": artifact.format,
        "file": artifact.path.name,
        "runtime": runtime,
        "batch": batch,
        "size_bytes": artifact.size_bytes,
        "sha256": sha256(artifact.path) if artifact.path.is_file() else None,  # what was timed
        "macs_per_image": plan.macs_per_image,
    }


def measure_row(plan: Plan, cell: Cell, then: Callable[[Session], None] | None = None) -> dict:
    """One row; a runtime that cannot run here is `unavailable` without starting a worker.
    `then` gets a web row's session once timed (Top1s.in_page)."""
    artifact, runtime, batch = cell.artifact, cell.runtime, cell.batch
    base = row_base(plan, artifact, runtime, batch)
    if web.is_web(runtime):  # what the row asked for; the page's answer replaces it
        base.update(threads=cell.threads, backend="wasm")
    reason = RUNTIMES[runtime].unavailable()
    if reason is not None:
        return {**base, "status": "unavailable", "reason": reason}
    if web.is_web(runtime):  # in this process, a page of the bench's one browser (one_browser)
        timed = web.measure_in_page(artifact.path, runtime, batch, plan.protocol_of(runtime),
                                    cell.threads, then)  # fmt: skip
    else:
        timed = run_worker(artifact.path, runtime, batch, plan.protocol_of(runtime), cell.threads)
    row = {**base, **timed, **(web.web_fields(timed) if web.is_web(runtime) else {})}
    row.pop("artifact", None)
    if row["status"] == "ok" and plan.macs_per_image:
        row["gmacs"] = plan.macs_per_image * batch / (row["p50_ms"] * 1e6)
    return row


def webgpu_rows(plan: Plan) -> list[dict]:
    """A WebGPU row per web runtime of the plan (its first file and batch), not timed: why not,
    checked once per bench (toolkit/bench/web.py)."""
    first: dict[str, tuple[Artifact, int]] = {}
    for artifact, runtime, batch in plan.cells():
        if web.is_web(runtime):
            first.setdefault(runtime, (artifact, batch))
    reasons = web.webgpu_reasons(list(first)) if first else {}
    return [
        {**row_base(plan, artifact, runtime, batch), "threads": None, "backend": "webgpu",
         "status": "unavailable", "reason": reasons[runtime]}
        for runtime, (artifact, batch) in first.items()
    ]  # fmt: skip


def split_hash(images: np.ndarray, labels: np.ndarray) -> str:
    """A short sha256 of a split's images and labels: what a cached top-1 was scored on."""
    digest = hashlib.sha256(np.ascontiguousarray(images, np.float32).tobytes())
    digest.update(np.ascontiguousarray(labels, np.int64).tobytes())
    return digest.hexdigest()[:16]


def top1_key(spec: str | None, data_hash: str, file_sha256: str) -> str:
    """bench_top1.json's key of a file's top-1 on data `spec` (None: the run's) of that hash."""
    return f"{spec or 'run data'}:{data_hash}:{file_sha256}"


class Top1s:
    """bench_top1.json: each file's top-1 by data spec, sha256 and source (web.top1_source),
    filled in as the bench computes them; the test split, loaded when a top-1 is missing."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.path = plan.run_dir / BENCH_TOP1_FILE
        try:
            self.cache = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.cache = {}
        self.split = plan.test_split  # None: the run's own data, loaded when a top-1 is missing

    def key(self, artifact: Artifact, source: str) -> str:
        """The cache key of `artifact`'s top-1 from `source` ("": the file's default runtime):
        the data's spec and content (a file rewritten at the same path is other data), the
        file's sha256."""
        key = top1_key(self.plan.data_spec, self.data_hash, sha256(artifact.path))
        return key + (f":{source}" if source else "")  # a web runtime's top-1 is its own

    @cached_property
    def data_hash(self) -> str:
        """`split_hash` of the test split, loaded once ("unloaded" when it cannot be: no entry
        matches, and `compute` says why)."""
        from toolkit.bench.artifact_accuracy import test_split

        try:
            self.split = self.split or test_split(self.plan.run_dir, self.plan.data_spec)
        except Exception:  # noqa: BLE001  (compute loads it again and reports the error)
            return "unloaded"
        return split_hash(*self.split)

    def compute(self, key: str, score: Callable[..., float]) -> str | None:
        """The cache's `key` set to `score(images, labels)` on the test split; no data or an
        artifact that will not run: the error's first line, nothing cached."""
        from toolkit.bench.artifact_accuracy import test_split

        try:
            self.split = self.split or test_split(self.plan.run_dir, self.plan.data_spec)
            self.cache[key] = {"top1": score(*self.split), "samples": len(self.split[1])}
        except Exception as exc:  # noqa: BLE001
            return str(exc).splitlines()[0][:200]
        return None

    def in_page(self, cell: Cell) -> Callable[[Session], None] | None:
        """For a web row asking for web.TOP1_THREADS, whose file's top-1 in its runtime is not
        cached: that top-1 computed in the page that timed the row (a page open saved). On a
        failure nothing is cached: attach_accuracy tries in a page of its own and says why."""
        if not web.is_web(cell.runtime) or cell.threads != web.TOP1_THREADS:
            return None  # decided before the file is hashed: most rows are native
        key = self.key(cell.artifact, cell.runtime)
        if key in self.cache:
            return None
        from toolkit.bench.artifact_accuracy import session_top1

        def score(session: Session) -> None:
            self.compute(key, partial(session_top1, session))

        return score


def attach_accuracy(plan: Plan, rows: list[dict], top1s: Top1s) -> dict:
    """top1 on every row of an artifact that ran, computed once per file (and per web runtime:
    in the browser) and cached by sha256 (web.top1_source says which); one missing from
    `top1s` (a web row's page did not compute it) computed here, in a session of its own."""
    from toolkit.bench.artifact_accuracy import top1
    from toolkit.common import atomic

    ran = {(r["file"], web.top1_source(r)) for r in rows if r["status"] == "ok"}
    info: dict = {"spec": plan.data_spec, "samples": None}
    for artifact, source in sorted(
        ((a, s) for a in plan.artifacts for f, s in ran if f == a.path.name and s is not None),
        key=lambda pair: (plan.artifacts.index(pair[0]), pair[1]),
    ):
        key = top1s.key(artifact, source)
        if key not in top1s.cache:
            error = top1s.compute(key, partial(top1, artifact.path, runtime=source or None))
            if error is not None:
                info["error"] = error
        entry = top1s.cache.get(key, {})
        for row in rows:
            if row["file"] == artifact.path.name and web.top1_source(row) == source:
                row["top1"] = entry.get("top1")
        info["samples"] = entry.get("samples", info["samples"])
    atomic.write_json(top1s.path, top1s.cache)
    return info


def attach_vs_keras(rows: list[dict]) -> None:
    """speedup_vs_keras: Keras p50 over the row's p50, at the same batch size."""
    keras = {r["batch"]: r["p50_ms"] for r in rows if r["runtime"] == "keras" and "p50_ms" in r}
    for row in rows:
        if row.get("p50_ms") and row["batch"] in keras:
            row["speedup_vs_keras"] = keras[row["batch"]] / row["p50_ms"]


def _time_kernel(kernel: roofline.Kernel, cache: Path, threads: int | None) -> dict:
    """One roofline kernel built (once) and timed in a worker: its entry, `min_ms` when ok."""
    entry = {"runtime": kernel.runtime, "precision": kernel.precision, "shape": list(kernel.shape)}
    try:
        path = roofline.kernel_file(kernel, cache)
    except Exception as exc:  # noqa: BLE001  (e.g. no TensorFlow to convert the tflite)
        return {**entry, "status": "failed", "reason": str(exc).splitlines()[0]}
    result = run_worker(path, kernel.runtime, kernel.shape[0], ROOFLINE_PROTOCOL, threads)
    entry.update(file=path.name, status=result["status"], reason=result.get("reason"))
    if result["status"] == "ok":  # a roof is the best the runtime did: its fastest call
        entry.update(min_ms=result["min_ms"], p50_ms=result["p50_ms"], spread=result["spread"])
    return entry


def measure_peaks(plan: Plan, runtimes: set[str], cache: Path) -> tuple[dict, list[dict]]:
    """Peak GMAC/s per (runtime, precision) of `runtimes`, and the entries that measured them.

    Each kernel is timed in PEAK_ROUNDS rounds over all kernels, and keeps its fastest: a VM
    that slows down for a few seconds then spoils one round's figure, not the peak.
    """
    kernels = [k for (runtime, _), k in roofline.KERNELS.items() if runtime in runtimes]
    tries: dict[roofline.Kernel, list[dict]] = {kernel: [] for kernel in kernels}
    for round_ in range(PEAK_ROUNDS):
        for i, kernel in enumerate(kernels, 1):
            what = "x".join(map(str, kernel.shape)) + f" {kernel.precision} matmul"
            step = round_ * len(kernels) + i
            progress(
                "roofline peak", step, PEAK_ROUNDS * len(kernels), f"{what} on {kernel.runtime}"
            )
            tries[kernel].append(_time_kernel(kernel, cache, plan.threads))
    peaks, entries = {}, []
    for kernel, timed in tries.items():
        ok = [e for e in timed if "min_ms" in e]
        entry = min(ok, key=lambda e: e["min_ms"]) if ok else timed[-1]
        entry = {**entry, "rounds_min_ms": [e.get("min_ms") for e in timed]}
        if "min_ms" in entry:
            entry["peak_gmacs"] = roofline.peak_gmacs(entry["min_ms"])
            peaks[kernel.runtime, kernel.precision] = entry["peak_gmacs"]
        entries.append(entry)
    return peaks, entries


def no_roofline(rows: list[dict], why: str, keep_gmacs: bool = False) -> dict:
    """The roofline section not measured: every row's fractions (and, without MACs, its GMAC/s)
    null, and why."""
    for row in rows:
        row.update(roofline_fraction=None, attainable_fraction=None)
        if not keep_gmacs:
            row["gmacs"] = None
    return {
        "macs": roofline.MACS,
        "not_available": why,
        "peaks": [],
        "memory": [],
        "layers": [],
        "fastest": fastest(rows),
        "above_roof": [],
    }


def above_roof(rows: list[dict]) -> list[str]:
    """The rows that ran faster than a roof allows: the machine was slower while the roofline
    was timed, so this run's fractions overstate."""
    return [
        f"{r['format']} on {r['runtime']} at batch {r['batch']} ran at {r[key]:.0%} of its {roof}"
        for r in rows
        for key, roof in (("roofline_fraction", "peak"), ("attainable_fraction", "roofline"))
        if (r.get(key) or 0) > 1
    ]


def measure_reads(plan: Plan, reads: list[tuple[str, str]], cache: Path) -> tuple[dict, list]:
    """GB/s at which each CPU runtime's batch-1 matmul reads the model's weights at each
    precision of `reads` (bench/roofline.py), and the entries that measured them."""
    bandwidths, entries = {}, []
    for i, (runtime, precision) in enumerate(reads, 1):
        base = roofline.stream_kernel(runtime, precision, 1)  # one column: a call's fixed cost
        kernel = roofline.stream_kernel(
            runtime, precision, roofline.model_weight_bytes(plan.layers, precision)
        )
        what = f"{kernel.weight_bytes / 2**20:.3g} MiB of {precision} weights on {runtime}"
        progress("roofline memory", i, len(reads), what)
        entry = {**_time_kernel(kernel, cache, plan.threads), "for": precision}
        base_ms = _time_kernel(base, cache, plan.threads).get("min_ms")
        entry.update(weight_bytes=kernel.weight_bytes, base_ms=base_ms)
        if "min_ms" in entry and base_ms is not None:
            entry["gbs"] = roofline.bandwidth_gbs(kernel, entry["min_ms"], base, base_ms)
            if entry["gbs"] is not None:
                bandwidths[runtime, precision] = entry["gbs"]
        entries.append(entry)
    return bandwidths, entries


def measure_roofline(plan: Plan, rows: list[dict], cache: Path) -> dict:
    """The peaks and, on CPU runtimes, the weight-read rates behind the rows that ran; each ok
    row's fraction of its peak and of its per-layer roofline."""
    ok = [r for r in rows if r["status"] == "ok"]
    peaks, entries = measure_peaks(plan, {r["runtime"] for r in ok}, cache)
    reads = sorted(
        (runtime, precision)
        for runtime, precision in {(r["runtime"], roofline.precision_of(r["format"])) for r in ok}
        if RUNTIMES[runtime].host_memory and precision in roofline.WEIGHT_BYTES
    )
    bandwidths, memory = measure_reads(plan, reads, cache) if plan.layers else ({}, [])
    for row in rows:
        row["roofline_fraction"] = roofline.fraction(row, peaks)
        row.update(roofline.attainable(row, peaks, bandwidths, plan.layers))
    return {
        "macs": roofline.MACS,
        "peaks": entries,
        "memory": memory,
        "layers": [
            {"name": c.name, "macs": c.macs, "parameters": c.parameters} for c in plan.layers
        ],
        "fastest": fastest(rows),
        "above_roof": above_roof(rows),
    }


def fastest(rows: list[dict]) -> list[dict]:
    """Per batch and precision (fp32, int8): the quickest ok row and its roofline fraction."""
    best: dict[tuple[int, str], dict] = {}
    for row in rows:
        precision = roofline.precision_of(row["format"])
        if row["status"] != "ok" or precision is None or row["runtime"] == "keras":
            continue
        if web.is_web(row["runtime"]):  # no roofline in the browser (web.NO_ROOFLINE)
            continue
        key = (row["batch"], precision)
        if key not in best or row["p50_ms"] < best[key]["p50_ms"]:
            best[key] = row
    return [
        {
            "batch": b,
            "precision": p,
            "format": r["format"],
            "runtime": r["runtime"],
            "p50_ms": r["p50_ms"],
            "gmacs": r.get("gmacs"),
            "roofline_fraction": r.get("roofline_fraction"),
            **{k: r[k] for k in roofline.ATTAINABLE_KEYS if k in r},
        }
        for (b, p), r in sorted(best.items())
    ]


def _measure_rows(plan: Plan, on_row: Callable[[dict], None]) -> tuple[list[dict], dict | None]:
    """Every cell's row, the WebGPU rows, then top-1 (None when the plan computes none)."""
    rows, cells = [], plan.rows()
    top1s = Top1s(plan) if plan.no_top1 is None else None
    for i, cell in enumerate(cells, 1):
        what = f"{cell.artifact.format} on {cell.runtime}, batch {cell.batch}"
        if web.is_web(cell.runtime):
            what += f", {cell.threads or 'most'} thread{'s' * (cell.threads != 1)}"
        progress("bench row", i, len(cells), what)
        rows.append(measure_row(plan, cell, top1s.in_page(cell) if top1s else None))
        on_row(rows[-1])
    rows += webgpu_rows(plan)  # said, not timed
    return rows, (attach_accuracy(plan, rows, top1s) if top1s else None)


def run_suite(
    plan: Plan,
    on_row: Callable[[dict], None] = lambda row: None,
    cache: Path | None = None,
) -> dict:
    """Measure every cell of the plan (a native one in a worker of its own, the web ones in
    pages of one browser), then accuracy and roofline."""
    with one_browser():  # every web row and top-1 in one browser, started on first use
        rows, data = _measure_rows(plan, on_row)
    if data is None:
        data = {"spec": None, "samples": None, "not_computed": plan.no_top1}
        for row in rows:
            row["top1"] = None
    attach_vs_keras(rows)
    if plan.no_macs is None:
        roof = measure_roofline(plan, rows, cache or roofline.cache_dir())
    else:
        roof = no_roofline(rows, plan.no_macs, keep_gmacs=plan.macs_per_image is not None)
    return {
        "run": str(plan.run_dir),
        "kind": plan.kind,
        "model": plan.model,
        "preset": plan.preset,
        "command": plan.command,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": describe(),
        "protocol": {
            "warmup": plan.protocol.warmup,
            "runs": plan.protocol.runs,
            "seconds": plan.protocol.seconds,
            "threads": plan.threads,
            "batches": plan.batches,
            "runtimes": plan.runtimes,
            "timer": f"time.perf_counter_ns per call; {TIMED_CALL}; one fresh process per row",
            **web.protocol_fields(plan.protocol_of(web.ANY), plan.web_threads, rows),
        },
        "data": data,
        "roofline": roof,
        "rows": rows,
    }
