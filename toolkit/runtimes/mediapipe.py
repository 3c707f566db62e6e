"""The `mediapipe` runtime: a `.tflite` file in MediaPipe Tasks' `ImageClassifier`, the client
library Android, iOS and web apps classify images with, so its rows are what an app sees.

Each call hands the task one uint8 RGB frame (`mp.Image`) and reads every class's score: the
task's own preprocessing (resize, normalization from the file's metadata, int8 quantization) and
postprocessing (dequantize, sort) are inside the timed call. The task needs the TFLite Model
Metadata `toolkit export` writes into every `.tflite`; a file without it (another program's, or
a verify op graph) is refused in one line before the task is created.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from toolkit.common.errors import UsageError, first_line
from toolkit.common.native_logs import captured_native_stderr
from toolkit.runtimes.base import (
    PROBABILITIES,
    PreparedRun,
    RuntimeOptions,
    TensorSpec,
    only,
    run_images,
)

METADATA_NAME = "TFLITE_METADATA"  # the model metadata entry MediaPipe reads
FRAMES = "uint8"  # what the task takes: the pixels a camera gives
_OPTIONAL = ("tensorflow",)  # mediapipe imports it, when installed, only for doc decorators


class _Absent(importlib.abc.MetaPathFinder):
    """Makes the _OPTIONAL modules unimportable while mediapipe is first imported."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in _OPTIONAL:
            raise ModuleNotFoundError(f"No module named '{name}'", name=name)
        return None


@contextlib.contextmanager
def _without_optional_imports() -> Iterator[None]:
    """MediaPipe imports TensorFlow where it is installed (2.5 s, hundreds of MiB) for nothing
    a task runs; leave it out so a mediapipe row's load time and memory are MediaPipe's own."""
    if any(name in sys.modules for name in _OPTIONAL):
        yield
        return
    finder = _Absent()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


def _import_mediapipe():
    with _without_optional_imports(), captured_native_stderr():
        import mediapipe
        from mediapipe.tasks.python import BaseOptions, vision
    return mediapipe, BaseOptions, vision


def model_tensors(path: Path, data: bytes) -> tuple[tuple, tuple]:
    """(input shape, output shape) of a .tflite file's bytes, read with the TFLite schema
    MediaPipe ships; a UsageError when the bytes are no TFLite model or have no metadata."""
    _import_mediapipe()  # quietly, without TensorFlow: the schema module imports all of it
    from mediapipe.tasks.metadata import schema_py_generated as schema

    try:
        model = schema.Model.GetRootAs(data, 0)
        graph = model.Subgraphs(0)
        inputs = [graph.Tensors(graph.Inputs(i)) for i in range(graph.InputsLength())]
        outputs = [graph.Tensors(graph.Outputs(i)) for i in range(graph.OutputsLength())]
        metadata = {model.Metadata(i).Name().decode() for i in range(model.MetadataLength())}
    except Exception as exc:  # noqa: BLE001  (any parse failure: not a .tflite flatbuffer)
        raise UsageError(
            f"{path} is not a TFLite model ({first_line(exc)}): pass a .tflite file of "
            "`toolkit export`"
        ) from exc
    shape_in = tuple(int(d) for d in only(inputs, "input", path).ShapeAsNumpy())
    shape_out = tuple(int(d) for d in only(outputs, "output", path).ShapeAsNumpy())
    if METADATA_NAME not in metadata:
        raise UsageError(
            f"{path} has no TFLite Model Metadata, which MediaPipe needs (normalization, "
            "labels): export it with `toolkit export`, or run it with --runtime litert"
        )
    return shape_in, shape_out


def mediapipe_refuses(path: Path) -> str | None:
    """Why MediaPipe cannot take the file at `path` (no TFLite model, no metadata), found
    without creating the task; None when it can, or when MediaPipe is not installed."""
    if mediapipe_unavailable() is not None or not path.is_file():
        return None
    try:
        model_tensors(path, path.read_bytes())
    except UsageError as exc:
        return str(exc)
    return None


class MediaPipeSession:
    """A `.tflite` file in a MediaPipe ImageClassifier returning every class's score."""

    runtime = "mediapipe"

    def __init__(self, path: Path, classifier, mediapipe, shape_in: tuple, classes: int):
        self._classifier = classifier
        self._mp = mediapipe
        # closed with the session, or by `close()`: MediaPipe's task cannot close itself at
        # interpreter exit (its dispatcher's threads are gone by then and it prints a traceback)
        self._finalizer = weakref.finalize(self, classifier.close)
        self._finalizer.atexit = False
        self.input = TensorSpec("image", (1, *shape_in[1:]), FRAMES)
        self.output = TensorSpec(PROBABILITIES, (1, classes), "float32")
        self.providers = ["MediaPipe Tasks ImageClassifier (TFLite CPU, XNNPACK)"]

    def _call(self, frames: np.ndarray) -> np.ndarray:
        """One uint8 (1, H, W, 3) frame -> (1, classes) scores, by category index."""
        image = self._mp.Image(
            image_format=self._mp.ImageFormat.SRGB, data=np.ascontiguousarray(frames[0])
        )
        result = self._classifier.classify(image)
        scores = np.zeros(self.output.shape, np.float32)
        for category in result.classifications[0].categories:
            scores[0, category.index] = category.score
        return scores

    def close(self) -> None:
        """Close the task now (callers that keep a session until exit must)."""
        self._finalizer()

    def run(self, images: np.ndarray) -> np.ndarray:
        """(N, H, W, 3) 0-255 -> (N, classes) probabilities, one classify call per image."""
        return run_images(self._call, images, self.input, self.output)

    def bind(self, images: np.ndarray) -> PreparedRun:
        """`images` as uint8 frames once; `run()` is the task's calls, pre- and postprocessing
        included, as an app's `classify` is."""
        return PreparedRun(self._call, images, self.input, self.output)


def open_mediapipe(path: Path, options: RuntimeOptions) -> MediaPipeSession:
    """An ImageClassifier over `path` (max_results -1: every class); a file without TFLite
    Model Metadata is a one-line UsageError. MediaPipe takes no thread count: `options` unused."""
    mediapipe, base_options, vision = _import_mediapipe()
    data = path.read_bytes()
    shape_in, shape_out = model_tensors(path, data)
    settings = vision.ImageClassifierOptions(
        base_options=base_options(model_asset_buffer=data), max_results=-1
    )
    try:
        with captured_native_stderr():
            classifier = vision.ImageClassifier.create_from_options(settings)
    except Exception as exc:  # noqa: BLE001  (the task's own refusal, e.g. a wrong tensor type)
        raise UsageError(
            f"MediaPipe's ImageClassifier refuses {path} ({first_line(exc)}): export it again "
            "with `toolkit export`, or run it with --runtime litert"
        ) from exc
    return MediaPipeSession(path, classifier, mediapipe, shape_in, shape_out[-1])


def mediapipe_unavailable() -> str | None:
    """Why MediaPipe cannot run here, or None."""
    try:
        found = importlib.util.find_spec("mediapipe") is not None
    except ImportError:  # a finder that refuses it (a device's import policy)
        found = False
    return None if found else "mediapipe needs the mediapipe package: pip install mediapipe"
