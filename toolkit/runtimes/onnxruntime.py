"""The `ort-cpu` and `ort-cuda` runtimes: a `.onnx` file in an ONNX Runtime InferenceSession."""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path

import numpy as np

from toolkit.native_logs import captured_native_stderr
from toolkit.runtimes.base import (
    RuntimeOptions,
    RuntimeUnavailable,
    TensorSpec,
    only,
    run_images,
    to_input,
    to_logits,
)

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"
_ONNX_DTYPES = {"float": "float32", "double": "float64"}  # the rest match numpy: int8, uint8, ...
DEVICES = {"ort-cpu": "cpu", "ort-cuda": "cuda"}  # runtime -> OrtValue device of its tensors


def _spec(arg) -> TensorSpec:
    """TensorSpec from an ORT NodeArg: symbolic or missing dimensions are None."""
    dtype = arg.type.removeprefix("tensor(").removesuffix(")")
    shape = tuple(d if isinstance(d, int) and d >= 0 else None for d in arg.shape)
    return TensorSpec(arg.name, shape, _ONNX_DTYPES.get(dtype, dtype))


class BoundRun:
    """One input batch and the output bound on the session's device (ORT IO binding).

    `run()` executes with no host<->device copies, the way an app keeps tensors on a GPU;
    `logits()` copies the last output back to the host.
    """

    def __init__(self, session, binding, output: TensorSpec):
        self._session = session
        self._binding = binding
        self._output = output

    def run(self) -> None:
        """One inference on the bound tensors (synchronous: the device has finished)."""
        self._session.run_with_iobinding(self._binding)

    def logits(self) -> np.ndarray:
        """The last run's output on the host, as float32 logits."""
        return to_logits(self._binding.copy_outputs_to_cpu()[0], self._output)


class OrtSession:
    """An InferenceSession fed by input name."""

    def __init__(self, session, path: Path, runtime: str):
        self.session = session
        self.runtime = runtime
        self.input = _spec(only(session.get_inputs(), "input", path))
        self.output = _spec(only(session.get_outputs(), "output", path))
        self.providers = list(session.get_providers())

    def _call(self, x: np.ndarray) -> np.ndarray:
        return self.session.run([self.output.name], {self.input.name: x})[0]

    def run(self, images: np.ndarray) -> np.ndarray:
        """(N, H, W, 3) float32 0-255 -> (N, classes) float32 logits."""
        return run_images(self._call, images, self.input, self.output)

    def bind(self, images: np.ndarray) -> BoundRun:
        """`images` copied once to the session's device and the output bound there too."""
        import onnxruntime as ort

        device = DEVICES[self.runtime]
        x = to_input(np.asarray(images), self.input)
        binding = self.session.io_binding()
        binding.bind_ortvalue_input(self.input.name, ort.OrtValue.ortvalue_from_numpy(x, device, 0))
        binding.bind_output(self.output.name, device)
        return BoundRun(self.session, binding, self.output)


def _session(model: str | bytes, options: RuntimeOptions, providers: list[str]):
    """InferenceSession with warnings off; returns it and the native log lines it printed."""
    import onnxruntime as ort

    session_options = ort.SessionOptions()
    session_options.log_severity_level = 3  # errors only ("nodes not assigned to ..." is noise)
    if options.threads:
        session_options.intra_op_num_threads = options.threads
    with captured_native_stderr() as log:
        session = ort.InferenceSession(model, sess_options=session_options, providers=providers)
    return session, log


def open_ort_cpu(path: Path, options: RuntimeOptions) -> OrtSession:
    """CPUExecutionProvider with `options.threads` intra-op threads."""
    session, _ = _session(str(path), options, [CPU])
    return OrtSession(session, path, "ort-cpu")


def open_ort_cuda(path: Path, options: RuntimeOptions) -> OrtSession:
    """CUDA then CPU providers; RuntimeUnavailable when ORT fell back to CPU only."""
    session, log = _session(str(path), options, [CUDA, CPU])
    if CUDA not in session.get_providers():
        raise RuntimeUnavailable(_cuda_failure(log))
    return OrtSession(session, path, "ort-cuda")


def _cuda_failure(log: list[str]) -> str:
    """One line saying why ORT could not create the CUDA provider, from its own error log."""
    errors = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in log if "[E:" in line]
    detail = errors[0].split("with error: ")[-1].split(" : ")[-1].strip() if errors else ""
    return (
        "ort-cuda is unavailable: onnxruntime could not create the CUDA execution provider"
        + (f" ({detail})" if detail else "")
        + "; it needs an NVIDIA GPU and the CUDA/cuDNN versions of onnxruntime-gpu; "
        "use --runtime ort-cpu"
    )


def _probe_model() -> bytes:
    """A one-node float Identity model: the cheapest thing to create a CUDA session for."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "probe", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def ort_cpu_unavailable() -> str | None:
    """Why ONNX Runtime cannot run here, or None."""
    if importlib.util.find_spec("onnxruntime") is None:
        return "ort-cpu needs onnxruntime: pip install onnxruntime (or onnxruntime-gpu)"
    return None


@functools.cache
def ort_cuda_unavailable() -> str | None:
    """Why ORT cannot run on CUDA here, or None; probes a one-node session once per process."""
    if importlib.util.find_spec("onnxruntime") is None:
        return "ort-cuda needs onnxruntime-gpu: pip install onnxruntime-gpu"
    import onnxruntime as ort

    if CUDA not in ort.get_available_providers():
        return (
            f"ort-cuda is unavailable: this onnxruntime {ort.__version__} has no {CUDA} "
            "(the CPU-only package); install onnxruntime-gpu or use --runtime ort-cpu"
        )
    if importlib.util.find_spec("onnx") is None:
        return None  # no probe model without onnx: open_ort_cuda still checks the real session
    session, log = _session(_probe_model(), RuntimeOptions(), [CUDA, CPU])
    return None if CUDA in session.get_providers() else _cuda_failure(log)
