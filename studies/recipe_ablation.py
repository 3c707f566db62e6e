"""Each training-recipe piece on and off at a fixed budget: its effect on test top-1 and images/s.

    python -m studies.recipe_ablation --model shiftvit --preset cpu60 --data folder:DIR
        [--epochs N] [--pieces label_smoothing,ema,mixing,rand_augment,repeat_augment]
        [--seed S] [--out DIR] [--json FILE]

It trains the preset as it is, then once per piece with only that piece switched the other way
(on where the preset has it off, off where it has it on), each `toolkit train --jit` for the same
number of epochs in its own process, one after the other. Per run: test top-1, the median
epoch's images/s (the first epoch compiles and is left out) and CPU seconds per image (from the
child's rusage: other load on the machine disturbs it far less than wall time). A fixed number
of epochs is a fixed budget of images seen; a piece that slows the step costs time as well,
which the images/s column shows. The Markdown table goes to stdout, the whole report to --json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from studies.provenance import header_lines, publish
from toolkit.bench.machine import cpu_flags, cpu_model
from toolkit.common.versions import versions
from toolkit.runfiles import read_config


@dataclass(frozen=True)
class Piece:
    """One recipe piece: the `--recipe` values that switch it on and off."""

    name: str
    on: str
    off: str

    def is_on(self, train: dict) -> bool:
        """Whether the preset's recipe (config.json's `train`) has this piece on."""
        return PIECE_STATE[self.name](train)


PIECES: dict[str, Piece] = {
    p.name: p
    for p in (
        Piece("label_smoothing", on="label_smoothing=0.1", off="label_smoothing=0"),
        Piece("ema", on="ema=0.999", off="ema=none"),
        Piece("mixing", on="mixup=0.8,cutmix=1.0,mix_prob=0.5", off="mixup=0,cutmix=0"),
        Piece("rand_augment", on="rand_augment=2:0.5", off="rand_augment=none"),
        Piece("repeat_augment", on="repeat_augment=3", off="repeat_augment=1"),
    )
}
# how each piece reads off a recipe (config.json's preset.train)
PIECE_STATE = {
    "label_smoothing": lambda t: t["label_smoothing"] > 0,
    "ema": lambda t: t["ema"] is not None,
    "mixing": lambda t: (t["mixup"] > 0 or t["cutmix"] > 0) and t["mix_prob"] > 0,
    "rand_augment": lambda t: t["rand_augment"] is not None,
    "repeat_augment": lambda t: t["repeat_augment"] > 1,
}
EPOCH_LINE = re.compile(r"^(\d+)/(\d+) - (\d+)s - ")


@dataclass
class Trained:
    """One training of the ablation."""

    label: str
    recipe: str | None
    test_top1: float
    epoch_seconds: list[int]
    steps_per_epoch: int
    cpu_seconds: float
    images: int  # training images seen (all epochs)

    def images_per_s(self) -> float:
        timed = self.epoch_seconds[1:] or self.epoch_seconds
        return self.images / len(self.epoch_seconds) / statistics.median(timed)


def train(args: argparse.Namespace, label: str, recipe: str | None, out: Path) -> Trained:
    """`toolkit train` once in a child process; its figures from the log and metrics.json."""
    command = [
        *(sys.executable, "-m", "toolkit.cli", "train"),
        *("--model", args.model, "--preset", args.preset, "--data", args.data),
        *("--epochs", str(args.epochs), "--seed", str(args.seed), "--jit", "--out", str(out)),
        *(("--recipe", recipe) if recipe else ()),
    ]
    print(f"[{label}] {shlex.join(command)}", file=sys.stderr, flush=True)
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seconds, steps = [], 0
    for line in child.stdout:
        match = EPOCH_LINE.match(line)
        if match:
            steps, seconds = int(match.group(2)), [*seconds, int(match.group(3))]
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"[{label}] toolkit train failed: see {out}")
    config = read_config(out)
    metrics = json.loads((out / "metrics.json").read_text())
    batch = config.train_recipe["batch_size"]
    return Trained(
        label=label,
        recipe=recipe,
        test_top1=metrics["test_top1"],
        epoch_seconds=seconds,
        steps_per_epoch=steps,
        cpu_seconds=usage.ru_utime + usage.ru_stime,
        images=steps * batch * len(seconds),
    )


def markdown(report: dict) -> str:
    """The report as a Markdown table, the preset's row first."""
    lines = [
        f"# Recipe ablation: {report['model']} `{report['preset']}`, {report['epochs']} epochs",
        "",
        *header_lines(report),
        "",
        "| run | --recipe | test top-1 | change (points) | images/s | vs preset | CPU ms/image |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in report["rows"]:
        lines.append(
            f"| {row['label']} | `{row['recipe'] or '-'}` | {100 * row['test_top1']:.2f}% | "
            f"{row['change_points']:+.2f} | {row['images_per_s']:.0f} | "
            f"{row['speed_vs_preset']:.2f}x | {row['cpu_ms_per_image']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="shiftvit")
    parser.add_argument("--preset", default="cpu60")
    parser.add_argument("--data", required=True, help="a `toolkit train --data` spec")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--pieces", default=",".join(PIECES), help="comma-separated")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="where the runs go (default: a temp folder)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    names = [n for n in args.pieces.split(",") if n]
    unknown = sorted(set(names) - set(PIECES))
    if unknown:
        parser.error(f"unknown pieces {unknown}: choose from {', '.join(PIECES)}")
    out = args.out or Path(tempfile.mkdtemp(prefix="ablation-"))
    out.mkdir(parents=True, exist_ok=True)
    report = {
        "command": shlex.join(["python", "-m", "studies.recipe_ablation", *(argv or sys.argv[1:])]),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpu": cpu_model(),
            "cpu_flags": cpu_flags(),
            "cores": os.cpu_count(),
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "os": platform.platform(),
            "versions": versions(),
        },
        "model": args.model,
        "preset": args.preset,
        "data": args.data,
        "epochs": args.epochs,
        "seed": args.seed,
    }
    runs = [train(args, "preset", None, out / "preset")]
    preset_train = dict(read_config(out / "preset").train_recipe)
    for name in names:
        piece = PIECES[name]
        on = piece.is_on(preset_train)
        label = f"{name} {'off' if on else 'on'}"
        runs.append(train(args, label, piece.off if on else piece.on, out / name))
    base = runs[0]
    report["rows"] = [
        {
            "label": r.label,
            "recipe": r.recipe,
            "test_top1": r.test_top1,
            "change_points": 100 * (r.test_top1 - base.test_top1),
            "images_per_s": r.images_per_s(),
            "speed_vs_preset": r.images_per_s() / base.images_per_s(),
            "cpu_ms_per_image": 1000 * r.cpu_seconds / r.images,
            "epoch_seconds": r.epoch_seconds,
        }
        for r in runs
    ]
    return publish(report, markdown(report), args.json)


if __name__ == "__main__":
    raise SystemExit(main())
