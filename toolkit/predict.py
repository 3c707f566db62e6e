"""`toolkit predict`: top-k classes of image files from a .keras, .onnx, .ort or .tflite file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from toolkit.common.argtypes import path_arg
from toolkit.common.errors import UsageError
from toolkit.runfiles import EXPORT_DIR, MANIFEST_FILE, Manifest, find_manifest, has_config
from toolkit.runfiles.classnames import class_names_of
from toolkit.runfiles.folder import MODEL_FILE, open_run
from toolkit.runfiles.hashes import check_unmodified, modified_files
from toolkit.runtimes import RUNTIMES, TensorSpec, open_artifact
from toolkit.runtimes.base import close_session, gives_probabilities
from toolkit.runtimes.keras_runtime import KerasSession

BATCH = 64  # images per run call, to bound memory on long file lists
KERAS_SUFFIX = ".keras"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of `toolkit predict`."""
    parser.add_argument(
        "artifact", type=path_arg, help="model file: .keras, .onnx, .ort or .tflite"
    )
    parser.add_argument("images", type=path_arg, nargs="+", help="PNG/JPEG files of any size")
    parser.add_argument("--top-k", type=int, default=5, help="classes per image (default 5)")
    parser.add_argument(
        "--allow-modified",
        action="store_true",
        help="run a file changed after export (its sha256 is not the one model.json beside it "
        "records) as it is, with a warning; without it, it is refused",
    )
    parser.add_argument(
        "--runtime",
        help=f"one of {', '.join(RUNTIMES)} (default: by suffix, .onnx and .ort -> ort-cpu, "
        ".tflite -> litert; mediapipe runs a .tflite as an app's ImageClassifier does)",
    )


def rewrite_command(folder: Path, manifest: Manifest | None, fmt: str) -> str:
    """The `toolkit export` command that writes format `fmt` into `folder` (the artifact's folder
    as given) again: from the run folder it sits in (RUN/export), else from the run model.json
    names, with --out FOLDER."""
    run_dir = folder.parent if folder.name else folder.absolute().parent  # "." given: its parent
    if folder.absolute().name == EXPORT_DIR and has_config(run_dir):
        return f"toolkit export {run_dir} --format {fmt}"
    if manifest is None:
        return f"toolkit export RUN --format {fmt} --out {folder}"
    return manifest.export_command(folder, fmt)


def check_recorded(artifact: Path, allow_modified: bool) -> None:
    """Refuse (or with allow_modified, warn of) an artifact changed after export: the model.json
    beside it records another sha256 for it, or does not record it at all (a file put in an
    export folder by hand, or a model.json emptied). A file with no model.json beside it is not
    checked; an unreadable model.json is refused, as bench and verify refuse it."""
    folder = artifact.parent
    manifest = find_manifest(folder, f"export again (`{rewrite_command(folder, None, 'all')}`)")
    if manifest is None or artifact.suffix == KERAS_SUFFIX:  # a run's model.keras: check_run_model
        return
    formats = manifest.formats_of(artifact.name)
    if not formats:
        what = f"{artifact} is not among the files {MANIFEST_FILE} beside it records"
        if not allow_modified:
            raise UsageError(
                f"{what}, so its sha256 cannot be checked: export it again "
                f"(`{rewrite_command(folder, manifest, 'all')}`), or pass --allow-modified to "
                "use it as it is"
            )
        print(f"toolkit: warning: {what}: using it as it is (--allow-modified)", file=sys.stderr)
        return
    changed = modified_files(folder, manifest, formats)
    check_unmodified(changed, allow_modified, lambda fmt: rewrite_command(folder, manifest, fmt))


def check_run_model(artifact: Path, session: KerasSession) -> None:
    """RUN/model.keras is run only when it is the model the run's config.json describes, as
    `toolkit eval` and `toolkit export` require."""
    if artifact.name == MODEL_FILE and has_config(artifact.parent):
        from toolkit.runmodel import check_model

        check_model(open_run(artifact.parent), session.model)


def image_size(spec: TensorSpec, artifact: Path) -> int:
    """The square H = W of an NHWC RGB input, which load_image resizes to."""
    shape = spec.shape
    if len(shape) != 4 or shape[3] != 3 or shape[1] is None or shape[1] != shape[2]:
        raise UsageError(
            f"{artifact} takes input {shape}: predict needs square NHWC RGB images "
            "(batch, size, size, 3) of a fixed size"
        )
    return shape[1]


def softmax(logits: np.ndarray) -> np.ndarray:
    """Row-wise softmax, in float64 for stability."""
    z = logits.astype(np.float64) - logits.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def format_top_k(probabilities: np.ndarray, names: list[str], k: int) -> str:
    """'name p, name p, ...' for the k most probable classes (ties: lower index first)."""
    order = np.argsort(-probabilities, kind="stable")[:k]
    return ", ".join(f"{names[i]} {probabilities[i]:.2f}" for i in order)


def run(args: argparse.Namespace) -> int:
    """Print, per image, its top-k classes with their probabilities."""
    from toolkit.data.images import load_image

    if args.top_k < 1:
        raise UsageError(f"--top-k must be at least 1, not {args.top_k}")
    check_recorded(args.artifact, args.allow_modified)
    session = open_artifact(args.artifact, args.runtime)
    try:
        if args.artifact.suffix == KERAS_SUFFIX:
            check_run_model(args.artifact, session)
        size = image_size(session.input, args.artifact)
        images = np.stack([load_image(path, size) for path in args.images])
        outputs = np.concatenate(
            [
                session.run(images[i : i + BATCH].astype(np.float32))
                for i in range(0, len(images), BATCH)
            ]
        )
    finally:
        close_session(session)
    names = class_names_of(args.artifact, outputs.shape[-1])
    # the .tflite app files give probabilities already; the others give logits
    scores = outputs if gives_probabilities(session.output) else softmax(outputs)
    for path, probabilities in zip(args.images, scores, strict=True):
        print(f"{path}: {format_top_k(probabilities, names, args.top_k)}")
    return 0
