"""Bring a run up to date for its targets: export the formats they take that are missing or stale,
verify when verify.json does not describe those files, bench when bench.json lacks their rows on
this machine; what still matches on disk (sha256) is reused.

A file is stale when model.keras changed since its export (model.json's source_model_sha256) or
its bytes are not the ones model.json records. verify.json describes a file when the file's
parity record in model.json has its sha256 and verify.json's date, and verify.json scored the
whole test split. A bench.json row is current when it was timed on this CPU, with these runtime
versions, on these bytes: its sha256 (older bench.json rows have none: then its size, and a bench
after the export). Anything to bench re-benches every file the targets take, on the runtimes
that rank them, at batch 1, without the roofline, and replaces bench.json.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from toolkit.common import atomic
from toolkit.common.errors import UsageError
from toolkit.formats import FORMATS
from toolkit.runfiles import (
    ArtifactEntry,
    BenchReport,
    BenchRow,
    Manifest,
    manifest_path,
    verify_path,
)
from toolkit.runfiles.folder import (
    BENCH_FILES,
    BENCH_TOP1_FILE,
    LABELS_FILE,
    MODEL_FILE,
    VERIFY_FILE,
    Run,
)
from toolkit.runfiles.hashes import sha256
from toolkit.ship.measurements import Measurements, read_measurements
from toolkit.ship.picks import choose, opens
from toolkit.ship.shipment import Shipment
from toolkit.ship.targets import TARGETS

NO_ROOFLINE = (
    "toolkit ship times the rows its targets are ranked by, without the roofline: "
    "`toolkit bench RUN` measures it"
)
NO_TOP1 = (
    "toolkit ship takes each file's top-1 from verify.json, which scored every file on every "
    "runtime that ranks it: `toolkit bench RUN` scores them here too"
)


def bench_packages() -> tuple[str, ...]:
    """The toolkit.common.versions keys whose change re-benches: the packages (their rows')
    of the runtimes ship ranks by."""
    from toolkit.runtimes import RUNTIMES

    ranking = {r for target in TARGETS.values() for r in target.runtimes}
    return tuple(sorted({p for r in ranking if (p := RUNTIMES[r].package) is not None}))


@dataclass(frozen=True)
class StagePlan:
    """What `toolkit ship` runs before it picks: nothing when every field is empty."""

    export: tuple[str, ...]  # formats to export (missing or stale), in FORMATS order
    verify: bool
    verify_runtimes: tuple[str, ...]  # what verify runs on when it runs (`verify_runtimes`)
    bench_formats: tuple[str, ...]  # formats to bench (empty: bench.json is reused)
    bench_runtimes: tuple[str, ...]
    reasons: tuple[str, ...]  # one line per stage that runs, saying why

    @property
    def nothing(self) -> bool:
        return not (self.export or self.verify or self.bench_formats)


def needed_formats(targets: Iterable[str]) -> list[str]:
    """Every format some target takes, in FORMATS order."""
    wanted = {f for name in targets for f in TARGETS[name].formats}
    return [f for f in FORMATS if f in wanted]


def runtimes_here(targets: Iterable[str]) -> list[str]:
    """The targets' ranking runtimes that run on this machine, in the targets' order (a
    target's fallback runtimes where none of its own does: the web target's MediaPipe in Python
    where no browser runs); a UsageError (before any work) for a target none of whose runtimes
    runs here."""
    from toolkit.runtimes import RUNTIMES

    found: list[str] = []
    for name in targets:
        target = TARGETS[name]
        here = [r for r in target.runtimes if RUNTIMES[r].unavailable() is None]
        here = here or [r for r in target.fallback if RUNTIMES[r].unavailable() is None]
        if not here:
            why = RUNTIMES[target.runtimes[-1]].unavailable()
            raise UsageError(
                f"target {name}: nothing here times its files ({why}); install it, or leave "
                f"{name} out of --target"
            )
        found += [r for r in here if r not in found]
    return found


def export_problem(run: Run, manifest: Manifest, fmt: str, model_sha: str) -> str | None:
    """Why format `fmt` must be exported (again), or None when RUN/export has it current."""
    entry = manifest.artifacts.get(fmt)
    if entry is None or not entry.file:
        return f"{fmt} is not exported"
    path = run.export_dir / entry.file
    if not path.is_file():
        return f"{path.name} is missing"
    if manifest.source_model_sha256 != model_sha:
        return f"{MODEL_FILE} changed since {path.name} was exported"
    if sha256(path) != entry.sha256:
        return f"{path.name} changed after export (its sha256 is not model.json's)"
    for companion in FORMATS[fmt].companions:
        if not (run.export_dir / companion).is_file():
            return f"{companion} (beside {path.name}) is missing"
    return None


def verified_pairs(formats: list[str], runtimes: list[str]) -> list[tuple[str, str]]:
    """(format, runtime) pairs verify.json must have scored for the picks: each native ranking
    runtime that opens the format's file and that verify runs; a browser or MediaPipe rank
    takes the format's own runtime's cell (picks.verify_cell: the same file, whose wasm
    kernels `toolkit verify --runtime web-litert,web-ort` checks on demand), so that ship never
    scores the test split in a browser."""
    from toolkit.runtimes import RUNTIMES, VERIFIED_RUNTIMES

    pairs: list[tuple[str, str]] = []
    for fmt in formats:
        for runtime in runtimes:
            if opens(runtime, FORMATS[fmt].filename):
                native = runtime in VERIFIED_RUNTIMES and RUNTIMES[runtime].by_default
                checked = runtime if native else FORMATS[fmt].runtime
                if checked in VERIFIED_RUNTIMES and (fmt, checked) not in pairs:
                    pairs.append((fmt, checked))
    return pairs


def verify_runtimes(formats: list[str], runtimes: list[str]) -> tuple[str, ...]:
    """What ship's verify runs on: the runtimes of `verified_pairs`, in VERIFIED_RUNTIMES
    order (the default ones where no pair needs any)."""
    from toolkit.runtimes import DEFAULT_VERIFIED, VERIFIED_RUNTIMES

    wanted = {runtime for _, runtime in verified_pairs(formats, runtimes)}
    return tuple(r for r in VERIFIED_RUNTIMES if r in wanted) or DEFAULT_VERIFIED


def verify_problem(
    run: Run, m: Measurements, formats: list[str], runtimes: list[str] = ()
) -> str | None:
    """Why verify.json does not describe the files of `formats` (exported, current) on every
    runtime of `runtimes` that ranks them (`verified_pairs`), or None."""
    models = m.verify.models
    if models is None or not models.cells:
        return f"{VERIFY_FILE} has no model level" if m.verify.to_json() else f"no {VERIFY_FILE}"
    split = run.config.test_images
    if models.split != "test" or (split and models.samples != split):
        return f"{VERIFY_FILE} scored {models.samples} of the {split} test images"
    scored = {c.format for c in models.cells}
    for fmt in formats:
        entry = m.manifest.artifacts[fmt]
        parity = entry.parity or {}
        fresh = parity.get("sha256") == entry.sha256 and parity.get("verified") == m.verify.date
        if not fresh or fmt not in scored:
            return f"{VERIFY_FILE} does not cover {entry.file} as exported"
    for fmt, runtime in verified_pairs(formats, list(runtimes)):
        if models.scored_cell(fmt, runtime) is None:
            return f"{VERIFY_FILE} did not score {m.manifest.artifacts[fmt].file} on {runtime}"
    return None


def machine_problem(bench: BenchReport) -> str | None:
    """Why bench.json's figures are not this machine's (CPU, cores, runtime versions), or None."""
    from toolkit.bench.machine import cpu_model
    from toolkit.common.versions import versions

    cpu = bench.machine.get("cpu")
    if cpu != cpu_model() or bench.machine.get("cores") != os.cpu_count():
        return f"{BENCH_FILES[0]} was timed on another machine ({cpu})"
    now = versions()
    for package in bench_packages():
        was = bench.versions.get(package)
        if was != now.get(package):
            return f"{BENCH_FILES[0]} was timed with {package} {was}, this is {now.get(package)}"
    return None


def row_current(row: BenchRow, path: Path, entry: ArtifactEntry, bench_date: str) -> bool:
    """Whether a bench.json row timed the bytes at `path` (by sha256; rows of older benches,
    which have none, by size and a bench after the file's export)."""
    if not path.is_file():
        return False
    if row.sha256:
        return row.sha256 == sha256(path)
    exported = entry.exported or ""
    return row.size_bytes == path.stat().st_size and bench_date >= exported > ""


def bench_problem(run: Run, m: Measurements, formats: list[str], runtimes: list[str]) -> str | None:
    """Why bench.json lacks a current batch-1 row of a file of `formats` on a runtime of
    `runtimes` that opens it, or None."""
    if not m.bench.rows:
        return f"{BENCH_FILES[0]} has no rows" if m.bench.to_json() else f"no {BENCH_FILES[0]}"
    problem = machine_problem(m.bench)
    if problem:
        return problem
    for fmt in formats:
        entry = m.manifest.artifacts[fmt]
        path = run.export_dir / entry.file
        for runtime in runtimes:
            if not opens(runtime, path.name):
                continue
            row = m.bench.row(fmt, runtime)
            if row is None:
                return f"{BENCH_FILES[0]} has no batch-1 {runtime} row of {path.name}"
            if not row_current(row, path, entry, m.bench.date or ""):
                return f"{BENCH_FILES[0]} timed another {path.name} than the one exported"
    return None


def plan_stages(run: Run, targets: list[str], m: Measurements | None = None) -> StagePlan:
    """What must run before the picks, from `m` (default: model.json, verify.json and
    bench.json read now) and the files' hashes."""
    formats = needed_formats(targets)
    runtimes = runtimes_here(targets)
    m = read_measurements(run.path) if m is None else m
    model_sha = sha256(run.path / MODEL_FILE)
    reasons: list[str] = []
    export = []
    for fmt in formats:
        problem = export_problem(run, m.manifest, fmt, model_sha)
        if problem:
            export.append(fmt)
            reasons.append(f"export {fmt}: {problem}")
    verify_why = "files are exported now" if export else verify_problem(run, m, formats, runtimes)
    if verify_why:
        reasons.append(f"verify: {verify_why}")
    bench_why = "files are exported now" if export else bench_problem(run, m, formats, runtimes)
    bench = [f for f in formats if any(opens(r, FORMATS[f].filename) for r in runtimes)]
    if bench_why:
        reasons.append(f"bench {', '.join(bench)} on {', '.join(runtimes)}: {bench_why}")
    return StagePlan(
        export=tuple(export),
        verify=bool(verify_why),
        verify_runtimes=verify_runtimes(formats, runtimes) if verify_why else (),
        bench_formats=tuple(bench) if bench_why else (),
        bench_runtimes=tuple(runtimes) if bench_why else (),
        reasons=tuple(reasons),
    )


def check_stage_outputs(run: Run, plan: StagePlan) -> None:
    """A UsageError, before any stage runs, when a file a planned stage writes cannot be."""
    hint = "copy the run folder to a writable place"
    paths: list[Path] = []
    if plan.export:
        names = [n for f in plan.export for n in (FORMATS[f].filename, *FORMATS[f].companions)]
        paths += [run.export_dir / n for n in (*names, LABELS_FILE)]
        paths.append(manifest_path(run.export_dir))
    if plan.verify:
        paths += [verify_path(run.path), manifest_path(run.export_dir)]
    if plan.bench_formats:
        paths += [run.path / name for name in (*BENCH_FILES, BENCH_TOP1_FILE)]
    for path in dict.fromkeys(paths):
        atomic.check_writable(path, hint=hint)


def run_stages(
    run: Run, plan: StagePlan, bench_seconds: float | None, say: Callable[[str], None]
) -> None:
    """Export, verify and bench as planned, each through its stage's Python API."""
    for line in plan.reasons:
        say(line)
    if plan.export:
        from toolkit.export import export_run  # TensorFlow set up first (export/__init__.py)

        export_run(run.path, list(plan.export))  # int8: export's calibration count rule
    if plan.verify:
        from toolkit.verify import verify_run  # TensorFlow set up first

        verified = verify_run(run.path, level="models", runtimes=plan.verify_runtimes)
        if not verified.passed:
            failed = len(verified.report["failures"])
            say(f"verify: {failed} file(s) failed; they are not shipped")
    if plan.bench_formats:
        from toolkit.bench import BenchOptions, bench_run

        bench_run(
            BenchOptions(
                run.path,
                runtime=plan.bench_runtimes,
                format=plan.bench_formats,
                batch="1",
                seconds=bench_seconds,
                no_roofline=NO_ROOFLINE,
                no_top1=NO_TOP1,
            )
        )


def make_shipment(
    run: Run,
    plan: StagePlan,
    m: Measurements,
    targets: list[str],
    max_drop: float,
    web_notes: str | None = None,
) -> Shipment:
    """The one value the bundle is written from: the measurements `plan` was made on (read
    again only when a stage ran and rewrote them), the picks within `max_drop`, and
    `web_notes` when the web target is shipped."""
    if not plan.nothing:
        m = read_measurements(run.path)
    picks = choose(m, targets, max_drop)
    return Shipment(run, m, picks, max_drop, web_notes if "web" in picks else None)
