"""float32 ONNX through tf2onnx: opset >= 17, dynamic batch, `image` -> `logits`, metadata.

tf2onnx runs without its transpose optimizer, so a model with convolutions stays NHWC like the
Keras model (a Transpose pair around each Conv) instead of moving to NCHW, where every
LayerNormalization over channels becomes a pattern no fusion matches; export/onnx_rewrite.py
then fuses LayerNormalization and GELU and removes the shape arithmetic.

ShiftViT's partial shift is converted as one depthwise convolution (export/spelling.py), which
ONNX Runtime runs in its blocked-layout convolution kernels: a pad, five slices and a
concatenate cost it 2.2-2.6x the node time at batch 1 (records/notes/cpu_speed.md).
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import keras
import numpy as np
import onnx
import onnx.version_converter
import tf2onnx
import tf2onnx.optimizer
from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

import toolkit
from toolkit.common.errors import first_line
from toolkit.common.native_logs import captured_native_stderr
from toolkit.export.conversion_error import ExportError
from toolkit.export.onnx_rewrite import rewrite
from toolkit.export.oplist import STANDARD_ONNX_DOMAINS, forbidden_ops, onnx_ops
from toolkit.export.signature import INPUT_NAME, OUTPUT_NAME, serving_function
from toolkit.export.source import ExportSource
from toolkit.export.spelling import converter_spelling

TF2ONNX_MAX_OPSET = max(tf2onnx.constants.OPSET_TO_IR_VERSION)  # the newest tf2onnx can target
BATCH_DIM = "batch"
SKIPPED_TF2ONNX_OPTIMIZERS = ("optimize_transpose",)


@contextmanager
def _tf2onnx_optimizers_without(skipped: tuple[str, ...]):
    """tf2onnx's graph optimizers less `skipped` (tf2onnx.convert.from_graph_def takes no
    optimizer list; its optimize_graph reads them from tf2onnx.optimizer._get_optimizers)."""
    kept = {k: v for k, v in tf2onnx.optimizer._get_optimizers().items() if k not in skipped}
    with mock.patch.object(tf2onnx.optimizer, "_get_optimizers", lambda: kept):
        yield


def keras_to_onnx(
    model: keras.Model,
    input_shape: tuple[int, ...],
    opset: int,
    samples: np.ndarray | None = None,
) -> onnx.ModelProto:
    """Spell `model` for ONNX, freeze its serving function (weights and captured constants) and
    convert it with tf2onnx. `samples`: inputs the graph rewrite is checked on (default 0-255
    pixels, what a model's image input takes; an op model passes its own activations)."""
    # only the shift is swapped: LayerNorm and LSA's mask are fused by the graph rewrite, which
    # matches the converter's spelling of the trained layers
    model = converter_spelling(model, depthwise_shift=True)
    concrete = serving_function(model, input_shape).get_concrete_function()
    with captured_native_stderr():
        frozen = convert_variables_to_constants_v2(
            concrete, lower_control_flow=False, aggressive_inlining=True
        )
        if len(frozen.inputs) != 1 or len(frozen.outputs) != 1:
            raise ExportError(
                f"the frozen model has inputs {[t.name for t in frozen.inputs]} and outputs "
                f"{[t.name for t in frozen.outputs]}; expected one image input and one output"
            )
        tf_in, tf_out = frozen.inputs[0].name, frozen.outputs[0].name
        with _tf2onnx_optimizers_without(SKIPPED_TF2ONNX_OPTIMIZERS):
            proto, _ = tf2onnx.convert.from_graph_def(
                frozen.graph.as_graph_def(add_shapes=True),
                name=model.name,
                input_names=[tf_in],
                output_names=[tf_out],
                opset=min(opset, TF2ONNX_MAX_OPSET),
                tensors_to_rename={tf_in: INPUT_NAME, tf_out: OUTPUT_NAME},
            )
    if opset > TF2ONNX_MAX_OPSET:
        proto = lifted(proto, opset)
    rewrite(proto, samples)
    _name_batch_dim(proto)
    return proto


def lifted(model: onnx.ModelProto, opset: int) -> onnx.ModelProto:
    """`model` at the default-domain `opset` by onnx's version converter (which rewrites only
    the nodes whose op changed between the two opsets), with the IR version that opset needs."""
    lifted_model = onnx.version_converter.convert_version(model, opset)
    lifted_model.ir_version = onnx.helper.find_min_ir_version_for(
        list(lifted_model.opset_import), ignore_unknown=True
    )
    return lifted_model


def _name_batch_dim(model: onnx.ModelProto) -> None:
    """Call the first (dynamic) dimension of the graph's inputs and outputs `batch`."""
    for value in [*model.graph.input, *model.graph.output]:
        dim = value.type.tensor_type.shape.dim[0]
        dim.Clear()
        dim.dim_param = BATCH_DIM


def drop_unused_opsets(model: onnx.ModelProto) -> None:
    """Keep the default-domain opset and the domains some node uses (tf2onnx adds ai.onnx.ml)."""
    used = {op.domain for op in onnx_ops(model)} | set(STANDARD_ONNX_DOMAINS)
    keep = [o for o in model.opset_import if o.domain in used]
    del model.opset_import[:]
    model.opset_import.extend(keep)


def metadata(src: ExportSource, fmt: str) -> dict[str, str]:
    """metadata_props of every ONNX artifact: labels, preprocessing, source run, version."""
    return {
        "labels": json.dumps(src.class_names),
        "preprocessing": json.dumps(src.preprocessing),
        "source_run": str(src.run.path.resolve()),
        "toolkit_version": toolkit.__version__,
        "format": fmt,
    }


def check_onnx(model: onnx.ModelProto, fmt: str) -> None:
    """Standard domains and no forbidden ops, then the full ONNX checker, else ExportError."""
    domains = sorted({o.domain for o in model.opset_import} - set(STANDARD_ONNX_DOMAINS))
    bad = forbidden_ops(onnx_ops(model))
    if bad or domains:
        names = ", ".join(bad + [f"opset import of custom domain '{d}'" for d in domains])
        raise ExportError(f"{fmt}: the graph needs non-standard ops: {names}")
    try:
        onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
        first = first_line(exc)
        raise ExportError(f"{fmt}: the ONNX checker rejects the graph ({first})") from exc


def save_onnx(model: onnx.ModelProto, src: ExportSource, fmt: str, path: Path) -> None:
    """Drop unused opsets, set the metadata, check, and write `model` to `path`."""
    drop_unused_opsets(model)
    del model.metadata_props[:]
    onnx.helper.set_model_props(model, metadata(src, fmt))
    check_onnx(model, fmt)
    onnx.save(model, str(path))


def fp32_onnx(src: ExportSource) -> onnx.ModelProto:
    """The float32 ONNX graph of the run at the chosen opset, converted once per export."""
    return fp32_onnx_at(src, src.opset)


def fp32_onnx_at(src: ExportSource, opset: int) -> onnx.ModelProto:
    """A copy of the float32 ONNX graph of the run at `opset`, converted once per export."""
    graph = src.memo(f"onnx-fp32-{opset}", lambda: keras_to_onnx(src.model, src.input_shape, opset))
    copy = onnx.ModelProto()
    copy.CopyFrom(graph)
    return copy


def convert_onnx(src: ExportSource, path: Path) -> None:
    """Converter of the `onnx` format."""
    save_onnx(fp32_onnx(src), src, "onnx", path)
