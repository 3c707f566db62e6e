"""`toolkit demo`: the tiny presets end to end on offline data, printing where outputs went."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from toolkit.bench.bench_tables import terminal_table
from toolkit.bench.benchmark import bench_run
from toolkit.common import atomic
from toolkit.common.errors import UsageError
from toolkit.export import export_run
from toolkit.runfiles import (
    CONFIG_FILE,
    MANIFEST_FILE,
    VERIFY_FILE,
    bench_path,
    config_path,
    find_verify,
    manifest_path,
)
from toolkit.runfiles.folder import HISTORY_FILE, LABELS_FILE, METRICS_FILE, MODEL_FILE
from toolkit.runmodel import evaluate_run
from toolkit.training.options import TrainOptions
from toolkit.training.train import train
from toolkit.verify import verify_run

DEMO_MODELS = ("shiftvit", "vit-lsa")
# short runs: the demo shows the table, not final figures. A second per row, not a fixed count:
# the tiny models' calls take 0.06-0.5 ms, and 20 calls left the int8-vs-fp32 order to noise
BENCH_OPTIONS = {"seconds": 1.0, "warmup": 20}
BENCH_ARGS = " ".join(f"--{name} {value:g}" for name, value in BENCH_OPTIONS.items())
RUN_FILES = (MODEL_FILE, CONFIG_FILE, HISTORY_FILE, METRICS_FILE, LABELS_FILE)


# how far a demo got with one model, by the files its stages leave (the last stage's last)
NEW, TRAINING, TRAINED, DONE = "not started", "training", "trained", "done"


def progress(run_dir: Path) -> str:
    """How far an earlier demo got with `run_dir`: NEW (absent or empty), TRAINING (a run
    folder without its model: killed in training), TRAINED (then killed in export, verify or
    bench), DONE (benchmarked); a folder that is no run is a UsageError."""
    if not run_dir.exists() or (run_dir.is_dir() and not any(run_dir.iterdir())):
        return NEW
    if not run_dir.is_dir() or not config_path(run_dir).is_file():
        raise UsageError(f"{run_dir} already exists and is no demo run: pass another --out")
    if not ((run_dir / MODEL_FILE).is_file() and (run_dir / METRICS_FILE).is_file()):
        return TRAINING
    return DONE if bench_path(run_dir).is_file() else TRAINED


def run_demo(
    data: str = "shapes", out: Path | None = None, epochs: int | None = None
) -> tuple[Path, bool]:
    """Train, evaluate, export and verify each demo model at the tiny preset; a demo folder an
    interrupted demo left (`--out`) is continued where it stopped, its runs' settings kept.

    Returns the demo folder and whether every verification passed.
    """
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    root = Path(out) if out is not None else Path("runs") / f"demo-{stamp}"
    stages = {model: progress(root / model) for model in DEMO_MODELS}  # before any work
    for model in DEMO_MODELS:
        atomic.check_writable(
            config_path(root / model), "--out", "pass --out DIR in a writable place"
        )
    if any(stage != NEW for stage in stages.values()):
        got = ", ".join(f"{model} {stage}" for model, stage in stages.items())
        print(f"== continuing the demo in {root} ({got})", flush=True)
    else:
        print(f"== demo folder {root} (if interrupted: `toolkit demo --out {root}` continues)")
    passed = True
    for model in DEMO_MODELS:
        run_dir = root / model
        if stages[model] == DONE:  # what its verify said, as saved
            report = find_verify(run_dir)
            passed = passed and report is not None and bool(report.passed)
            continue
        if stages[model] == NEW:
            print(f"== {model}: training the tiny preset on {data}", flush=True)
            options = TrainOptions(model=model, preset="tiny", data=data, epochs=epochs)
            train(options, out=run_dir)
        elif stages[model] == TRAINING:
            print(f"== {model}: continuing its training (its own settings)", flush=True)
            train(TrainOptions(model=model), out=run_dir, resume=True)
        passed = _after_training(model, run_dir) and passed
    return root, passed


def _after_training(model: str, run_dir: Path) -> bool:
    """Evaluate, export, verify and bench one trained demo run; whether verify passed."""
    result = evaluate_run(run_dir)
    print(
        f"== {model}: test top-1 {result['top1']:.1%}, top-5 {result['top5']:.1%} "
        f"on {result['samples']} images",
        flush=True,
    )
    print(f"== {model}: exporting every format")
    exported = export_run(run_dir, "all")  # int8: export's calibration count rule
    print(f"   run folder: {run_dir}")
    for name in RUN_FILES:
        print(f"   {name:22s} -> {run_dir / name}")
    for fmt, entry in exported.entries.items():
        size = (entry.size_bytes or 0) / 1024
        print(f"   {fmt:22s} -> {exported.path(fmt)} ({size:.0f} KB)")
    print(f"   {MANIFEST_FILE:22s} -> {manifest_path(exported.folder)}")
    print(f"== {model}: verifying ops (quick shapes) and every artifact", flush=True)
    verified = verify_run(run_dir, shapes="quick", quiet=False)
    print(f"   {VERIFY_FILE:22s} -> {verified.saved.report}")
    print(f"== {model}: benchmarking every artifact (short: {BENCH_ARGS})", flush=True)
    benched = bench_run(run_dir, **BENCH_OPTIONS)
    print(terminal_table(benched.result))
    for path in benched.files:
        print(f"   {path.name:22s} -> {path}")
    return verified.passed
