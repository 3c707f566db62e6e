"""Where the time goes inside one artifact: per-op-type time (ONNX Runtime) or which ops
XNNPACK takes and which fall back to LiteRT's own kernels (LiteRT).

    python -m studies.op_profile RUN/export/model_int8.onnx [--runs 50] [--threads 2]
    python -m studies.op_profile RUN/export/model_int8.tflite

ONNX Runtime: SessionOptions.enable_profiling, node events summed per op type and divided by
the runs. LiteRT's Python API has no op profiler (that is the C++ benchmark_model's
--enable_op_profiling), so for .tflite it lists the op types of the graph after the XNNPACK
delegate is applied: a DELEGATE node per delegated partition, every other op a CPU kernel.
Where the time goes inside XNNPACK: `python -m studies.kernel_profile FILE.tflite`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

from toolkit.runtimes.worker import input_batch  # noqa: E402


def ort_profile(path: Path, runs: int, threads: int | None, batch: int = 1) -> list[tuple]:
    """(op type, ms per run, share of node time, node count) rows, slowest first."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.enable_profiling = True
    options.log_severity_level = 3
    options.profile_file_prefix = str(Path(tempfile.mkdtemp()) / "ort")
    if threads:
        options.intra_op_num_threads = threads
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    arg = session.get_inputs()[0]
    shape = tuple(d if isinstance(d, int) else None for d in arg.shape)
    feed = {arg.name: input_batch(shape, batch)}
    for _ in range(runs):  # the first run's lazy initialisation is in; use enough runs
        session.run(None, feed)
    events = json.loads(Path(session.end_profiling()).read_text())
    time_us: dict[str, float] = defaultdict(float)
    nodes: dict[str, set] = defaultdict(set)
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            op = e["args"]["op_name"]
            time_us[op] += e["dur"]
            nodes[op].add(e["name"])
    total = sum(time_us.values())
    return sorted(
        ((op, us / runs / 1e3, us / total, len(nodes[op])) for op, us in time_us.items()),
        key=lambda r: -r[1],
    )


def litert_ops(path: Path, threads: int | None) -> list[tuple[str, int]]:
    """(op name, count) of the graph LiteRT executes, after the XNNPACK delegate took its part."""
    from toolkit.runtimes.base import RuntimeOptions
    from toolkit.runtimes.litert import load_interpreter

    interpreter = load_interpreter(path, RuntimeOptions(threads=threads))
    return Counter(op["op_name"] for op in interpreter._get_ops_details()).most_common()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("artifact", type=Path)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--batch", type=int, default=1)
    args = parser.parse_args(argv)
    if args.artifact.suffix == ".onnx":
        rows = ort_profile(args.artifact, args.runs, args.threads, args.batch)
        print(f"{args.artifact}: ONNX Runtime CPU, batch {args.batch}, {args.runs} runs")
        print("| op type | ms per run | share | nodes |\n|---|---:|---:|---:|")
        for op, ms, share, n in rows:
            print(f"| {op} | {ms:.3f} | {share:.1%} | {n} |")
        print(f"| total (node time) | {sum(r[1] for r in rows):.3f} | 100% | |")
    else:
        print(f"{args.artifact}: ops LiteRT runs after XNNPACK delegation")
        for op, count in litert_ops(args.artifact, args.threads):
            print(f"  {op:30s} {count}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
