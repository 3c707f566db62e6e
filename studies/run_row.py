"""An `accuracy` record row (records/accuracy.jsonl) from a finished run folder: what the run's
own files say (command, preset, data split, metrics, the curve, its length and budget) plus
this machine's CPU, flags and cores. Run it on the machine that trained the run, right after.

    python -m studies.run_row RUN --id accuracy-shiftvit-cpu15 --what "..." \
        --command "toolkit train ..." >> records/accuracy.jsonl
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import sys
from pathlib import Path

from studies.provenance import commit_fields
from toolkit.bench.machine import cpu_flags, cpu_model
from toolkit.runfiles import read_config_json
from toolkit.runfiles.folder import HISTORY_FILE, METRICS_FILE

JPEG_DATA = (
    "CIFAR-10 (JPEG q75 copy): the 50,000 training images (the preset's validation share "
    "carved out, stratified, seed 0) and 8,983 of the 10,000 test images as JPEG q75 files"
)
CURVE_EPOCHS = (1, 5, 10, 20, 40, 60)


def _curve(rows: list[dict]) -> list[dict]:
    """Train and validation top-1 at a few epochs and the last."""
    picks = [r for r in rows if int(r["epoch"]) + 1 in CURVE_EPOCHS] + rows[-1:]
    seen, curve = set(), []
    for r in picks:
        epoch = int(r["epoch"]) + 1
        if epoch not in seen:
            seen.add(epoch)
            curve.append(
                {
                    "epoch": epoch,
                    "train_top1": round(float(r["accuracy"]), 3),
                    "val_top1": round(float(r["val_accuracy"]), 3),
                    "learning_rate": float(f"{float(r['learning_rate']):.3g}"),
                }
            )
    return curve


def run_row(run: Path, row_id: str, what: str, command: str) -> dict:
    """The row of the finished run in `run` (metrics.json, config.json, history.csv)."""
    metrics = json.loads((run / METRICS_FILE).read_text())
    config = read_config_json(run)
    with (run / HISTORY_FILE).open() as f:
        history = list(csv.DictReader(f))
    options, versions = config["options"], config["versions"]
    return {
        "id": row_id,
        "what": what,
        "command": command,
        "date": config["created"].replace("+00:00", "Z")[:16] + "Z",
        **commit_fields(),
        "machine": {
            "cpu": cpu_model(),
            "flags": cpu_flags(),
            "cores": os.cpu_count(),
            "note": "KVM guest; 24 GiB; no GPU",
        },
        "versions": {
            "python": platform.python_version(),
            **{k: versions[k] for k in ("keras", "tensorflow", "numpy") if k in versions},
        },
        "model": options["model"],
        "preset": options["preset"],
        "data": JPEG_DATA,
        "seed": options["seed"],
        "backend": metrics["backend"]["name"],
        "precision": options["precision"],
        "jit": bool(options["jit"]),
        "epochs": metrics["epochs_run"],
        "parameters": metrics["parameters"],
        "macs_per_image": metrics["macs_per_image"],
        "test_images": metrics["test_samples"],
        "test_top1": round(metrics["test_top1"], 4),
        "test_top5": round(metrics["test_top5"], 4),
        "test_correct": round(metrics["test_top1"] * metrics["test_samples"]),
        "final_train_top1": round(float(history[-1]["accuracy"]), 3),
        "final_val_top1": round(float(history[-1]["val_accuracy"]), 3),
        "wall_time_s": round(metrics["wall_seconds"]),
        "time_budget_s": metrics.get("time_budget_seconds"),
        "images_seen": metrics.get("images_seen"),
        "curve": _curve(history),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--id", required=True)
    parser.add_argument("--what", required=True)
    parser.add_argument("--command", required=True)
    args = parser.parse_args(argv)
    print(json.dumps(run_row(args.run, args.id, args.what, args.command)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
