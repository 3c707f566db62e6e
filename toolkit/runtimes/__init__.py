"""Runtime adapters (Keras, LiteRT, MediaPipe Tasks, ONNX Runtime, and the web libraries in
headless Chromium) behind one interface, and `open_artifact`."""

from __future__ import annotations

import difflib
from pathlib import Path

from toolkit.common.errors import UsageError, first_line
from toolkit.runtimes.base import (
    Runtime,
    RuntimeOptions,
    RuntimeUnavailable,
    Session,
    TensorSpec,
    run_in_chunks,
)
from toolkit.runtimes.keras_runtime import open_keras
from toolkit.runtimes.litert import litert_unavailable, open_litert
from toolkit.runtimes.mediapipe import mediapipe_refuses, mediapipe_unavailable, open_mediapipe
from toolkit.runtimes.onnxruntime import (
    onnx_refuses,
    open_ort_cpu,
    open_ort_cuda,
    ort_cpu_unavailable,
    ort_cuda_unavailable,
)
from toolkit.runtimes.web.runtimes import WEB_RUNTIMES

RUNTIMES: dict[str, Runtime] = {
    r.name: r
    for r in (
        Runtime(
            "keras",
            (".keras",),
            open_keras,
            description="Keras 3 on its backend",
            package="keras",
            loads_keras=True,
            host_memory=False,
            kernel=None,
        ),
        Runtime(
            "litert",
            (".tflite",),
            open_litert,
            litert_unavailable,
            "LiteRT interpreter, XNNPACK",
            package="litert",
            loads_keras=False,
            host_memory=True,
            kernel="fully-connected",
        ),
        Runtime(
            "mediapipe",
            (".tflite",),
            open_mediapipe,
            mediapipe_unavailable,
            "MediaPipe Tasks ImageClassifier: an app's path, uint8 frames, pre/postprocessing in",
            levels=(),
            refuses=mediapipe_refuses,
            package=None,  # its version is not recorded (toolkit.common.versions)
            loads_keras=False,
            host_memory=False,
            kernel=None,
        ),
        Runtime(
            "ort-cpu",
            (".onnx", ".ort"),
            open_ort_cpu,
            ort_cpu_unavailable,
            "ONNX Runtime, CPU",
            refuses=onnx_refuses,
            package="onnxruntime",
            loads_keras=False,
            host_memory=True,
            kernel="matmul",
        ),
        Runtime(
            "ort-cuda",
            (".onnx",),
            open_ort_cuda,
            ort_cuda_unavailable,
            "ONNX Runtime, CUDA",
            refuses=onnx_refuses,
            package="onnxruntime",
            loads_keras=False,
            host_memory=False,  # its weights sit on the GPU
            kernel="matmul",
        ),
        *WEB_RUNTIMES,  # web-mediapipe, web-litert, web-ort: toolkit/runtimes/web/libraries.py
    )
}
DEFAULT_RUNTIME: dict[str, str] = {
    ".keras": "keras",
    ".tflite": "litert",
    ".onnx": "ort-cpu",
    ".ort": "ort-cpu",  # ONNX Runtime's own format (onnx-mobile)
}
DEFAULT_OPTIONS = RuntimeOptions()
# what `toolkit verify` compares cell by cell against Keras; MediaPipe runs only app files (with
# metadata), not verify's op and layer graphs: tests/test_app_ready.py checks it against litert
VERIFIED_RUNTIMES: dict[str, Runtime] = {n: r for n, r in RUNTIMES.items() if r.verified}
# bench's and verify's runtimes when none are named: all but the browser ones (`all` adds them)
DEFAULT_RUNTIMES: tuple[str, ...] = tuple(n for n, r in RUNTIMES.items() if r.by_default)
DEFAULT_VERIFIED: tuple[str, ...] = tuple(n for n in VERIFIED_RUNTIMES if n in DEFAULT_RUNTIMES)

__all__ = [
    "DEFAULT_OPTIONS",
    "DEFAULT_RUNTIME",
    "DEFAULT_RUNTIMES",
    "DEFAULT_VERIFIED",
    "RUNTIMES",
    "Runtime",
    "RuntimeOptions",
    "RuntimeUnavailable",
    "Session",
    "TensorSpec",
    "VERIFIED_RUNTIMES",
    "get_runtime",
    "open_artifact",
    "run_in_chunks",
]


def get_runtime(name: str) -> Runtime:
    """The registry entry `name`; a UsageError with a "did you mean" for a near miss."""
    if name in RUNTIMES:
        return RUNTIMES[name]
    close = difflib.get_close_matches(name, RUNTIMES, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    raise UsageError(f"unknown runtime '{name}': {hint}choose one of {', '.join(RUNTIMES)}")


def _check_file(path: Path) -> str:
    """The artifact's suffix, after checking that it is a file of a known kind."""
    kinds = ", ".join(DEFAULT_RUNTIME)
    if path.is_dir():
        raise UsageError(
            f"{path} is a folder: pass a model file ({kinds}) such as {path}/model.keras"
        )
    if not path.is_file():
        raise UsageError(f"{path} not found: pass an existing {kinds} file")
    suffix = path.suffix.lower()
    if suffix not in DEFAULT_RUNTIME:
        raise UsageError(
            f"{path} is not a {kinds} file: pass a model artifact of one of those kinds"
        )
    return suffix


def open_artifact(
    path: str | Path, runtime: str | None = None, options: RuntimeOptions = DEFAULT_OPTIONS
) -> Session:
    """Open `path` in `runtime` (default: by suffix); bad input is a one-line UsageError."""
    path = Path(path)
    suffix = _check_file(path)
    entry = get_runtime(runtime or DEFAULT_RUNTIME[suffix])
    if suffix not in entry.suffixes:
        fits = [r.name for r in RUNTIMES.values() if suffix in r.suffixes]
        raise UsageError(
            f"runtime {entry.name} opens {', '.join(entry.suffixes)} files, not {path}: "
            f"use --runtime {' or '.join(fits)}"
        )
    if options.threads is not None and options.threads < 1:
        raise UsageError(f"threads must be at least 1, not {options.threads}")
    if (reason := entry.unavailable()) is not None:
        raise RuntimeUnavailable(reason)
    try:
        return entry.open(path, options)
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001  (any loader failure means the file is unusable)
        raise UsageError(
            f"{path} could not be loaded by {entry.name} ({first_line(exc)}): the file is "
            f"corrupt or not a {suffix} model; export it again"
        ) from exc
