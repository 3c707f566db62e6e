"""Op lists of exported graphs (TFLite flatbuffer, ONNX graph) and the ops no runtime may get."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import onnx
from ai_edge_litert import schema_py_generated as schema

STANDARD_ONNX_DOMAINS = ("", "ai.onnx")
BANNED_NAMES = ("extractimagepatches",)  # compared lower-case, underscores removed
_BUILTIN_NAMES = {
    code: name for name, code in vars(schema.BuiltinOperator).items() if not name.startswith("_")
}


@dataclass(frozen=True, order=True)
class Op:
    """One operator type: TFLite domain "builtin" or "custom"; ONNX its node domain."""

    name: str
    domain: str


def builtin_code(model: schema.Model, op: schema.Operator) -> int:
    """An operator's builtin code (newer files set BuiltinCode, older DeprecatedBuiltinCode)."""
    code = model.OperatorCodes(op.OpcodeIndex())
    return max(code.BuiltinCode(), code.DeprecatedBuiltinCode())


def tflite_op_sequence(flatbuffer: bytes) -> list[Op]:
    """Every operator of every subgraph of a .tflite flatbuffer, in graph order, repeats kept."""
    model = schema.Model.GetRootAs(flatbuffer, 0)
    ops = []
    for s in range(model.SubgraphsLength()):
        graph = model.Subgraphs(s)
        for i in range(graph.OperatorsLength()):
            op = graph.Operators(i)
            builtin = builtin_code(model, op)
            if builtin == schema.BuiltinOperator.CUSTOM:
                custom = model.OperatorCodes(op.OpcodeIndex()).CustomCode()
                ops.append(Op((custom or b"?").decode(), "custom"))
            else:
                ops.append(Op(_BUILTIN_NAMES.get(builtin, f"UNKNOWN_{builtin}"), "builtin"))
    return ops


def tflite_ops(flatbuffer: bytes) -> list[Op]:
    """Distinct operators of every subgraph of a .tflite flatbuffer, sorted."""
    return sorted(set(tflite_op_sequence(flatbuffer)))


def onnx_ops(model: onnx.ModelProto) -> list[Op]:
    """Distinct (op_type, domain) of the main graph and its subgraphs, sorted."""
    found = set()
    graphs = [model.graph]
    while graphs:
        graph = graphs.pop()
        for node in graph.node:
            found.add(Op(node.op_type, node.domain))
            for attr in node.attribute:
                graphs.extend([attr.g] if attr.HasField("g") else [])
                graphs.extend(attr.graphs)
    return sorted(found)


def ort_format_ops(path: Path) -> list[Op]:
    """Distinct (op_type, domain) of an ONNX Runtime format (.ort) file, read by ORT's own
    processor (the one behind its required-operators config), sorted; domain "" for ai.onnx."""
    from onnxruntime.tools.ort_format_model import OrtFormatModelProcessor

    required: dict[str, dict[int, set[str]]] = {}  # domain -> opset -> op types
    OrtFormatModelProcessor(str(path), required, None).process()
    return sorted(
        Op(name, "" if domain == "ai.onnx" else domain)
        for domain, opsets in required.items()
        for names in opsets.values()
        for name in names
    )


def forbidden_ops(ops: Iterable[Op]) -> list[str]:
    """Descriptions of Flex (Select TF), custom-domain and ExtractImagePatches ops; [] if none."""
    bad = []
    for op in ops:
        if op.name.startswith("Flex"):
            bad.append(f"{op.name} (Flex / Select TF op)")
        elif op.domain == "custom":
            bad.append(f"{op.name} (custom op)")
        elif op.domain not in STANDARD_ONNX_DOMAINS + ("builtin",):
            bad.append(f"{op.name} (custom domain '{op.domain}')")
        elif op.name.replace("_", "").lower() in BANNED_NAMES:
            bad.append(f"{op.name} (no builtin in every runtime)")
    return bad


def op_names(ops: Iterable[Op]) -> list[str]:
    """Ops as manifest strings: NAME, or DOMAIN::NAME outside the builtin/default domain."""
    return [op.name if op.domain in ("builtin", "") else f"{op.domain}::{op.name}" for op in ops]
