"""The `ort-cpu` and `ort-cuda` runtimes: a `.onnx` file in an ONNX Runtime InferenceSession.

Sessions are set up for batch-1 latency (`session_settings`, recorded by `toolkit bench`): every
graph optimisation ORT has (its Gelu, LayerNorm and MatMul fusions, NCHWc convolutions), `threads`
intra-op threads that spin between ops (ORT's default, as XNNPACK's threads do in LiteRT), one
inter-op thread, sequential execution. ort-cuda's bound runs (`bind`, what `toolkit bench`
times) replay a CUDA graph where the graph allows one: every node on the CUDA provider, input
and output at fixed device addresses; otherwise they run node by node and say why.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path

import numpy as np

from toolkit.common.errors import first_line
from toolkit.common.native_logs import captured_native_stderr
from toolkit.runtimes.base import (
    RuntimeOptions,
    RuntimeUnavailable,
    TensorSpec,
    check_images,
    only,
    run_images,
    to_input,
    to_logits,
)

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"
_ONNX_DTYPES = {"float": "float32", "double": "float64"}  # the rest match numpy: int8, uint8, ...
DEVICES = {"ort-cpu": "cpu", "ort-cuda": "cuda"}  # runtime -> OrtValue device of its tensors


def tensor_spec(arg) -> TensorSpec:
    """TensorSpec from an ORT NodeArg: symbolic or missing dimensions are None."""
    dtype = arg.type.removeprefix("tensor(").removesuffix(")")
    shape = tuple(d if isinstance(d, int) and d >= 0 else None for d in arg.shape)
    return TensorSpec(arg.name, shape, _ONNX_DTYPES.get(dtype, dtype))


CUDA_GRAPH_OPTION = "enable_cuda_graph"
# Worker threads that spin between ops (ORT's default) made batch-1 calls of the seed models
# 1.1-1.9x faster (median 1.5x) than sleeping ones on an idle 2-core EPYC, fp32 and int8.
# On a machine busy with other work a spinning thread takes the time slice its partner needs:
# bench on a quiet one.
SESSION_CONFIG = {
    "session.intra_op.allow_spinning": "1",
}


def session_settings(options: RuntimeOptions) -> dict:
    """The session options `open_session` sets, as JSON values (what bench.json records)."""
    return {
        "graph_optimization_level": "ORT_ENABLE_ALL",
        "execution_mode": "ORT_SEQUENTIAL",
        "intra_op_num_threads": options.threads or 0,  # 0: ORT's default, one per core
        "inter_op_num_threads": 1,
        **SESSION_CONFIG,
    }


def cuda_providers(cuda_graph: bool) -> list:
    """The providers of an ort-cuda session: CUDA (capturing a CUDA graph on the first bound
    run when `cuda_graph`), then the CPU for what CUDA does not run."""
    return [(CUDA, {CUDA_GRAPH_OPTION: "1" if cuda_graph else "0"}), CPU]


class IoBoundRun:
    """One input batch and a preallocated output bound on the session's device (ORT IO
    binding), at addresses that stay fixed from run to run, as CUDA graphs need.

    `run()` executes with no host<->device copies, the way an app keeps tensors on a GPU;
    `logits()` copies the last output back to the host.
    """

    def __init__(self, session, binding, output: TensorSpec, cuda_graph: str = "off"):
        self.open_session = session
        self._binding = binding
        self._output = output
        self.cuda_graph = cuda_graph  # "on", or "off" and why

    def run(self) -> None:
        """One inference on the bound tensors (synchronous: the device has finished)."""
        self.open_session.run_with_iobinding(self._binding)

    def logits(self) -> np.ndarray:
        """The last run's output on the host, as float32 logits."""
        return to_logits(self._binding.copy_outputs_to_cpu()[0], self._output)


class OrtSession:
    """An InferenceSession fed by input name; `settings` are its session options."""

    def __init__(self, session, path: Path, runtime: str, options: RuntimeOptions | None = None):
        self.session = session
        self.path = path
        self.runtime = runtime
        self.options = options or RuntimeOptions()
        self.input = tensor_spec(only(session.get_inputs(), "input", path))
        self.output = tensor_spec(only(session.get_outputs(), "output", path))
        self.providers = list(session.get_providers())
        self.settings = session_settings(self.options)

    def _call(self, x: np.ndarray) -> np.ndarray:
        return self.session.run([self.output.name], {self.input.name: x})[0]

    def run(self, images: np.ndarray) -> np.ndarray:
        """(N, H, W, 3) float32 0-255 -> (N, classes) float32 logits."""
        return run_images(self._call, images, self.input, self.output)

    def bind(self, images: np.ndarray) -> IoBoundRun:
        """`images` in the input's dtype, copied once to the session's device, and the output
        preallocated there (IO binding, as onnxruntime_perf_test runs); on ort-cuda, in a
        session that replays a CUDA graph when the graph allows one."""
        import onnxruntime as ort

        device = DEVICES[self.runtime]
        session, cuda_graph = self.bound_session()
        self.settings = {**self.settings, "cuda_graph": cuda_graph}
        x = to_input(check_images(images, self.input), self.input)
        shape = [len(x), *(d or 1 for d in self.output.shape[1:])]
        y = ort.OrtValue.ortvalue_from_shape_and_type(shape, np.dtype(self.output.dtype), device, 0)
        binding = session.io_binding()
        binding.bind_ortvalue_input(self.input.name, ort.OrtValue.ortvalue_from_numpy(x, device, 0))
        binding.bind_ortvalue_output(self.output.name, y)
        return IoBoundRun(session, binding, self.output, cuda_graph)

    def bound_session(self) -> tuple[object, str]:
        """The session `bind` runs on and its CUDA graph state: "on", or "off: why" (ort-cpu;
        `RuntimeOptions.cuda_graph` False; ORT refusing to capture this graph)."""
        if self.runtime != "ort-cuda":
            return self.session, f"off: {self.runtime}"
        if not self.options.cuda_graph:
            return self.session, "off: not asked for (RuntimeOptions.cuda_graph=False)"
        return _cuda_graph_session(self.path, self.options, self.session)


def _cuda_graph_session(path: Path, options: RuntimeOptions, fallback) -> tuple[object, str]:
    """A session of `path` with CUDA graphs on, and "on"; or `fallback` and "off: why" when ORT
    refuses (a node it cannot run on CUDA, such as a CPU-only shape op, makes it refuse)."""
    try:
        session, _ = open_session(str(path), options, cuda_providers(cuda_graph=True))
    except Exception as exc:  # noqa: BLE001  (ORT says why in its message)
        return fallback, f"off: {first_line(exc)[:200]}"
    if CUDA not in session.get_providers():
        return fallback, "off: ONNX Runtime fell back to the CPU"
    return session, "on"


def open_session(model: str | bytes, options: RuntimeOptions, providers: list):
    """InferenceSession with `session_settings` and warnings off; returns it and the native
    log lines it printed."""
    import onnxruntime as ort

    settings = session_settings(options)
    session_options = ort.SessionOptions()
    session_options.log_severity_level = 3  # errors only ("nodes not assigned to ..." is noise)
    level = settings["graph_optimization_level"]
    session_options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    session_options.execution_mode = getattr(ort.ExecutionMode, settings["execution_mode"])
    session_options.intra_op_num_threads = settings["intra_op_num_threads"]
    session_options.inter_op_num_threads = settings["inter_op_num_threads"]
    for key in SESSION_CONFIG:
        session_options.add_session_config_entry(key, settings[key])
    with captured_native_stderr() as log:
        session = ort.InferenceSession(model, sess_options=session_options, providers=providers)
    return session, log


def open_ort_cpu(path: Path, options: RuntimeOptions) -> OrtSession:
    """CPUExecutionProvider with `options.threads` intra-op threads."""
    session, _ = open_session(str(path), options, [CPU])
    return OrtSession(session, path, "ort-cpu", options)


def open_ort_cuda(path: Path, options: RuntimeOptions) -> OrtSession:
    """CUDA then CPU providers; RuntimeUnavailable when ORT fell back to CPU only."""
    session, log = open_session(str(path), options, cuda_providers(cuda_graph=False))
    if CUDA not in session.get_providers():
        raise RuntimeUnavailable(_cuda_failure(log))
    return OrtSession(session, path, "ort-cuda", options)


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
    session, log = open_session(_probe_model(), RuntimeOptions(), [CUDA, CPU])
    return None if CUDA in session.get_providers() else _cuda_failure(log)


# ModelProto fields a model ONNX Runtime loads has: graph (7) and opset_import (8). Protobuf
# writes fields in number order, so a file cut anywhere in the graph lacks the opset imports.
REQUIRED_FIELDS = {7: "graph", 8: "opset_import"}
_SKIP = {1: 8, 5: 4}  # wire type -> bytes of a fixed-size value (64- and 32-bit)


def _varint(f) -> int | None:
    """The base-128 varint at the file's position; None where the file ends inside it."""
    value = shift = 0
    while byte := f.read(1):
        value |= (byte[0] & 0x7F) << shift
        if byte[0] < 0x80:
            return value
        shift += 7
    return None


def onnx_problem(path: Path) -> str | None:
    """What keeps the file at `path` from being a whole ONNX ModelProto, found by walking its
    top-level protobuf fields without the onnx package and without reading their contents (a
    truncated file ends inside one, or lacks the graph or the opset imports); None when whole."""
    size = path.stat().st_size
    seen: set[int] = set()
    with open(path, "rb") as f:
        while f.tell() < size:
            start, key = f.tell(), _varint(f)
            field, wire = (key >> 3, key & 7) if key is not None else (0, -1)
            if field == 0 or wire not in (0, 1, 2, 5):
                return f"no protobuf field at byte {start}"
            length = _varint(f) if wire in (0, 2) else _SKIP[wire]
            if length is None or (wire != 0 and f.tell() + length > size):
                return f"truncated: it ends inside field {field}, at byte {size}"
            f.seek(length if wire != 0 else 0, 1)
            seen.add(field)
    missing = [name for number, name in REQUIRED_FIELDS.items() if number not in seen]
    return f"truncated or cut: it has no {' and no '.join(missing)}" if missing else None


def onnx_refuses(path: Path) -> str | None:
    """Why ONNX Runtime cannot take the `.onnx` file at `path` (not a whole ONNX model), found
    without loading it, so that bench refuses it before any timing; None for other files."""
    if path.suffix.lower() != ".onnx" or not path.is_file():
        return None
    problem = onnx_problem(path)
    if problem is None:
        return None
    return f"{path} is not a whole ONNX model ({problem}): it is corrupt; export it again"
