"""TFLite through tf.lite.TFLiteConverter from a SavedModel with the `serving_default` signature."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import flatbuffers
import keras
import numpy as np
import tensorflow as tf
from ai_edge_litert import schema_py_generated as schema
from tensorflow.lite.python import convert as tflite_convert
from tensorflow.lite.python.util import modify_model_io_type

from toolkit.common.native_logs import captured_native_stderr
from toolkit.export.oplist import builtin_code
from toolkit.export.signature import (
    INPUT_NAME,
    OUTPUT_NAME,
    PROBABILITIES,
    SIGNATURE_KEY,
    serving_call,
    with_probabilities,
)
from toolkit.export.source import ExportSource
from toolkit.export.spelling import converter_spelling
from toolkit.ops.attention import DIAGONAL_MASK_SCOPE


@dataclass(frozen=True)
class Recipe:
    """Converter settings of one TFLite format (or one int8 search candidate)."""

    optimize: bool = False  # optimizations = [Optimize.DEFAULT]
    float16: bool = False  # supported_types = [tf.float16]
    int8: bool = False  # representative dataset + TFLITE_BUILTINS_INT8 only
    # app files: uint8 pixels in (scale 1, zero point 0: q = pixel, what a camera gives; one
    # QUANTIZE to int8 follows) and float32 probabilities out, both types MediaPipe Tasks takes
    # (a uint8 output, steps of 1/256, tied the top two classes on ~1.5% of the images of a
    # 71% model); verify's op models (no softmax): int8 in and out
    int8_io: bool = False
    batch: int | None = None  # None: dynamic batch; 1: fixed, so every shape folds to a constant
    float_layers: tuple[str, ...] = ()  # Keras layer classes whose weight-free ops stay float
    float_ops: tuple[str, ...] = ()  # TFLite builtin op names that stay float (int8 only)
    # the logits layer and the softmax stay float, so float32 probabilities keep their
    # resolution: int8 logits tie (equal top values) on a few percent of the images of a
    # low-confidence model
    float_logits: bool = False
    # LSA's diagonal mask as Add(lowest float32) + Softmax (AdditiveMaskLocalitySelfAttention),
    # 6 fewer ops per layer; int8 recipes then keep the mask's ops float, fill and all
    additive_mask: bool = False
    # ShiftViT's shift as one DEPTHWISE_CONV_2D (DepthwisePartialShift) instead of a pad, slices
    # and a concatenate. In int8 the convolution's output range is pinned to its input's
    # (`pin_shift_ranges`), so it moves int8 values exactly, as slices do. In dynamic-range
    # files its weights stay float (`float_shift_weights`): XNNPACK takes no int8-weight
    # depthwise convolution on float activations
    depthwise_shift: bool = False

    @property
    def selective(self) -> bool:
        """Whether some ops stay float inside an int8 model."""
        return bool(self.float_layers or self.float_ops or self.float_logits or self.additive_mask)

    @property
    def dynamic_range(self) -> bool:
        """Whether the converter gives weights int8 and keeps activations float."""
        return self.optimize and not (self.int8 or self.float16)


# batch 1 folds the shape arithmetic, so XNNPACK takes the whole graph (with a dynamic batch,
# ~200-300 shape ops run outside it, between ~65 partitions: 1.07-1.14x slower in fp32)
FP32 = Recipe(batch=1, additive_mask=True, depthwise_shift=True)
FP16 = Recipe(optimize=True, float16=True, batch=1, additive_mask=True, depthwise_shift=True)
# int8 weights, float activations
DYNAMIC_B1 = Recipe(optimize=True, batch=1, additive_mask=True, depthwise_shift=True)
INT8 = Recipe(optimize=True, int8=True, int8_io=True)  # the converter's full int8 defaults


def tflite_spelling(
    model: keras.Model, additive_mask: bool = False, depthwise_shift: bool = False
) -> keras.Model:
    """`model` spelled for the TFLite converter (`converter_spelling`): every last-axis
    LayerNormalization centered, LSA's mask additive and the shift depthwise as asked."""
    return converter_spelling(model, True, additive_mask, depthwise_shift)


def saved_model(
    src: ExportSource,
    batch: int | None = None,
    additive_mask: bool = False,
    depthwise_shift: bool = False,
) -> Path:
    """The run's model, spelled by `tflite_spelling` and ending in a softmax (the app files give
    probabilities), as a SavedModel with signature serving_default(image) -> {probabilities}.

    batch=None keeps the batch dimension dynamic; an int fixes it in the signature.
    """
    spelling = ("_additive_mask" if additive_mask else "") + (
        "_depthwise_shift" if depthwise_shift else ""
    )
    key = ("saved_model" if batch is None else f"saved_model_b{batch}") + spelling

    def write() -> Path:
        folder = Path(src.scratch) / key
        model = src.memo(
            f"tflite_spelling{spelling}",
            lambda: tflite_spelling(src.model, additive_mask, depthwise_shift),
        )
        output = PROBABILITIES if src.probabilities else OUTPUT_NAME
        if src.probabilities:
            model = with_probabilities(model)
        archive = keras.export.ExportArchive()
        archive.track(model)
        spec = tf.TensorSpec([batch, *src.input_shape], tf.float32, name=INPUT_NAME)
        serving = serving_call(model, output)
        archive.add_endpoint(SIGNATURE_KEY, serving, input_signature=[spec])
        with captured_native_stderr():
            archive.write_out(str(folder), verbose=False)
        return folder

    return src.memo(key, write)


def representative_dataset(images: np.ndarray) -> Callable[[], Iterator[dict[str, np.ndarray]]]:
    """One calibration image at a time, keyed by the signature's input name."""

    def generate() -> Iterator[dict[str, np.ndarray]]:
        for i in range(len(images)):
            yield {INPUT_NAME: images[i : i + 1]}

    return generate


def _converter(src: ExportSource, recipe: Recipe) -> tf.lite.TFLiteConverter:
    converter = tf.lite.TFLiteConverter.from_saved_model(
        str(saved_model(src, recipe.batch, recipe.additive_mask, recipe.depthwise_shift)),
        signature_keys=[SIGNATURE_KEY],
    )
    builtins = (
        tf.lite.OpsSet.TFLITE_BUILTINS_INT8 if recipe.int8 else tf.lite.OpsSet.TFLITE_BUILTINS
    )
    converter.target_spec.supported_ops = [builtins]
    if recipe.optimize:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if recipe.float16:
        converter.target_spec.supported_types = [tf.float16]
    if recipe.int8:
        converter.representative_dataset = representative_dataset(src.calibration)
    if recipe.int8_io:  # app files: uint8 pixels, float32 probabilities; op models: int8
        converter.inference_input_type = tf.uint8 if src.probabilities else tf.int8
        converter.inference_output_type = tf.float32 if src.probabilities else tf.int8
    return converter


def _convert(converter: tf.lite.TFLiteConverter) -> bytes:
    with captured_native_stderr(), warnings.catch_warnings():
        # the converter's own calibrator uses tf.lite.Interpreter and warns about it
        warnings.filterwarnings("ignore", message=r".*tf\.lite\.Interpreter is deprecated")
        return converter.convert()


def _constant(model: schema.ModelT, graph: schema.SubGraphT, index: int) -> np.ndarray | None:
    """The values of a constant tensor: float32 as stored, int8 per last-axis channel
    dequantized (a dynamic-range file's weights); None for anything else."""
    tensor = graph.tensors[index]
    data = model.buffers[tensor.buffer].data
    if data is None:
        return None
    if tensor.type == schema.TensorType.FLOAT32:
        return np.frombuffer(bytes(data), np.float32).reshape(tensor.shape)
    quantization = tensor.quantization
    if tensor.type != schema.TensorType.INT8 or quantization is None:
        return None
    scale = np.asarray(quantization.scale, np.float32)
    zero_point = np.asarray(quantization.zeroPoint if quantization.zeroPoint is not None else 0)
    channels = tensor.shape[-1]
    if quantization.quantizedDimension != len(tensor.shape) - 1 or scale.size != channels:
        return None
    values = np.frombuffer(bytes(data), np.int8).reshape(tensor.shape).astype(np.int32)
    return (values - zero_point) * scale


def _shift_kernel(
    model: schema.ModelT, graph: schema.SubGraphT, op: schema.OperatorT
) -> np.ndarray | None:
    """The float32 kernel of `op` when `op` is a DEPTHWISE_CONV_2D that only moves values
    (ShiftViT's shift as DepthwisePartialShift spells it): per channel one weight 1.0 (to
    float32's rounding when the weights are int8) and the rest 0, and a zero bias or none.
    None for any other op."""
    code = model.operatorCodes[op.opcodeIndex]
    if (
        max(code.builtinCode, code.deprecatedBuiltinCode)
        != schema.BuiltinOperator.DEPTHWISE_CONV_2D
    ):
        return None
    kernel = _constant(model, graph, op.inputs[1])
    has_bias = len(op.inputs) > 2 and op.inputs[2] >= 0
    bias = _constant(model, graph, op.inputs[2]) if has_bias else np.zeros(1)
    if kernel is None or bias is None or bias.any():
        return None
    weights = kernel.reshape(-1, kernel.shape[-1])
    ones = weights != 0
    if (ones.sum(axis=0) == 1).all() and np.allclose(weights[ones], 1.0, rtol=1e-6, atol=0):
        return ones.reshape(kernel.shape).astype(np.float32)
    return None


class _AlignedBuffer(schema.BufferT):
    """A buffer whose data starts on a 16-byte boundary, as the schema asks (`force_align`)
    and the converter writes it; the generated `Pack` aligns data to 1 byte."""

    def Pack(self, builder: flatbuffers.Builder) -> int:  # noqa: N802 (the generated name)
        data = None
        if self.data is not None:
            payload = np.asarray(self.data, np.uint8).tobytes()
            builder.StartVector(1, len(payload), 16)
            builder.head -= len(payload)
            builder.Bytes[builder.head : builder.head + len(payload)] = payload
            data = builder.EndVector()  # StartVector set its length
        schema.BufferStart(builder)
        if data is not None:
            schema.BufferAddData(builder, data)
        schema.BufferAddOffset(builder, self.offset)
        schema.BufferAddSize(builder, self.size)
        return schema.BufferEnd(builder)


def packed_model(model: schema.ModelT, size_hint: int) -> bytes:
    """`model` as a .tflite flatbuffer, every buffer 16-byte aligned."""
    model.buffers = [_AlignedBuffer(b.data, b.offset, b.size) for b in model.buffers]
    builder = flatbuffers.Builder(size_hint)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def pin_shift_ranges(calibrated: bytes) -> bytes:
    """`calibrated` with the output range of each depthwise convolution that only moves values
    (ShiftViT's shift) set to its input's range. Its int8 output then has the input's scale and
    zero point, and its one-hot weights (127 at scale 1/127) give back each input value exactly,
    as the slices it replaces do. Calibration alone would give the output its own range, and
    the convolution would requantize."""
    model = schema.ModelT.InitFromPackedBuf(calibrated, 0)
    pinned = 0
    for graph in model.subgraphs:
        for op in graph.operators:
            if _shift_kernel(model, graph, op) is None:
                continue
            source = graph.tensors[op.inputs[0]].quantization
            output = graph.tensors[op.outputs[0]].quantization
            if source is not None and output is not None and source.min is not None:
                output.min, output.max = list(source.min), list(source.max)
                pinned += 1
    if not pinned:  # a model without shifts (a ViT)
        return calibrated
    return packed_model(model, len(calibrated))


def float_shift_weights(dynamic: bytes) -> bytes:
    """`dynamic` with the int8 weights of each depthwise convolution that only moves values
    (ShiftViT's shift) given back as float32 ones and zeros, the same values. The dynamic-range
    converter quantizes the weights of the wider shifts (>= 1024 weights), and XNNPACK takes no
    such hybrid convolution: each would run in LiteRT's own kernel, between two partitions."""
    model = schema.ModelT.InitFromPackedBuf(dynamic, 0)
    detached = set()  # the int8 buffers the shifts read; other tensors may share them
    for graph in model.subgraphs:
        for op in graph.operators:
            kernel = _shift_kernel(model, graph, op)
            if kernel is None:
                continue
            weights = graph.tensors[op.inputs[1]]
            if weights.type == schema.TensorType.FLOAT32:  # narrow shifts keep float weights
                continue
            detached.add(weights.buffer)
            model.buffers.append(schema.BufferT(np.frombuffer(kernel.tobytes(), np.uint8)))
            weights.buffer = len(model.buffers) - 1
            weights.type = schema.TensorType.FLOAT32
            weights.quantization = None
    if not detached:  # no shift, or none wide enough to be quantized
        return dynamic
    used = {tensor.buffer for graph in model.subgraphs for tensor in graph.tensors}
    for index in detached - used:  # emptied, not removed: tensors refer to buffers by index
        model.buffers[index].data = None
    return packed_model(model, len(dynamic))


def pin_input_range(calibrated: bytes, low: float = 0.0, high: float = 255.0) -> bytes:
    """`calibrated` with its input's range set to the pixels' full range 0-255, whatever the
    calibration images held: the int8 input then has scale 1 and zero point -128, so a uint8
    input (zero point 0) is the pixel itself and its QUANTIZE to int8 is exact."""
    model = schema.ModelT.InitFromPackedBuf(calibrated, 0)
    graph = model.subgraphs[0]
    for index in graph.inputs:
        quantization = graph.tensors[index].quantization
        if quantization is None or quantization.min is None:
            return calibrated  # nothing calibrated to pin
        quantization.min, quantization.max = [low], [high]
    return packed_model(model, len(calibrated))


def calibrated_model(
    src: ExportSource,
    batch: int | None,
    additive_mask: bool = False,
    depthwise_shift: bool = False,
) -> bytes:
    """The float model with calibration statistics (min/max per tensor), built once per batch
    and spelling; its input range pinned to 0-255 (`pin_input_range`); with `depthwise_shift`,
    each shift's output range pinned to its input's."""

    def build() -> bytes:
        recipe = Recipe(
            optimize=True,
            int8=True,
            batch=batch,
            additive_mask=additive_mask,
            depthwise_shift=depthwise_shift,
        )
        converter = _converter(src, recipe)
        converter._experimental_calibrate_only = True  # calibrate once, quantize many
        calibrated = _convert(converter)
        if src.probabilities:  # an app file's input: pixels 0-255
            calibrated = pin_input_range(calibrated)
        if depthwise_shift:
            calibrated = pin_shift_ranges(calibrated)
        return calibrated

    return src.memo(f"calibrated_b{batch}_{additive_mask}_{depthwise_shift}", build)


# ops with weights: the converter folds a constant scale and shift into the next of these (a
# LayerNormalization's gamma and beta), which then carries the norm's name but stays int8
_WEIGHT_OPS = frozenset(
    {
        schema.BuiltinOperator.FULLY_CONNECTED,
        schema.BuiltinOperator.CONV_2D,
        schema.BuiltinOperator.DEPTHWISE_CONV_2D,
    }
)


def layer_nodes(flatbuffer: bytes, layer_names: set[str]) -> list[str]:
    """Output tensor names of the weight-free ops inside Keras layers or name scopes named
    `layer_names` (a `/` segment of the tensor name)."""
    if not layer_names:
        return []
    pattern = re.compile("|".join(rf"{re.escape(n)}(_\d+)?" for n in sorted(layer_names)))
    model = schema.Model.GetRootAs(flatbuffer, 0)
    nodes = []
    for s in range(model.SubgraphsLength()):
        graph = model.Subgraphs(s)
        for i in range(graph.OperatorsLength()):
            op = graph.Operators(i)
            if builtin_code(model, op) in _WEIGHT_OPS:
                continue
            for k in range(op.OutputsLength()):
                name = graph.Tensors(op.Outputs(k)).Name().decode()
                if any(pattern.fullmatch(seg) for seg in name.split("/")[:-1]):
                    nodes.append(name)
    return nodes


def output_nodes(flatbuffer: bytes) -> list[str]:
    """Names of the tensors the model outputs (the softmax, whose output carries the
    signature's name) and of the logits its SOFTMAX reads: the ops writing them."""
    model = schema.Model.GetRootAs(flatbuffer, 0)
    graph = model.Subgraphs(0)
    outputs = {graph.Outputs(i) for i in range(graph.OutputsLength())}
    nodes = [graph.Tensors(i).Name().decode() for i in sorted(outputs)]
    for i in range(graph.OperatorsLength()):
        op = graph.Operators(i)
        writes = {op.Outputs(k) for k in range(op.OutputsLength())}
        if writes & outputs and builtin_code(model, op) == schema.BuiltinOperator.SOFTMAX:
            nodes.append(graph.Tensors(op.Inputs(0)).Name().decode())
    return nodes


def _layer_names(model: keras.Model, classes: tuple[str, ...]) -> set[str]:
    """Names of the (nested) layers of `model` whose class name is in `classes`."""
    return {
        layer.name
        for layer in model._flatten_layers(include_self=False)  # nested layers too
        if type(layer).__name__ in classes
    }


def _selective_int8(src: ExportSource, recipe: Recipe) -> bytes:
    """Full int8 from the shared calibration, with the recipe's layers and ops left float."""
    calibrated = calibrated_model(src, recipe.batch, recipe.additive_mask, recipe.depthwise_shift)
    float_scopes = _layer_names(src.model, recipe.float_layers)
    if recipe.additive_mask:  # a float32-lowest fill has no int8 scale
        float_scopes.add(DIAGONAL_MASK_SCOPE)
    nodes = layer_nodes(calibrated, float_scopes)
    nodes += output_nodes(calibrated) if recipe.float_logits else []
    # an op model of verify (no softmax) keeps int8 in/out: fully_quantize makes them int8
    op_int8 = recipe.int8_io and not src.probabilities
    io_type = tf.int8 if op_int8 else tf.float32
    with captured_native_stderr():
        quantized = tflite_convert.mlir_quantize(
            calibrated,
            # else float in/out with a QUANTIZE and a DEQUANTIZE at the ends
            fully_quantize=op_int8,
            input_data_type=io_type,
            output_data_type=io_type,
            denylisted_ops=list(recipe.float_ops) or None,
            denylisted_nodes=nodes or None,
        )
    if not recipe.int8_io or op_int8:
        return quantized
    # what TFLiteConverter.convert() does for inference_input_type=tf.uint8: the input's
    # QUANTIZE float -> int8 becomes uint8 -> int8 (zero point +128, so q = pixel); the output
    # stays the float32 the softmax (or the DEQUANTIZE after an int8 one) gives
    return modify_model_io_type(quantized, tf.uint8, tf.float32)


def tflite_bytes(src: ExportSource, recipe: Recipe) -> bytes:
    """The .tflite flatbuffer of `recipe` (builtin ops only)."""
    if recipe.int8 and (recipe.selective or recipe.batch is not None or recipe.depthwise_shift):
        return _selective_int8(src, recipe)
    converted = _convert(_converter(src, recipe))
    if recipe.dynamic_range and recipe.depthwise_shift:
        return float_shift_weights(converted)
    return converted


def convert_tflite(src: ExportSource, path: Path, recipe: Recipe) -> None:
    """Convert with builtin ops only (int8 builtins for the int8 recipes) and write `path`."""
    path.write_bytes(tflite_bytes(src, recipe))


def tflite_converter(recipe: Recipe) -> Callable[[ExportSource, Path], None]:
    """The FORMATS converter for one recipe."""

    def convert(src: ExportSource, path: Path) -> None:
        convert_tflite(src, path, recipe)

    return convert
