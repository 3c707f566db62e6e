"""A web runtime's input and output as TensorSpec: what the page sends and reads back, in the
file's own dtypes (the JS libraries report shapes and dtypes, not quantization parameters)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from toolkit.runtimes.base import PROBABILITIES, TensorSpec, only
from toolkit.runtimes.litert import SIGNATURE, tensor_spec
from toolkit.runtimes.mediapipe import FRAMES, model_tensors

Specs = tuple[TensorSpec, TensorSpec]


def _batch(shape: tuple[int | None, ...], page_shape: list | None) -> tuple[int | None, ...]:
    """`shape` with the batch the library really takes (LiteRT.js runs its static batch)."""
    if page_shape:
        return (page_shape[0], *shape[1:])
    return shape


def frame_specs(path: Path, page: dict) -> Specs:
    """MediaPipe's: one uint8 RGB frame in, every class's probability out (as the Python
    mediapipe runtime); a file without TFLite Model Metadata is a UsageError."""
    shape_in, shape_out = model_tensors(path, path.read_bytes())
    image = TensorSpec("image", (1, *shape_in[1:]), FRAMES)
    return image, TensorSpec(PROBABILITIES, (1, shape_out[-1]), "float32")


def tflite_specs(path: Path, page: dict) -> Specs:
    """The .tflite file's signature input and output, quantization included, read with LiteRT's
    interpreter (no tensors allocated); the batch as LiteRT.js reports it."""
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=str(path))
    signatures = interpreter.get_signature_list()
    names = signatures.get(SIGNATURE, {})
    inputs = only(interpreter.get_input_details(), "input", path)
    outputs = only(interpreter.get_output_details(), "output", path)
    in_name = (names.get("inputs") or [inputs["name"]])[0]
    out_name = (names.get("outputs") or [outputs["name"]])[0]
    spec_in, spec_out = tensor_spec(in_name, inputs), tensor_spec(out_name, outputs)
    return (
        replace(spec_in, shape=_batch(spec_in.shape, page["inputShape"])),
        replace(spec_out, shape=_batch(spec_out.shape, page["outputShape"])),
    )


def onnx_specs(path: Path, page: dict) -> Specs:
    """The ONNX model's input and output as onnxruntime-web reports them (no quantized I/O)."""
    shape_in = tuple(page["inputShape"] or (None, None, None, 3))
    shape_out = tuple(page["outputShape"] or (None, None))
    return (
        TensorSpec(page["inputName"], shape_in, page["inputType"]),
        TensorSpec(page["outputName"], shape_out, "float32"),
    )
