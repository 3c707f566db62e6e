"""Streamed `folder:` data: peak memory against folder size, loader against step throughput,
and the CIFAR-10 epoch time streamed against in memory.

python -m studies.stream_memory [--sizes 10000 100000] [--steps 20] [--json FILE]

1. Generates JPEG folders of `--sizes` images at 224 px (10 classes; 2,000 distinct smooth
   random images, written under as many names as asked: decoding costs the same) under
   `--root` (default /tmp/stream-bench, deleted at the end unless --keep), then trains the
   tiny ShiftViT preset on each, streamed, for `--steps` steps in a child process and reads
   the child's peak RSS (os.wait4: its own and its threads'). The 10,000 folder in memory too,
   as the reference the streamed path saves.
2. The loader alone (the training batches of the CIFAR-10 JPEG copy at 32 px, streamed, decoded
   by `--workers` threads as the PyDataset's pool does) against the seed preset's step on
   in-memory images of the same size: images/s each.
3. One epoch (the second: the first compiles) of the tiny preset (or `--epoch-preset`) on the
   CIFAR-10 JPEG copy (/work/shared/data/cifar10-jpeg.tar.gz, unpacked under --root), streamed
   and in memory:
   wall and process CPU seconds, `--repeats` times, the modes interleaved, each run with the
   load average at its start (the machine may be shared). `--parts epoch` runs only this.
Children run with KERAS_BACKEND=--backend (default jax); the CIFAR epoch on each of
`--epoch-backends`.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CIFAR_TAR = ROOT.parent / "shared" / "data" / "cifar10-jpeg.tar.gz"
CLASSES = 10
DISTINCT = 2000
SIZE = 224


def _jpegs(count: int, seed: int = 0) -> list[bytes]:
    """`count` JPEG-encoded 224 px images: upsampled 7x7 noise plus a rectangle, quality 85."""
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        small = Image.fromarray(rng.integers(0, 256, (7, 7, 3), np.uint8))
        image = small.resize((SIZE, SIZE), Image.Resampling.BILINEAR)
        x0, y0 = rng.integers(0, SIZE // 2, 2)
        ImageDraw.Draw(image).rectangle(
            [x0, y0, x0 + rng.integers(20, SIZE // 2), y0 + rng.integers(20, SIZE // 2)],
            fill=tuple(int(c) for c in rng.integers(0, 256, 3)),
        )
        buffer = io.BytesIO()
        image.save(buffer, "JPEG", quality=85)
        out.append(buffer.getvalue())
    return out


def generate(folder: Path, count: int, jpegs: list[bytes]) -> float:
    """Write `count` JPEGs into folder/class_k/; seconds taken."""
    start = time.perf_counter()
    for k in range(CLASSES):
        (folder / f"class_{k}").mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (folder / f"class_{i % CLASSES}" / f"{i:06d}.jpg").write_bytes(jpegs[i % len(jpegs)])
    return time.perf_counter() - start


def _child(args: list[str], backend: str, cache: Path) -> tuple[dict, int]:
    """Run this module's --child ARGS; (its JSON result, its peak RSS in bytes)."""
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "2"}
    env["TOOLKIT_CACHE_DIR"] = str(cache)
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.Popen(
        [sys.executable, "-m", "studies.stream_memory", "--child", *args],
        stdout=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"child {args} failed with exit {proc.returncode}")
    result = json.loads(out.decode().strip().splitlines()[-1])
    return result, usage.ru_maxrss * 1024  # kilobytes on Linux


class _EpochTimes:
    """A keras callback recording each epoch's wall seconds and this process's CPU seconds
    (all its threads: less swayed than wall time by other work on a shared machine)."""

    def __init__(self) -> None:
        import keras

        class Timer(keras.callbacks.Callback):
            def __init__(self, times: list[float]) -> None:
                super().__init__()
                self.times = times

            def on_epoch_begin(self, epoch, logs=None):
                self.start = time.perf_counter(), time.process_time()

            def on_epoch_end(self, epoch, logs=None):
                wall, cpu = self.start
                self.times.append((time.perf_counter() - wall, time.process_time() - cpu))

        self.times: list[tuple[float, float]] = []
        self.callback = Timer(self.times)


def child_fit(spec: str, preset: str, epochs: int, steps: int | None, batch: int | None) -> dict:
    """Train `preset` ShiftViT on `spec` as `toolkit train` does (load, normalize statistics,
    pipeline, in-step or pipeline augmentation), `epochs` epochs of `steps` steps (all: None)."""
    import keras

    from toolkit.data import load_data, stats_images, train_dataset, training_model
    from toolkit.data.stream import is_streamed
    from toolkit.models import build_model, channel_stats, get_preset
    from toolkit.models.registry import MODELS
    from toolkit.training.train import compile_model

    start = time.perf_counter()
    data = load_data(spec, seed=0)
    load_s = time.perf_counter() - start
    recipe = get_preset("shiftvit", preset)
    batch = batch or recipe.train.batch_size
    keras.utils.set_random_seed(0)
    norm = None
    if MODELS["shiftvit"].preprocessing == "normalize":
        norm = channel_stats(stats_images(data.x_train))
    ds = train_dataset(data.x_train, data.y_train, batch, recipe.train.augmentation, 0)
    model = build_model(recipe, data.image_shape, data.num_classes, norm_stats=norm)
    fit_model = training_model(model, recipe.train.augmentation, 0, x=data.x_train)
    steps_per_epoch = steps or len(ds)
    compile_model(fit_model, recipe, steps_per_epoch, jit=False)
    timer = _EpochTimes()
    fit_model.fit(
        ds,
        epochs=epochs,
        steps_per_epoch=steps,
        callbacks=[timer.callback],
        shuffle=False,
        verbose=0,
    )
    return {
        "streamed": is_streamed(data.x_train),
        "train_images": len(data.y_train),
        "load_s": round(load_s, 2),
        "epoch_s": [round(wall, 2) for wall, _ in timer.times],
        "epoch_cpu_s": [round(cpu, 2) for _, cpu in timer.times],
        "images_per_epoch": steps_per_epoch * batch,
        "step_images_per_s": round(steps_per_epoch * batch / timer.times[-1][0], 1),
        "backend": keras.backend.backend(),
    }


def child_loader(spec: str, batch: int, workers: int, batches: int) -> dict:
    """Images/s of `batches` training batches of `spec` gathered by `workers` threads."""
    from toolkit.data import load_data
    from toolkit.data.array_pipeline import ArrayBatches

    data = load_data(spec, seed=0)
    ds = ArrayBatches(data.x_train, data.y_train, batch, shuffle_seed=0)
    count = min(batches, len(ds))
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for _ in pool.map(ds.__getitem__, range(count)):
            pass
    seconds = time.perf_counter() - start
    return {"workers": workers, "batch": batch, "images_per_s": round(count * batch / seconds, 1)}


def _cifar(root: Path) -> Path:
    """The CIFAR-10 JPEG copy unpacked under `root`."""
    if not (root / "cifar10-jpeg").is_dir():
        with tarfile.open(CIFAR_TAR) as tar:
            tar.extractall(root, filter="data")
    return root / "cifar10-jpeg"


def _gb(n: int) -> float:
    return round(n / 1e9, 3)


def run(args: argparse.Namespace) -> dict:
    """Every measurement of the module docstring, as one report."""
    root, cache = args.root, args.root / "cache"
    root.mkdir(parents=True, exist_ok=True)
    report: dict = {"rss": [], "loader": [], "step": [], "epoch": []}
    report["load_average"] = [round(v, 2) for v in os.getloadavg()]
    jpegs = _jpegs(DISTINCT)
    for count in args.sizes if "rss" in args.parts else ():
        folder = root / f"jpeg{count}"
        made = generate(folder, count, jpegs)
        disk = sum(p.stat().st_size for p in folder.rglob("*.jpg"))
        modes = (
            ("stream", "memory") if count == min(args.sizes) and args.memory_ref else ("stream",)
        )
        for mode in modes:
            spec = f"folder:{folder}@{SIZE},{mode}"
            result, rss = _child(
                ["fit", spec, "tiny", "1", str(args.steps), str(args.batch)], args.backend, cache
            )
            row = {"images": count, "mode": mode, "peak_rss_gb": _gb(rss), "disk_gb": _gb(disk)}
            row.update(generate_s=round(made, 1), **result)
            report["rss"].append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
        shutil.rmtree(folder)
        shutil.rmtree(cache, ignore_errors=True)
    cifar = _cifar(root)
    seed_batch = 256
    for workers in args.workers if "loader" in args.parts else ():
        result, _ = _child(
            ["loader", f"folder:{cifar}@32,stream", str(seed_batch), str(workers), "60"],
            args.backend,
            cache,
        )
        report["loader"].append(result)
        print(json.dumps(result), file=sys.stderr, flush=True)
    if "loader" in args.parts:
        result, _ = _child(
            ["fit", f"folder:{cifar}@32,memory", "seed", "2", str(args.seed_steps), "0"],
            args.backend,
            cache,
        )
        report["step"].append({"preset": "seed", **result})
        print(json.dumps(result), file=sys.stderr, flush=True)
    epochs = [
        (repeat, backend, mode)
        for repeat in range(args.repeats)
        for backend in args.epoch_backends
        for mode in ("memory", "stream")
    ]
    for repeat, backend, mode in epochs if "epoch" in args.parts else ():
        load = [round(v, 2) for v in os.getloadavg()]
        steps = str(args.epoch_steps)
        result, rss = _child(
            ["fit", f"folder:{cifar}@32,{mode}", args.epoch_preset, "2", steps, "0"],
            backend,
            cache,
        )
        row = {"mode": mode, "repeat": repeat, "load_average": load, "peak_rss_gb": _gb(rss)}
        row["preset"] = args.epoch_preset
        row.update(result)
        report["epoch"].append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    if not args.keep:
        shutil.rmtree(root)
    return report


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        kind, *rest = argv[1:]
        if kind == "fit":
            spec, preset, epochs, steps, batch = rest
            result = child_fit(spec, preset, int(epochs), int(steps) or None, int(batch) or None)
        else:
            spec, batch, workers, batches = rest
            result = child_loader(spec, int(batch), int(workers), int(batches))
        print(json.dumps(result), flush=True)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--seed-steps", type=int, default=6)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--backend", default="jax")
    parser.add_argument("--epoch-backends", nargs="+", default=["jax", "tensorflow"])
    parser.add_argument("--no-memory-ref", dest="memory_ref", action="store_false")
    parser.add_argument("--root", type=Path, default=Path("/tmp/stream-bench"))
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--parts", nargs="+", default=["rss", "loader", "epoch"])
    parser.add_argument("--epoch-steps", type=int, default=0, help="0: whole epochs")
    parser.add_argument(
        "--epoch-preset",
        default="tiny",
        help="ShiftViT preset of the epoch part (tiny: the fastest step, the loader's worst case)",
    )
    parser.add_argument(
        "--repeats", type=int, default=1, help="epoch part: runs of each backend and mode"
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    from toolkit.bench.machine import describe

    date = datetime.now(UTC).isoformat(timespec="seconds")
    report = {
        "command": "python -m studies.stream_memory " + " ".join(argv),
        "date": date,
        "machine": describe(),
        **run(args),
    }
    text = json.dumps(report, indent=1)
    if args.json:
        args.json.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
