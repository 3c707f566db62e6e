"""Where a training step's time goes: the host-fed input path against the device-resident one,
and the step alone, at one or more batch sizes, on the Keras backend this runs on.

    python -m studies.input_path --model vit-lsa [--preset cpu60] [--data shapes:2048]
        [--batches 128[,512...]] [--steps 20] [--warmup 3] [--rounds 3] [--jit]
        [--precision float32] [--json FILE]

Three ways to feed the same model, recipe and optimizer (`toolkit train`'s own code):

* "host": `toolkit train --device-data off`: tf.data on TensorFlow (augmenting and mixing in
  its threads), NumPy batches from a PyDataset elsewhere (Mixup/CutMix in NumPy, the rest of
  the augmentation in the step). Every batch's float32 pixels cross from the host.
* "device": `--device-data on`: the uint8 split uploaded once, each step fed its indices and
  gathering, augmenting and mixing on the device (toolkit.training.device_data).
* "step": the device path with augmentation and mixing off: the model's step and the gather,
  the ceiling the input path can reach.

host - device is what feeding from the host costs; device - step what the augmentation costs
in the step. Each (path, batch) is built and compiled once; then `rounds` interleaved rounds
each run `warmup` steps, synchronise, and time `steps` steps to a final synchronisation (no
host sync between the timed steps, as in training). images/s = batch x steps / seconds; the
median round is reported. On a GPU (`studies.gpu_rows --rows input-path`) the same code runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from studies.provenance import commit_fields  # noqa: E402
from toolkit.bench.machine import describe  # noqa: E402
from toolkit.common.atomic import check_writable, write_json  # noqa: E402
from toolkit.common.errors import UsageError  # noqa: E402
from toolkit.data.augment import Augmentation  # noqa: E402
from toolkit.data.specs import load_data  # noqa: E402
from toolkit.models import MODELS, channel_stats, get_preset  # noqa: E402
from toolkit.training.train import compile_model, device_resident, host_fed  # noqa: E402

PATHS = ("host", "device", "step")
RECORD_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_int8",
                "amx_bf16")  # fmt: skip


class _Sync(keras.callbacks.Callback):
    """Times the steps after `warmup`: a synchronisation (the loss read) at the warmup's last
    step and at the end, none between."""

    def __init__(self, warmup: int) -> None:
        super().__init__()
        self.warmup, self.start, self.end = warmup, 0.0, 0.0

    def on_train_batch_end(self, batch, logs=None) -> None:
        if batch == self.warmup - 1:
            float(logs["loss"])
            self.start = time.perf_counter()

    def on_train_end(self, logs=None) -> None:
        float(keras.ops.convert_to_numpy(self.model.optimizer.iterations))
        self.end = time.perf_counter()


def _build(path: str, preset, data, norm, jit: bool):
    """(batches, what fit trains) of `path`."""
    if path == "host":
        batches, _, fit_model = host_fed(preset, data, norm, 0)
    elif path == "device":
        batches, _, fit_model = device_resident(preset, data, norm, 0)
    else:
        bare = replace(
            preset.train, augmentation=Augmentation(), rand_augment=None, mixup=0.0, cutmix=0.0
        )
        batches, _, fit_model = device_resident(replace(preset, train=bare), data, norm, 0)
    compile_model(fit_model, preset, len(batches), jit)
    return batches, fit_model


def _segment(batches, fit_model, warmup: int, steps: int) -> float:
    """Seconds of `steps` timed steps after `warmup` untimed ones."""
    sync = _Sync(warmup)
    fit_model.fit(
        batches,
        epochs=1,
        steps_per_epoch=warmup + steps,
        callbacks=[sync],
        shuffle=False,
        verbose=0,
    )
    return sync.end - sync.start


def measure(args: argparse.Namespace) -> dict:
    """The report: per (path, batch), images/s of every round and their median."""
    keras.utils.set_random_seed(0)
    keras.mixed_precision.set_global_policy(args.precision)
    preset = get_preset(args.model, args.preset)
    data = load_data(args.data, seed=0, val_fraction=preset.train.val_fraction)
    norm = None
    if MODELS[preset.model].preprocessing == "normalize":
        norm = channel_stats(data.x_train[:1000].astype(np.float32))
    rows = []
    for batch in args.batches:
        sized = replace(preset, train=replace(preset.train, batch_size=batch))
        built = {p: _build(p, sized, data, norm, args.jit) for p in args.paths}
        for batches, fit_model in built.values():  # compile and first steps, untimed
            _segment(batches, fit_model, 1, 1)
        rounds: dict[str, list[float]] = {p: [] for p in args.paths}
        for _ in range(args.rounds):
            for p, (batches, fit_model) in built.items():
                seconds = _segment(batches, fit_model, args.warmup, args.steps)
                rounds[p].append(round(batch * args.steps / seconds, 1))
        for p in args.paths:
            rows.append(
                {
                    "path": p,
                    "batch": batch,
                    "images_per_s": float(np.median(rounds[p])),
                    "rounds_images_per_s": rounds[p],
                }
            )
    machine = describe()
    versions = machine.pop("versions")
    for name in ("jax", "jaxlib"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    machine["flags"] = [f for f in machine.pop("cpu_flags") if f in RECORD_FLAGS]
    return {
        "id": args.id,
        "what": f"{args.model} {args.preset}: images/s of the host-fed and device-resident "
        "input paths and of the step alone",
        "command": "python -m studies.input_path " + shlex.join(sys.argv[1:]),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        **commit_fields(),
        "machine": machine,
        "versions": versions,
        "model": args.model,
        "preset": args.preset,
        "backend": keras.backend.backend(),
        "precision": args.precision,
        "jit": args.jit,
        "data": data.name,
        "steps": args.steps,
        "warmup": args.warmup,
        "rounds": args.rounds,
        "rows": rows,
    }


def markdown(report: dict) -> str:
    """The report's table: images/s per path and batch, and each against the host path."""
    lines = [
        f"{report['model']} {report['preset']} on {report['backend']} ({report['precision']}"
        f"{', jit' if report['jit'] else ''}), {report['data']}",
        "",
        "| batch | path | images/s | vs host | rounds |",
        "|---:|---|---:|---:|---|",
    ]
    host = {r["batch"]: r["images_per_s"] for r in report["rows"] if r["path"] == "host"}
    for r in report["rows"]:
        ratio = f"{r['images_per_s'] / host[r['batch']]:.2f}x" if r["batch"] in host else "-"
        rounds = ", ".join(f"{v:g}" for v in r["rounds_images_per_s"])
        lines.append(f"| {r['batch']} | {r['path']} | {r['images_per_s']:g} | {ratio} | {rounds} |")
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(prog="python -m studies.input_path", description=__doc__)
    p.add_argument("--model", required=True, choices=sorted(MODELS))
    p.add_argument("--preset", default="cpu60")
    p.add_argument("--data", default="shapes:2048")
    p.add_argument("--batches", default="128", help="comma-separated batch sizes")
    p.add_argument("--paths", default=",".join(PATHS), help="of: " + ", ".join(PATHS))
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--jit", action="store_true", help="compile the step on TensorFlow too")
    p.add_argument("--precision", default="float32")
    p.add_argument("--json", type=Path, help="write the report (a records row) here")
    p.add_argument("--id", default="input-path", help="the row's id in records/input_path.jsonl")
    args = p.parse_args(argv)
    args.batches = [int(b) for b in args.batches.split(",")]
    args.paths = [x for x in args.paths.split(",") if x]
    unknown = sorted(set(args.paths) - set(PATHS))
    if unknown:
        p.error(f"unknown --paths {', '.join(unknown)}: choose from {', '.join(PATHS)}")
    if args.json is not None:  # before minutes of training
        try:
            check_writable(args.json, "--json")
        except UsageError as exc:
            p.error(str(exc))
    return args


def main(argv: list[str] | None = None) -> int:
    """Measure, print the table, write the JSON report when asked."""
    args = parse_args(argv)
    report = measure(args)
    print(markdown(report), end="")
    if args.json is not None:
        write_json(args.json, report)
    print(json.dumps({"rows": report["rows"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
