"""Which ops of a .tflite the XNNPACK delegate takes, and which stay on LiteRT's own kernels.

    python -m toolkit.export.xnnpack MODEL.tflite [MODEL.tflite ...]

LiteRT applies XNNPACK when tensors are allocated and replaces each run of supported ops by one
DELEGATE node. The interpreter lists the original ops and the DELEGATE nodes; an original op
belongs to a delegate partition when it is reached walking back from the partition's outputs
without crossing its inputs. The rest run as LiteRT kernels (for int8, often reference ones).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from ai_edge_litert.interpreter import Interpreter

from toolkit.common.native_logs import captured_native_stderr


@dataclass(frozen=True)
class Delegation:
    """How XNNPACK partitions one model: op counts by "NAME/dtype" inside and outside it."""

    ops: int
    partitions: int
    delegated: Counter
    not_delegated: Counter

    @property
    def fully_delegated(self) -> bool:
        """Whether XNNPACK runs every op."""
        return not self.not_delegated


def _key(op: dict) -> str:
    dtypes = sorted({np.dtype(t).name for t in op["operand_types"]})
    return f"{op['op_name']}/{','.join(dtypes)}"


def delegation(path: Path, threads: int | None = None) -> Delegation:
    """The XNNPACK partitioning of the .tflite at `path`."""
    with captured_native_stderr():
        interpreter = Interpreter(model_path=str(path), num_threads=threads)
        interpreter.allocate_tensors()
    nodes = interpreter._get_ops_details()  # the only view of the execution plan in Python
    ops = [n for n in nodes if n["op_name"] != "DELEGATE"]
    delegates = [n for n in nodes if n["op_name"] == "DELEGATE"]
    producer = {int(t): op for op in ops for t in op["outputs"]}
    taken: set[int] = set()
    for node in delegates:
        inputs = {int(t) for t in node["inputs"]}
        stack = [int(t) for t in node["outputs"]]
        while stack:
            tensor = stack.pop()
            op = producer.get(tensor)
            if tensor in inputs or op is None or op["index"] in taken:
                continue
            taken.add(op["index"])
            stack.extend(int(t) for t in op["inputs"] if t >= 0)
    inside = Counter(_key(op) for op in ops if op["index"] in taken)
    outside = Counter(_key(op) for op in ops if op["index"] not in taken)
    return Delegation(len(ops), len(delegates), inside, outside)


def main(argv: list[str] | None = None) -> int:
    """Print each model's partition count and the ops left outside XNNPACK."""
    parser = argparse.ArgumentParser(prog="python -m toolkit.export.xnnpack", description=__doc__)
    parser.add_argument("models", nargs="+", type=Path, metavar="MODEL.tflite")
    args = parser.parse_args(argv)
    for path in args.models:
        if not path.is_file():
            print(f"error: {path} is not a file", file=sys.stderr)
            return 2
        d = delegation(path)
        left = ", ".join(f"{k} x{v}" for k, v in d.not_delegated.most_common()) or "none"
        print(f"{path}: {d.ops} ops, {d.ops - sum(d.not_delegated.values())} in XNNPACK, "
              f"{d.partitions} partitions; outside XNNPACK: {left}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
