"""The picks: for each target, the fastest file within a top-1 budget, from what bench.json and
verify.json hold (pure: measurements in, picks out).

Latency is bench.json's p50 at batch 1 on the runtime that ranks the target's files (targets.py):
the first of its runtimes with rows, or (the web target) every runtime that opens a file, each
(file, runtime) pair a candidate at its fastest row (over thread counts); where none of a
target's runtimes has an ok row, its fallback runtimes stand in, and the pick says so.
Top-1 and its agreement with the float model are verify.json's model cells (every file against
the Keras model on the run's test split); bench.json's top-1 of a row stands in only for a file
verify.json has no cell for (then without agreement). The budget is in points of top-1:
drop = (float top-1 - file top-1) x 100, and a file whose drop exceeds it is never picked.

Among the files within the budget, those whose p50 is within TIE_MARGIN of the fastest are tied
(rows timed minutes apart move by that much: the same cpu60 run shipped twice ranked four
.tflite files within 10% in two orders), and the tie goes to what serves an app: the smaller
file, then the higher agreement with the float model, then the lower p50.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import PurePath

from toolkit.accuracy import MAX_DROP_POINTS
from toolkit.common.errors import UsageError
from toolkit.formats import FORMATS
from toolkit.runfiles import BenchRow, VerifyCell
from toolkit.ship.measurements import Measurements
from toolkit.ship.targets import TARGETS, Target

# top-1 fractions are counts over N images: their difference in points is exact up to float
# rounding, e.g. (0.5 - 0.495) x 100 = 0.5000000000000004; a drop this close to the budget is in
BUDGET_SLACK = 1e-9
PASSED = "pass"  # verify's status of a cell within its tolerance
DEFAULT_MAX_DROP = 1.0  # top-1 points: `toolkit ship`'s default budget
TIE_MARGIN = 0.10  # p50s this much above the fastest's are tied with it


@dataclass(frozen=True)
class Pick:
    """The file shipped for one target, and the figures it was chosen on."""

    target: str  # TARGETS key
    format: str  # FORMATS key
    file: str  # file name (in RUN/export and in the bundle)
    runtime: str  # the bench runtime whose latency ranked it
    p50_ms: float  # bench.json p50 at batch 1 on this machine
    top1: float  # the file's test top-1 (0-1), from verify.json / bench.json
    float_top1: float  # the float Keras model's top-1 on the same split
    agreement: float | None  # top-1 agreement with the float model (verify.json)
    size_bytes: int
    library: str | None = None  # the web library the app runs the file with (web target)
    threads: int | None = None  # the threads of the bench row that ranked it, where recorded
    measured_top1: float | None = None  # that row's own top-1 (the browser's, for a web row)
    stand_in: str | None = None  # why the figures are not the target's own runtime's, if not
    tied_with: tuple[str, ...] = ()  # "file on runtime" of the candidates it tied with
    fastest_p50_ms: float | None = None  # the fastest tied candidate's p50, when it tied

    def __post_init__(self) -> None:
        """A pick read back from a bundle's model.json (a JSON list) equals the one made."""
        object.__setattr__(self, "tied_with", tuple(self.tied_with))

    @property
    def drop_points(self) -> float:
        """Top-1 points lost against the float model (negative: the file scores higher)."""
        return (self.float_top1 - self.top1) * 100


def check_budget(max_drop: float) -> float:
    """The budget in points, or a UsageError: a number from 0 to MAX_DROP_POINTS."""
    number = isinstance(max_drop, int | float) and math.isfinite(max_drop)
    if not (number and 0 <= max_drop <= MAX_DROP_POINTS):
        raise UsageError(
            f"--max-accuracy-drop must be a number of top-1 points from 0 to {MAX_DROP_POINTS:g}, "
            f"got {max_drop!r}: e.g. 0.5 ships the fastest file at most half a point below the "
            "float model"
        )
    return float(max_drop)


def float_top1(m: Measurements) -> float | None:
    """The float Keras model's test top-1: verify.json's reference, else bench.json's keras row."""
    if m.verify.models is not None and m.verify.models.reference_top1 is not None:
        return m.verify.models.reference_top1
    for row in m.bench.rows:
        if row.runtime == "keras" and row.batch == 1 and row.top1 is not None:
            return row.top1
    return None


def verify_cell(m: Measurements, fmt: str, runtime: str) -> VerifyCell | None:
    """verify.json's model cell of `fmt` that scored a top-1: on `runtime` if verify runs it,
    else on the format's own runtime (a .tflite's MediaPipe rank uses its LiteRT cell)."""
    if m.verify.models is None:
        return None
    for wanted in dict.fromkeys((runtime, FORMATS[fmt].runtime)):
        cell = m.verify.models.scored_cell(fmt, wanted)
        if cell is not None:
            return cell
    return None


def opens(runtime: str, file: str) -> bool:
    """Whether bench runtime `runtime` opens `file` (by suffix, as bench pairs them)."""
    from toolkit.runtimes import RUNTIMES

    return PurePath(file).suffix.lower() in RUNTIMES[runtime].suffixes


def ok_rows(m: Measurements, fmt: str, runtime: str, backend: str | None = None) -> list[BenchRow]:
    """bench.json's ok batch-1 rows of `fmt` on `runtime` with a p50 (on `backend`, where
    given: a row without one counts), fastest first."""
    rows = [
        r
        for r in m.bench.rows
        if (r.format, r.runtime, r.batch) == (fmt, runtime, 1) and r.ok and r.p50_ms is not None
        and (backend is None or r.backend in (None, backend))
    ]  # fmt: skip
    return sorted(rows, key=lambda r: r.p50_ms or 0.0)


def _any_ok(m: Measurements, target: Target, runtimes: tuple[str, ...]) -> bool:
    """Whether one of `runtimes` has an ok batch-1 row for some file of `target`."""
    return any(ok_rows(m, f, r, target.backend) for f in target.formats for r in runtimes)


def first_runtime(
    m: Measurements, target: Target, fmt: str, runtimes: tuple[str, ...]
) -> list[str]:
    """The first of `runtimes` that opens `fmt`'s file and has an ok batch-1 row for some file
    of the target (none: [])."""
    file = FORMATS[fmt].filename
    for runtime in runtimes:
        if opens(runtime, file) and _any_ok(m, target, (runtime,)):
            return [runtime]
    return []


def every_runtime(
    m: Measurements, target: Target, fmt: str, runtimes: tuple[str, ...]
) -> list[str]:
    """Every one of `runtimes` that opens `fmt`'s file: each pair is a candidate."""
    return [r for r in runtimes if opens(r, FORMATS[fmt].filename)]


# Target.ranking -> the runtimes whose rows rank a format's file
RANKINGS = {"first": first_runtime, "fastest": every_runtime}


def stand_in_reason(m: Measurements, target: Target) -> str | None:
    """Why `target`'s fallback runtimes rank its files (none of its runtimes has an ok row for
    one of its files), or None when its own runtimes do."""
    if not target.fallback or _any_ok(m, target, target.runtimes):
        return None
    failed = [r for r in m.bench.rows if r.runtime in target.runtimes and not r.ok]
    why = (
        f"{failed[0].runtime} {failed[0].status}: {failed[0].reason or 'no reason recorded'}"
        if failed
        else f"bench.json has no {'/'.join(target.runtimes)} rows"
    )
    return f"{'/'.join(target.fallback)} stands in, not {'/'.join(target.runtimes)} ({why})"


def ranking_runtimes(m: Measurements, target: Target, fmt: str) -> tuple[list[str], str | None]:
    """The runtimes whose rows rank `fmt`'s file for `target`, and why they stand in for the
    target's own (None: they are its own)."""
    reason = stand_in_reason(m, target)
    if reason is not None:
        return first_runtime(m, target, fmt, target.fallback), reason
    return RANKINGS[target.ranking](m, target, fmt, target.runtimes), None


def _candidate(
    m: Measurements, target: Target, fmt: str, runtime: str, row: BenchRow, reference: float
) -> Pick | str:
    """The (file, runtime) pair as a Pick, or why it is not a candidate."""
    entry = m.manifest.artifacts[fmt]
    file = entry.file or FORMATS[fmt].filename
    cell = verify_cell(m, fmt, runtime)
    if cell is not None and cell.status != PASSED:
        return f"{file} did not pass verify on {cell.runtime} ({cell.status})"
    if cell is not None and cell.top1 is not None:  # a scored cell has one
        top1, agreement = cell.top1, cell.agreement
    elif row.top1 is not None:
        top1, agreement = row.top1, None
    else:
        return f"{file} has no top-1 in verify.json or bench.json"
    threads = row.threads
    return Pick(
        target=target.name,
        format=fmt,
        file=file,
        runtime=runtime,
        p50_ms=float(row.p50_ms or 0.0),
        top1=top1,
        float_top1=reference,
        agreement=agreement,
        size_bytes=int(row.size_bytes or entry.size_bytes or 0),
        library=target.apps.get(runtime),
        threads=threads if isinstance(threads, int) else None,
        measured_top1=row.top1,
    )


def candidates(m: Measurements, target: Target, reference: float) -> tuple[list[Pick], list[str]]:
    """Every (file, ranking runtime) pair of `target` with a batch-1 latency and a top-1 (as a
    Pick), and why each of the other exported files or pairs is not a candidate."""
    found: list[Pick] = []
    left_out: list[str] = []
    for fmt in target.formats:
        if fmt not in m.manifest.artifacts:
            continue
        file = m.manifest.artifacts[fmt].file or FORMATS[fmt].filename
        runtimes, reason = ranking_runtimes(m, target, fmt)
        if not runtimes:
            on = "/".join(target.fallback if reason else target.runtimes)
            left_out.append(f"{file} has no ok batch-1 {on} row in bench.json")
        for runtime in runtimes:
            rows = ok_rows(m, fmt, runtime, target.backend)
            if not rows:
                left_out.append(f"{file} has no ok batch-1 {runtime} row in bench.json")
                continue
            made = _candidate(m, target, fmt, runtime, rows[0], reference)
            if isinstance(made, str):
                left_out.append(made)
            else:
                found.append(replace(made, stand_in=reason))
    return found, left_out


def within(pick: Pick, max_drop: float) -> bool:
    """Whether `pick`'s top-1 drop is within `max_drop` points (exactly at it counts)."""
    return pick.drop_points <= max_drop + BUDGET_SLACK


def fastest(picks: list[Pick]) -> Pick:
    """The pick among `picks` (all within the budget): those within TIE_MARGIN of the lowest
    p50 are tied; of them the smaller file, then the higher agreement, then the lower p50 (then
    FORMATS order and the runtime, so that equal figures always give one pick). A pick that won
    a tie names the others (`tied_with`) and the fastest p50 among them."""
    order = list(FORMATS)
    best = min(p.p50_ms for p in picks)
    tied = [p for p in picks if p.p50_ms <= best * (1 + TIE_MARGIN)]
    winner = min(
        tied,
        key=lambda p: (
            p.size_bytes,
            -(p.agreement if p.agreement is not None else -1.0),
            p.p50_ms,
            order.index(p.format),
            p.runtime,
        ),
    )
    others = tuple(f"{p.file} on {p.runtime}" for p in sorted(tied, key=lambda p: p.p50_ms)
                   if p is not winner)  # fmt: skip
    return replace(winner, tied_with=others, fastest_p50_ms=best if others else None)


@dataclass(frozen=True)
class SpeedUp:
    """A pick's speed against the float file on the same runtime: p50 over p50, and the range
    the rows' per-round p50s allow (the slowest float round over the fastest pick round, and the
    other way round)."""

    float_file: str
    ratio: float
    low: float
    high: float


def speedup_over_float(m: Measurements, pick: Pick, backend: str | None = None) -> SpeedUp | None:
    """`pick`'s SpeedUp over the first float32 format (FORMATS order) its runtime opens, from
    the rows that ranked them; None when the pick is that file or a row is missing."""
    floats = [
        f for f, fmt in FORMATS.items() if fmt.precision == "fp32" and f in m.manifest.artifacts
    ]
    base = next((f for f in floats if opens(pick.runtime, FORMATS[f].filename)), None)
    if base is None or base == pick.format:
        return None
    ours, theirs = (
        ok_rows(m, pick.format, pick.runtime, backend),
        ok_rows(m, base, pick.runtime, backend),
    )
    if not ours or not theirs:
        return None
    mine, other = ours[0], theirs[0]
    mine_rounds = mine.round_p50_ms or (mine.p50_ms,)
    other_rounds = other.round_p50_ms or (other.p50_ms,)
    return SpeedUp(
        float_file=m.manifest.artifacts[base].file or FORMATS[base].filename,
        ratio=float(other.p50_ms) / float(mine.p50_ms),
        low=min(other_rounds) / max(mine_rounds),
        high=max(other_rounds) / min(mine_rounds),
    )


def _points(drop: float) -> str:
    """A drop rounded up to hundredths of a point: a budget of that much takes the file."""
    return f"{math.ceil(round(drop * 100, 6)) / 100:.2f}"


def choose_one(m: Measurements, target: Target, max_drop: float, reference: float) -> Pick:
    """The fastest file of `target` within `max_drop` points; a one-line UsageError naming the
    target, the closest file's drop and the way out when none is."""
    found, left_out = candidates(m, target, reference)
    inside = [p for p in found if within(p, max_drop)]
    if inside:
        return fastest(inside)
    if not found:
        why = (
            "; ".join(left_out) or f"none of its formats ({', '.join(target.formats)}) is exported"
        )
        raise UsageError(
            f"target {target.name}: no file to choose from ({why}): export, verify and bench "
            f"them (`toolkit ship` does), or leave {target.name} out of --target"
        )
    closest = min(found, key=lambda p: (p.drop_points, p.p50_ms))
    raise UsageError(
        f"target {target.name}: no file within --max-accuracy-drop {max_drop:g} points of the "
        f"float model's top-1 ({reference:.2%}); the closest, {closest.format} "
        f"({closest.file}), drops {closest.drop_points:.2f} points: pass --max-accuracy-drop "
        f"{_points(closest.drop_points)} or more, or leave {target.name} out of --target"
    )


def choose(m: Measurements, targets: Iterable[str], max_drop: float) -> dict[str, Pick]:
    """Target name -> its pick, in the order given; UsageError (one line) when a target has
    nothing within `max_drop` points, or there is no float top-1 to measure drops against."""
    max_drop = check_budget(max_drop)
    reference = float_top1(m)
    if reference is None:
        raise UsageError(
            "no top-1 of the float model to measure drops against (verify.json has no model "
            "level): run `toolkit verify RUN --models-only`, or let `toolkit ship` do it"
        )
    return {name: choose_one(m, TARGETS[name], max_drop, reference) for name in targets}
