"""The web library registry: one row per browser runtime (its npm package, the package files the
page may fetch, its JS module, the suffixes it opens, what it needs); `RUNTIMES` rows are built
from it (toolkit/runtimes/web/runtimes.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from toolkit.runtimes.mediapipe import mediapipe_refuses, mediapipe_unavailable
from toolkit.runtimes.onnxruntime import onnx_refuses
from toolkit.runtimes.web.npm import LITERT_JS, ORT_WEB, TASKS_VISION, NpmPackage
from toolkit.runtimes.web.specs import Specs, frame_specs, onnx_specs, tflite_specs


def _litert_unavailable() -> str | None:
    """web-litert reads the file's input quantization with ai-edge-litert (LiteRT.js has none)."""
    import importlib.util

    if importlib.util.find_spec("ai_edge_litert") is None:
        return "web-litert reads .tflite tensors with ai-edge-litert: pip install ai-edge-litert"
    return None


@dataclass(frozen=True)
class WebLibrary:
    """A JavaScript inference library as a runtime: what the page loads and what it opens."""

    name: str  # the runtime's name, web-...
    package: NpmPackage
    files: tuple[str, ...]  # glob patterns under node_modules/: what the local server serves
    module: str  # the file of toolkit/runtimes/web/js/ exporting load()
    suffixes: tuple[str, ...]
    description: str
    specs: Callable[[Path, dict], Specs]  # the input and output, from the file and the page
    threads: str | None  # the library's thread setting, or None when it takes none
    imports: dict[str, str] = field(default_factory=dict)  # the page's import map (bare names)
    needs: Callable[[], str | None] = field(default=lambda: None)  # Python packages it reads with
    refuses: Callable[[Path], str | None] = field(default=lambda path: None)
    # the levels of `toolkit verify` that check files in it: the model level at most (each file
    # opens in a page of its own; the op and layer levels' many graphs, some with several
    # outputs, stay with the native runtimes); none for MediaPipe, as for its Python adapter
    # (verify has no rule for a task that does its own preprocessing)
    levels: tuple[str, ...] = ()
    # the library reads the class names from the file's metadata (else the app needs labels.txt)
    reads_labels: bool = False


LIBRARIES: dict[str, WebLibrary] = {
    lib.name: lib
    for lib in (
        WebLibrary(
            "web-mediapipe",
            TASKS_VISION,
            ("@mediapipe/tasks-vision/vision_bundle.mjs", "@mediapipe/tasks-vision/wasm/*"),
            "mediapipe.js",
            (".tflite",),
            "MediaPipe Tasks ImageClassifier in Chromium (WebAssembly): uint8 frames, every score",
            frame_specs,
            threads=None,
            needs=mediapipe_unavailable,
            refuses=mediapipe_refuses,
            reads_labels=True,
        ),
        WebLibrary(
            "web-litert",
            LITERT_JS,
            (
                "@litertjs/core/dist/index.js",
                "@litertjs/core/wasm/*",
                "@litertjs/wasm-utils/dist/index.js",
            ),
            "litert.js",
            (".tflite",),
            "LiteRT.js in Chromium, wasm accelerator (XNNPACK)",
            tflite_specs,
            threads="cpuOptions.numThreads",
            imports={"@litertjs/wasm-utils": "@litertjs/wasm-utils/dist/index.js"},
            needs=_litert_unavailable,
            levels=("models",),
        ),
        WebLibrary(
            "web-ort",
            ORT_WEB,
            (
                "onnxruntime-web/dist/ort.wasm.min.mjs",
                "onnxruntime-web/dist/ort-wasm-simd-threaded.mjs",
                "onnxruntime-web/dist/ort-wasm-simd-threaded.wasm",
            ),
            "ort.js",
            (".onnx", ".ort"),
            "onnxruntime-web in Chromium, wasm execution provider",
            onnx_specs,
            threads="env.wasm.numThreads",
            refuses=onnx_refuses,
            levels=("models",),
        ),
    )
}
