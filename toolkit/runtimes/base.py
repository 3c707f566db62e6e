"""The runtime adapter interface shared by predict, verify and bench.

An adapter opens an artifact (.keras, .onnx, .tflite) and runs it on raw images the way an
app would: float32 0-255 RGB NHWC in, float32 logits out (quantized outputs dequantized);
the .tflite app files end in a softmax: their output, named `probabilities`, is probabilities.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

import numpy as np

from toolkit.common.errors import UsageError

T = TypeVar("T")
PROBABILITIES = "probabilities"  # the output name of a model that ends in a softmax
VERIFY_LEVELS = ("ops", "models", "layers")  # the levels of `toolkit verify`


@dataclass(frozen=True)
class TensorSpec:
    """One model input or output as an app developer codes against it."""

    name: str
    shape: tuple[int | None, ...]
    dtype: str
    scale: float | None = None  # quantized tensors: real = scale * (q - zero_point)
    zero_point: int | None = None


@dataclass(frozen=True)
class RuntimeOptions:
    """Knobs a runtime may take; an adapter ignores the ones it has no use for."""

    threads: int | None = None
    cuda_graph: bool = True  # ort-cuda: bound runs replay a CUDA graph where ORT accepts one


class Session(Protocol):
    """An artifact loaded in one runtime."""

    runtime: str
    input: TensorSpec
    output: TensorSpec
    providers: list[str]  # what really executes it, e.g. ORT providers or "XNNPACK"

    def run(self, images: np.ndarray) -> np.ndarray:
        """(N, H, W, 3) float32 0-255 -> (N, classes) float32 logits."""
        ...

    def bind(self, images: np.ndarray) -> BoundRun:
        """`images` made ready once, so that timing `run()` measures the runtime alone."""
        ...


def close_session(session: Session) -> None:
    """Release a session's runtime now, for the adapters that hold one (MediaPipe's task must
    be closed before interpreter exit); the others are released when collected."""
    close = getattr(session, "close", None)
    if close is not None:
        close()


@dataclass(frozen=True)
class Runtime:
    """A registry entry: how to open artifacts of some suffixes, and whether it can run here."""

    name: str
    suffixes: tuple[str, ...]
    open: Callable[[Path, RuntimeOptions], Session]
    unavailable: Callable[[], str | None] = field(default=lambda: None)  # reason, or None
    description: str = ""
    # the levels of `toolkit verify` that check files in it against Keras (none: not verified)
    levels: tuple[str, ...] = VERIFY_LEVELS
    # why it cannot take a file, found without loading it (bench refuses before any timing)
    refuses: Callable[[Path], str | None] = field(default=lambda path: None)
    # in bench's and verify's default --runtime list; the browser runtimes are asked for by name
    # (or `all`): they need a headless Chromium, and each row loads the library in a page
    by_default: bool = True
    _: KW_ONLY  # the facts below every row states (no defaults: a row that lacks one fails)
    # its Python package's key in toolkit.common.versions.versions(): the version a verify cell
    # records, and a change of it makes `toolkit ship` time its rows again; None: a browser's
    # npm library (recorded by its own npm spec), or a package versions() does not record
    package: str | None
    loads_keras: bool  # opens Keras and its backend: bench leaves it out of an export folder
    # its weights sit in host memory and its caches: bench measures its weight-read rate
    host_memory: bool
    # the roofline kernel family bench measures its peaks with (toolkit.bench.roofline
    # KERNEL_KINDS: "matmul", ONNX MatMul; "fully-connected", LiteRT FullyConnected); None: no
    # peak measured
    kernel: str | None

    @property
    def verified(self) -> bool:
        """Whether `toolkit verify` checks files in it against Keras at any level."""
        return bool(self.levels)


class RuntimeUnavailable(UsageError):
    """The runtime cannot run here (package, driver or device missing); `reason` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def gives_probabilities(spec: TensorSpec) -> bool:
    """Whether an output holds probabilities (a softmax's, sum 1) rather than logits."""
    return spec.name == PROBABILITIES


def to_input(images: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """Float 0-255 images in the input's dtype; integer inputs quantized as an app would."""
    dtype = np.dtype(spec.dtype)
    if not np.issubdtype(dtype, np.integer):
        return np.ascontiguousarray(images, dtype=dtype)
    scale, zero_point = spec.scale or 1.0, spec.zero_point or 0
    info = np.iinfo(dtype)
    q = np.round(np.asarray(images, np.float32) / scale + zero_point)
    return np.clip(q, info.min, info.max).astype(dtype)


def to_logits(outputs: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """float32 logits from a raw output; quantized outputs are dequantized."""
    if not np.issubdtype(np.dtype(spec.dtype), np.integer):
        return np.asarray(outputs, np.float32)
    scale, zero_point = spec.scale or 1.0, spec.zero_point or 0
    return ((np.asarray(outputs, np.float32) - zero_point) * scale).astype(np.float32)


def check_images(images: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """`images` as an array, or ValueError when their shape does not fit the input's."""
    images = np.asarray(images)
    expected = spec.shape[1:]
    if images.ndim != len(spec.shape) or any(
        e is not None and e != got for e, got in zip(expected, images.shape[1:], strict=True)
    ):
        raise ValueError(f"images of shape {images.shape} do not fit input {spec.shape}")
    return images


def fixed_batches(x: np.ndarray, batch: int | None) -> list[np.ndarray]:
    """`x` as the calls an app makes: whole for a dynamic batch, else `batch`-sized chunks, the
    last padded with zeros."""
    if batch is None or len(x) == batch:
        return [x]
    chunks = []
    for start in range(0, len(x), batch):
        chunk = x[start : start + batch]
        pad = np.zeros((batch - len(chunk), *chunk.shape[1:]), chunk.dtype)
        chunks.append(np.concatenate([chunk, pad]))
    return chunks


class BoundRun(Protocol):
    """One batch made ready for a session: `run()` is one timed inference, `logits()` reads it."""

    def run(self) -> None: ...

    def logits(self) -> np.ndarray: ...


class PreparedRun:
    """A batch converted once to the input's dtype and cut into the file's fixed batch.

    `run()` is then the runtime's calls alone, what LiteRT's benchmark_model times: turning an
    app's pixels into the input's dtype (float32, or int8 with its zero point) is the app's
    preprocessing, not the model's latency.
    """

    def __init__(
        self,
        call: Callable[[np.ndarray], np.ndarray],
        images: np.ndarray,
        input_spec: TensorSpec,
        output_spec: TensorSpec,
    ):
        images = check_images(images, input_spec)
        if len(images) == 0:
            raise ValueError("no images to run: bind at least one")
        self._call = call
        self._count = len(images)
        self._chunks = fixed_batches(to_input(images, input_spec), input_spec.shape[0])
        self._output = output_spec
        self._outputs: list[np.ndarray] = []

    def run(self) -> None:
        """One inference: the runtime's call on each prepared chunk, nothing else."""
        self._outputs = [self._call(chunk) for chunk in self._chunks]

    def logits(self) -> np.ndarray:
        """The last run's outputs as float32 logits, padding dropped."""
        return to_logits(np.concatenate(self._outputs)[: self._count], self._output)


def run_images(
    call: Callable[[np.ndarray], np.ndarray],
    images: np.ndarray,
    input_spec: TensorSpec,
    output_spec: TensorSpec,
) -> np.ndarray:
    """Check images against the input, convert, `call` once (or per fixed batch), dequantize."""
    images = check_images(images, input_spec)
    if len(images) == 0:
        return np.zeros((0, *(d or 0 for d in output_spec.shape[1:])), np.float32)
    prepared = PreparedRun(call, images, input_spec, output_spec)
    prepared.run()
    return prepared.logits()


def run_in_chunks(
    run: Callable[[np.ndarray], np.ndarray], images: np.ndarray, chunk: int
) -> np.ndarray:
    """`run` over `chunk`-sized slices of `images`, concatenated: bounds activation memory."""
    parts = [run(images[i : i + chunk]) for i in range(0, len(images), chunk)]
    return np.concatenate(parts) if parts else np.zeros((0, 0), np.float32)


def only(items: Sequence[T], what: str, path: Path) -> T:
    """The single input or output of a model; image classifiers here have exactly one."""
    if len(items) != 1:
        raise UsageError(
            f"{path} has {len(items)} {what}s: toolkit runs image classifiers with one input "
            "and one output; export the model again"
        )
    return items[0]
