"""What the JPEG q75 copy of CIFAR-10 costs, against the original pixels of the shared sample.

    python -m studies.jpeg_gap score RUN --originals ../shared/data/cifar10_train_sample.npz
    python -m studies.jpeg_gap pair --jpeg folder:PATH --originals SAMPLE.npz --out DIR
    python -m studies.jpeg_gap cross RUN_ORIGINAL RUN_JPEG --data DIR

`score`: a run trained on the JPEG copy (`--data folder:PATH` with train/ and test/) scored twice
on the same held-out images, as original pixels and as their JPEG files. Its validation split
(carved from the JPEG train/ folder, never trained on) holds about a fifth of the 5,085
originals of the shared sample.

`pair`: the originals that have a JPEG copy, and those copies, in the sample's order, as two npz
files like it, so the same recipe can be trained on each (`toolkit train --data npz:...`, the
same split of both) and the two compared. `cross`: each of those two runs on the test split of
each file.

Each original is paired with its JPEG file by nearest pixels within its class; a pair counts
only when the two are as close as a q75 re-encoding is (PSNR >= MIN_PSNR dB) and no other image
of the class comes near.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from toolkit import accuracy
from toolkit.data import load_data
from toolkit.runfiles.data import load_split
from toolkit.runfiles.folder import MODEL_FILE, open_run
from toolkit.runtimes import open_artifact, run_in_chunks

MIN_PSNR = 24.0  # dB: a q75 copy of a CIFAR-10 image is at about 30 dB (the data's README)
MARGIN = 6.0  # dB the best match must beat the second best by


def psnr(mse: np.ndarray) -> np.ndarray:
    """Peak signal-to-noise ratio in dB of a mean squared error on 0-255 pixels."""
    return 10.0 * np.log10(255.0**2 / np.maximum(mse, 1e-12))


def pair(originals: np.ndarray, labels: np.ndarray, jpegs: np.ndarray, jpeg_labels: np.ndarray):
    """(original index, JPEG index, PSNR) of each original whose JPEG copy is in `jpegs`."""
    pairs = []
    for c in np.unique(labels):
        mine, theirs = np.flatnonzero(labels == c), np.flatnonzero(jpeg_labels == c)
        a = originals[mine].reshape(len(mine), -1).astype(np.float64)
        b = jpegs[theirs].reshape(len(theirs), -1).astype(np.float64)
        mse = ((a**2).sum(1)[:, None] + (b**2).sum(1)[None] - 2.0 * a @ b.T) / a.shape[1]
        order = np.argsort(mse, axis=1)[:, :2]
        best, second = np.take_along_axis(mse, order, axis=1).T
        ok = (psnr(best) >= MIN_PSNR) & (psnr(best) - psnr(second) >= MARGIN)
        pairs += [(mine[i], theirs[order[i, 0]], psnr(best[i])) for i in np.flatnonzero(ok)]
    return pairs


def _originals(path: Path) -> tuple[np.ndarray, np.ndarray]:
    with np.load(path) as data:
        return data["x"], data["y"].astype(np.int64)


def write_pairs(jpeg_spec: str, originals_path: Path, out_dir: Path) -> None:
    """Write the paired originals and their JPEG copies, in the originals' order, as
    out_dir/original.npz and out_dir/jpeg.npz (x uint8, y), ready for `--data npz:...`."""
    out_dir.mkdir(parents=True, exist_ok=True)  # fail before decoding, not after
    originals, labels = _originals(originals_path)
    data = load_data(jpeg_spec)
    jpegs = np.concatenate([data.x_train, data.x_val])
    jpeg_labels = np.concatenate([data.y_train, data.y_val])
    pairs = sorted(pair(originals, labels, jpegs, jpeg_labels))
    o_idx, j_idx, psnrs = (np.array(v) for v in zip(*pairs, strict=True))
    y = labels[o_idx].astype(np.uint8)
    for name, x in (("original", originals[o_idx]), ("jpeg", jpegs[j_idx])):
        tmp = out_dir / f"{name}.tmp.npz"
        np.savez(tmp, x=x, y=y)
        tmp.replace(out_dir / f"{name}.npz")
    print(f"{out_dir}: original.npz and jpeg.npz, {len(pairs)} of {len(originals)} originals "
          f"paired; PSNR median {np.median(psnrs):.1f} dB, min {psnrs.min():.1f} dB")  # fmt: skip


def score(run_dir: Path, originals_path: Path, batch: int) -> None:
    """Print the run's top-1 on the validation originals and on their JPEG files."""
    run = open_run(run_dir)
    jpegs, jpeg_labels, spec = load_split(run, "val")
    originals, labels = _originals(originals_path)
    pairs = pair(originals, labels, jpegs, jpeg_labels)
    if not pairs:
        raise SystemExit(f"no original of {originals_path} is in the validation split of {spec}")
    o_idx, j_idx, psnrs = (np.array(v) for v in zip(*pairs, strict=True))
    model = open_artifact(run.path / MODEL_FILE)
    truth = labels[o_idx]
    on_original = run_in_chunks(model.run, originals[o_idx].astype(np.float32), batch)
    on_jpeg = run_in_chunks(model.run, jpegs[j_idx], batch)
    right_o, right_j = on_original.argmax(1) == truth, on_jpeg.argmax(1) == truth
    print(f"run {run.path}, data {spec}: {len(pairs)} originals paired with validation JPEGs")
    print(f"PSNR of the pairs: median {np.median(psnrs):.1f} dB, min {psnrs.min():.1f} dB\n")
    print("| pixels | top-1 |")
    print("|---|---:|")
    print(f"| original | {accuracy.top1(on_original, truth):.2%} |")
    print(f"| JPEG q75 copy | {accuracy.top1(on_jpeg, truth):.2%} |")
    agree = np.mean(on_original.argmax(1) == on_jpeg.argmax(1))
    only_o, only_j = int(np.sum(right_o & ~right_j)), int(np.sum(right_j & ~right_o))
    print(
        f"\ntop-1 agreement {agree:.2%}; right only on the original: {only_o}, "
        f"only on the JPEG: {only_j}"
    )


def cross(runs: list[Path], pairs_dir: Path, batch: int) -> None:
    """Print the top-1 of each run on the test split of original.npz and of jpeg.npz."""
    names = ("original", "jpeg")
    print("| trained on | test: original pixels | test: JPEG q75 copy |")
    print("|---|---:|---:|")
    for run_dir in runs:
        run = open_run(run_dir)
        model = open_artifact(run.path / MODEL_FILE)
        cells = []
        for name in names:
            images, labels, _ = load_split(run, "test", f"npz:{pairs_dir / name}.npz")
            logits = run_in_chunks(model.run, images, batch)
            right = int(np.sum(logits.argmax(1) == labels))
            cells.append(f"{right / len(labels):.2%} ({right} of {len(labels)})")
        print(f"| {run.path.name} | {' | '.join(cells)} |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    scoring = commands.add_parser("score", help="a JPEG-trained run on originals vs JPEGs")
    scoring.add_argument("run", type=Path)
    scoring.add_argument("--batch", type=int, default=256)
    pairing = commands.add_parser("pair", help="write the JPEG copies of the originals")
    pairing.add_argument("--jpeg", required=True, help="data spec of the JPEG copy")
    pairing.add_argument("--out", type=Path, required=True, help="folder for the two npz")
    crossing = commands.add_parser("cross", help="runs trained on each file, on both")
    crossing.add_argument("runs", type=Path, nargs=2)
    crossing.add_argument("--data", type=Path, required=True, help="the folder `pair` wrote")
    crossing.add_argument("--batch", type=int, default=256)
    for sub in (scoring, pairing):
        sub.add_argument("--originals", type=Path, required=True, help="npz: x uint8, y")
    args = parser.parse_args(argv)
    if args.command == "score":
        score(args.run, args.originals, args.batch)
    elif args.command == "cross":
        cross(args.runs, args.data, args.batch)
    else:
        write_pairs(args.jpeg, args.originals, args.out)


if __name__ == "__main__":
    main()
