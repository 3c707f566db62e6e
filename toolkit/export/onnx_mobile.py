"""onnx-mobile: the float32 graph at batch 1, in ops ONNX Runtime Mobile's NNAPI (Android) and
CoreML (iOS) execution providers take, written in ORT's own format (.ort).

It starts from export/onnx.py's graph at opset 17 (below ATTENTION_OPSET: each attention core
stays MatMul/Softmax/Reshape/Transpose, which both providers take; neither takes Attention):

- the batch is fixed to 1: neither provider takes a node whose input shape is dynamic (ORT's
  checker gives them 0 nodes of the dynamic-batch model.onnx);
- `decompose_layer_norm`: LayerNormalization (a CoreML ML Program op only) -> ReduceMean, Sub,
  Mul, Add, Sqrt, Div, which NNAPI and ML Program take (tf2onnx's own decomposition uses
  Reciprocal, which NNAPI does not take, and Neg, which CoreML does not);
- `gelu_without_erf`: the erf GELU (no NNAPI or CoreML NeuralNetwork kernel for Erf or Gelu)
  -> 0.5 x + 0.5 |x| erf(|x| / sqrt 2), erf by Abramowitz & Stegun 7.1.28 (|error| <= 3e-7)
  in Mul, Add, Sqrt and Div, ops every provider takes;
- `pad_as_concat`: a zero Pad of a static tensor (SPT's shifts; no ML Program kernel for Pad)
  -> Concat with zero constants.

ORT then applies its basic-level optimisations only (standard ops; its extended level fuses
into com.microsoft ops no mobile provider takes) and saves the graph as .ort (ORT's "Fixed"
optimization style). `describe_mobile` measures each provider's share of the file's graph with
ORT's own mobile usability checker and writes ORT's required-operators config beside it (the
op list of an ORT Mobile build reduced to this model: `--include_ops_by_config`).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper
from onnxruntime.tools.mobile_helpers import usability_checker
from onnxruntime.tools.onnx_model_utils import fix_output_shapes, make_input_shape_fixed
from onnxruntime.tools.ort_format_model import create_config_from_models

from toolkit.common.native_logs import captured_native_stderr
from toolkit.export.entries import Extras
from toolkit.export.onnx import fp32_onnx_at, save_onnx
from toolkit.export.onnx_rewrite import (
    GraphIndex,
    Shapes,
    check_unchanged,
    drop_dead_nodes,
    gelu_at,
    observe_shapes,
    outputs,
    probe_inputs,
    replace_node,
)
from toolkit.export.oplist import Op
from toolkit.export.signature import INPUT_NAME
from toolkit.export.source import ExportSource
from toolkit.formats import Format

FORMAT = "onnx-mobile"
MOBILE_OPSET = 17  # below formats.ATTENTION_OPSET: no Attention node
MOBILE_BATCH = 1
# Abramowitz & Stegun 7.1.28: erf(z) = 1 - (1 + a1 z + ... + a6 z^6)^-16 for z >= 0, |e| <= 3e-7
ERF_COEFFICIENTS = (
    *(0.0705230784, 0.0422820123, 0.0092705272),
    *(0.0001520143, 0.0002765672, 0.0000430638),
)
ORT_LEVEL = "ORT_ENABLE_BASIC"  # standard-op rewrites only: what a mobile provider can take
# provider (as model.json names it) -> ORT's checker of it, fixed input shapes required
PROVIDERS = {
    "nnapi": lambda graph: usability_checker.check_nnapi_partitions(graph, True),
    "coreml_mlprogram": lambda graph: usability_checker.check_coreml_partitions(
        graph, True, "coreml_supported_mlprogram_ops.md"
    ),
    "coreml_neuralnetwork": lambda graph: usability_checker.check_coreml_partitions(
        graph, True, "coreml_supported_neuralnetwork_ops.md"
    ),
}
CHECKER = "onnxruntime.tools.mobile_helpers.usability_checker"


def _const(model: onnx.ModelProto, name: str, value) -> str:
    """A float32 initializer `name` (reused when it exists); returns its name."""
    if not any(i.name == name for i in model.graph.initializer):
        model.graph.initializer.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
    return name


def decompose_layer_norm(model: onnx.ModelProto, _shapes: Shapes | None = None) -> int:
    """Every last-axis LayerNormalization -> mean/variance/sqrt/div in standard ops; the count."""
    count = 0
    for node in [n for n in model.graph.node if n.op_type == "LayerNormalization"]:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if attrs.get("axis", -1) != -1 or len(node.output) != 1:
            continue  # no graph of this toolkit has another; left as it is, the checker says so
        x, scale, *bias = node.input
        base = node.name or node.output[0]
        eps = _const(model, f"{base}/epsilon", attrs.get("epsilon", 1e-5))
        t = {k: f"{base}/{k}" for k in ("mean", "centered", "square", "var", "var_eps", "std")}
        t["normed"], t["scaled"] = f"{base}/normed", f"{base}/scaled"
        last = t["scaled"] if bias and bias[0] else node.output[0]
        nodes = [
            helper.make_node("ReduceMean", [x], [t["mean"]], axes=[-1], keepdims=1),
            helper.make_node("Sub", [x, t["mean"]], [t["centered"]]),
            helper.make_node("Mul", [t["centered"], t["centered"]], [t["square"]]),
            helper.make_node("ReduceMean", [t["square"]], [t["var"]], axes=[-1], keepdims=1),
            helper.make_node("Add", [t["var"], eps], [t["var_eps"]]),
            helper.make_node("Sqrt", [t["var_eps"]], [t["std"]]),
            helper.make_node("Div", [t["centered"], t["std"]], [t["normed"]]),
            helper.make_node("Mul", [t["normed"], scale], [last]),
        ]
        if bias and bias[0]:
            nodes.append(helper.make_node("Add", [last, bias[0]], [node.output[0]]))
        for i, n in enumerate(nodes):
            n.name = f"{base}/mobile_{i}"
        replace_node(model, node, nodes)
        count += 1
    return count


def gelu_without_erf(model: onnx.ModelProto, _shapes: Shapes | None = None) -> int:
    """Every erf GELU -> 0.5 x + 0.5 |x| erf(|x| / sqrt 2) with erf by A&S 7.1.28; the count.

    x erf(x / sqrt 2) = |x| erf(|x| / sqrt 2) (erf is odd), so only z >= 0 is evaluated; |x| is
    sqrt(x * x) (CoreML has no Abs). A large |x| makes the polynomial's 16th power inf, and
    1 - 1/inf = 1 exactly: no NaN anywhere.
    """
    g = GraphIndex(model)
    matches = [m for n in model.graph.node if n.op_type == "Erf" if (m := gelu_at(g, n))]
    root_half = float(np.sqrt(0.5))
    coeffs = [
        _const(model, f"gelu_mobile/a{k}", c * root_half**k)
        for k, c in enumerate(ERF_COEFFICIENTS, 1)
    ]
    one, half = _const(model, "gelu_mobile/one", 1.0), _const(model, "gelu_mobile/half", 0.5)
    for out, x in matches:
        base = out.name or out.output[0]
        replace_node(model, out, _gelu_nodes(x, out.output[0], base, coeffs, one, half))
    return len(matches)


def _gelu_nodes(
    x: str, y: str, base: str, coeffs: list[str], one: str, half: str
) -> list[onnx.NodeProto]:
    """y = 0.5 (x + |x| erf(|x| / sqrt 2)), the 1/sqrt 2 folded into `coeffs`."""
    nodes: list[onnx.NodeProto] = []

    def op(kind: str, *inputs: str, output: str | None = None) -> str:
        name = f"{base}/mobile_{len(nodes)}"
        nodes.append(helper.make_node(kind, list(inputs), [output or name], name=name))
        return output or name

    a = op("Sqrt", op("Mul", x, x))  # |x|
    p = coeffs[-1]
    for c in reversed(coeffs[:-1]):  # Horner: ((a6 z + a5) z + ... + a1) z + 1
        p = op("Add", op("Mul", p, a), c)
    p = op("Add", op("Mul", p, a), one)
    for _ in range(4):  # p^16
        p = op("Mul", p, p)
    erf = op("Sub", one, op("Div", one, p))
    op("Mul", op("Add", x, op("Mul", a, erf)), half, output=y)
    return nodes


def pad_as_concat(model: onnx.ModelProto, shapes: Shapes) -> int:
    """Every constant-mode zero Pad with constant non-negative pads and a static input ->
    a Concat with zero initializers per padded axis; the count."""
    g = GraphIndex(model)
    count = 0
    for node in [n for n in model.graph.node if n.op_type == "Pad"]:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        pads = g.constants.get(node.input[1]) if len(node.input) > 1 else None
        value = g.constants.get(node.input[2]) if len(node.input) > 2 and node.input[2] else 0
        seen = shapes.get(node.input[0], ())
        if (
            attrs.get("mode", b"constant") not in (b"constant", "constant")
            or len(node.input) > 3
            or pads is None
            or value is None
            or np.any(np.asarray(value) != 0)
            or np.any(pads < 0)
            or len(set(seen)) != 1
        ):
            continue
        shape, rank = list(seen[0]), len(seen[0])
        base = node.name or node.output[0]
        current, nodes = node.input[0], []
        for axis in range(rank):
            before, after = int(pads[axis]), int(pads[axis + rank])
            if not before and not after:
                continue
            parts = []
            for side, width in (("before", before), ("after", after)):
                if width:
                    zeros = np.zeros([*shape[:axis], width, *shape[axis + 1 :]], np.float32)
                    parts.append(_const(model, f"{base}/zeros_{axis}_{side}", zeros))
            if before:
                parts.insert(1, current)
            else:
                parts.insert(0, current)
            shape[axis] += before + after
            out = f"{base}/concat_{axis}"
            nodes.append(helper.make_node("Concat", parts, [out], name=out, axis=axis))
            current = out
        if not nodes:
            continue
        nodes[-1].output[0] = node.output[0]
        replace_node(model, node, nodes)
        count += 1
    return count


def spell_reciprocal_and_neg(model: onnx.ModelProto, _shapes: Shapes | None = None) -> int:
    """Reciprocal(x) -> Div(1, x) (no NNAPI Reciprocal) and Neg(x) -> Mul(x, -1) (no CoreML
    Neg): tf2onnx's LayerNorm where no fusion matched it (weights of 1 and 0 fold away); the
    count. Both exact in IEEE float."""
    spelled = {"Reciprocal": ("Div", "one", 1.0, 0), "Neg": ("Mul", "minus_one", -1.0, 1)}
    count = 0
    for node in [n for n in model.graph.node if n.op_type in spelled]:
        kind, name, value, position = spelled[node.op_type]
        const = _const(model, f"mobile/{name}", value)
        inputs = [const, node.input[0]] if position == 0 else [node.input[0], const]
        base = node.name or node.output[0]
        new = helper.make_node(kind, inputs, list(node.output), name=f"{base}/mobile")
        replace_node(model, node, [new])
        count += 1
    return count


MOBILE_PASSES = {
    "layer_normalization_decomposed": decompose_layer_norm,
    "gelu_without_erf": gelu_without_erf,
    "pad_as_concat": pad_as_concat,
    "reciprocal_and_neg_spelled": spell_reciprocal_and_neg,
}


@dataclass(frozen=True)
class MobileRecipe:
    """How the onnx-mobile file is made, as model.json records it."""

    opset: int = MOBILE_OPSET
    batch: int = MOBILE_BATCH
    rewrites: tuple[str, ...] = tuple(MOBILE_PASSES)
    ort_optimization_level: str = ORT_LEVEL
    ort_optimization_style: str = "Fixed"  # optimised when converted, nothing saved for runtime


MOBILE_SETTINGS = MobileRecipe()


def fix_batch(model: onnx.ModelProto, batch: int = MOBILE_BATCH) -> None:
    """The graph's input batch dimension set to `batch`, and the outputs' shapes inferred."""
    dims = model.graph.input[0].type.tensor_type.shape.dim[1:]
    make_input_shape_fixed(model.graph, INPUT_NAME, [batch, *(d.dim_value for d in dims)])
    fix_output_shapes(model)


def mobile_graph(dynamic: onnx.ModelProto) -> tuple[onnx.ModelProto, dict[str, int]]:
    """`dynamic` (export/onnx.py's graph) at batch 1 with MOBILE_PASSES applied, and each pass's
    count; ExportError when the logits moved by more than the graph rewrites may move them."""
    model = onnx.ModelProto()
    model.CopyFrom(dynamic)
    fix_batch(model)
    inputs = probe_inputs(model, (MOBILE_BATCH,) * 3)  # three different images, one per call
    before = outputs(dynamic, inputs)
    shapes = observe_shapes(model, (MOBILE_BATCH,))
    done = {name: apply(model, shapes) for name, apply in MOBILE_PASSES.items()}
    drop_dead_nodes(model)
    check_unchanged(f"{FORMAT}: the mobile spelling", inputs, before, outputs(model, inputs))
    return model, done


def _session_options(path: Path, save_format: str) -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, ORT_LEVEL)
    options.optimized_model_filepath = str(path)
    options.add_session_config_entry("session.save_model_format", save_format)
    options.log_severity_level = 3
    return options


def optimized(onnx_path: Path, out: Path, save_format: str) -> None:
    """Load `onnx_path` in ORT at ORT_LEVEL and save the optimized graph to `out`: ORT's own
    conversion (convert_onnx_models_to_ort, optimization style Fixed), without its CLI."""
    with captured_native_stderr():
        ort.InferenceSession(
            str(onnx_path), _session_options(out, save_format), ["CPUExecutionProvider"]
        )


def _mobile_onnx(src: ExportSource) -> tuple[Path, dict[str, int]]:
    """The mobile graph as a checked .onnx in the export's scratch folder (with the toolkit's
    metadata), and each rewrite's count; built once per export."""

    def build() -> tuple[Path, dict[str, int]]:
        model, counts = mobile_graph(fp32_onnx_at(src, MOBILE_OPSET))
        path = src.scratch / "model_mobile.onnx"
        save_onnx(model, src, FORMAT, path)
        return path, counts

    return src.memo(FORMAT, build)


def convert_onnx_mobile(src: ExportSource, path: Path) -> None:
    """Converter of `onnx-mobile`: the mobile graph, optimised by ORT at ORT_LEVEL and saved in
    ORT format at `path`."""
    optimized(_mobile_onnx(src)[0], path, "ORT")


def describe_mobile(src: ExportSource, path: Path, fmt: Format) -> Extras:
    """The .ort's model.json fields (each mobile provider's share of its graph, the rewrites)
    and its required-operators config (`fmt.companions[0]`)."""
    onnx_path, counts = _mobile_onnx(src)
    graph_path = src.scratch / "model_mobile.optimized.onnx"  # the .ort's graph, as ONNX
    optimized(onnx_path, graph_path, "ONNX")
    (config_name,) = fmt.companions
    coverage = provider_coverage(onnx.load(str(graph_path)))
    entry = {
        "required_operators": config_name,
        "graph_rewrites": counts,
        "mobile_providers": {
            "checker": f"{CHECKER} of onnxruntime {ort.__version__}, on the file's graph",
            **coverage,
        },
    }
    return Extras(entry, {config_name: required_operators(path, fmt.filename, src.scratch)})


def required_operators(ort_path: Path, name: str, scratch: Path) -> str:
    """ORT's required-operators config of the .ort at `ort_path` (`domain;opset;Op,Op`), its
    header naming the file `name` (ORT writes the path it read)."""
    config = scratch / f"{ort_path.name}.required_operators.config"
    log = logging.getLogger("ort_format_model.utils")  # ORT's tools log at DEBUG level
    level = log.level
    log.setLevel(logging.WARNING)
    try:
        create_config_from_models([ort_path], config, enable_type_reduction=False)
    finally:
        log.setLevel(level)
    text = config.read_text()
    config.unlink()
    return re.sub(r"^# - .*$", f"# - {name}", text, count=1, flags=re.MULTILINE)


def config_ops(config: str) -> list[Op]:
    """The ops a required-operators config lists, sorted (domain "" for ai.onnx)."""
    ops = set()
    for line in config.splitlines():
        if line and not line.startswith("#"):
            domain, _opset, names = line.split(";", 2)
            domain = "" if domain == "ai.onnx" else domain
            ops.update(Op(n, domain) for n in names.split(",") if n)
    return sorted(ops)


def provider_coverage(model: onnx.ModelProto) -> dict[str, dict]:
    """Per provider, ORT's mobile checker's count of the nodes it takes (fixed input shapes
    required, as at run time), the nodes in all, its partitions and the op types it lacks."""
    shaped = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    coverage = {}
    for provider, check in PROVIDERS.items():
        info = check(shaped)
        coverage[provider] = {
            "supported_nodes": info.num_supported_nodes,
            "nodes": info.num_nodes,
            "partitions": info.num_partitions,
            "unsupported_ops": sorted(info.unsupported_ops),
            "dynamic_shape_nodes": info.nodes_unsupported_due_to_dynamic_input,
        }
    return coverage
