"""Whether a second thread speeds up one batch-1 matrix product, per runtime, fp32 and int8.

    python -m studies.product_threads [--shapes MxKxN,...] [--threads 1,2]
        [--runtimes litert,ort-cpu] [--runs N] [--json FILE]

A batch-1 call of the seed models is a chain of small products (4-144 rows) and the ops between
them. Each product here is its runtime's own one-layer model, built as the exported files
compute it: LiteRT a FullyConnected in float32 and in full int8 (`bench.roofline`'s kernels:
XNNPACK's GEMMs, as in `tflite` and `tflite-int8`); ONNX Runtime a MatMul in float32 and the
same MatMul quantized by the default `onnx-int8` recipe (int8 weights, activations quantized
per call: a DynamicQuantizeMatMul once ORT has fused it). Each (product, runtime, precision,
threads) is timed in a fresh worker process, as `toolkit bench` times a row: the p50 of the
runtime's calls alone. The default shapes are the seed models' products; the report gives each
one's microseconds per call at each thread count and the speed-up of the most threads over one.
"""

from __future__ import annotations

import dataclasses
import shlex
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from studies.provenance import header_lines, publish
from toolkit.bench import roofline
from toolkit.bench.machine import describe
from toolkit.common.argtypes import OneLineParser, positive_int, positive_ints
from toolkit.common.atomic import check_writable
from toolkit.common.errors import UsageError
from toolkit.common.progress import progress
from toolkit.export.converters import ONNX_INT8_RECIPE
from toolkit.export.int8_search import ONNX_RECIPES
from toolkit.export.onnx_int8 import quantize_int8
from toolkit.runtimes.timing import Protocol
from toolkit.runtimes.worker import run_worker

# (rows, depth, columns) of the seed models' batch-1 products, and where each comes from
SEED_PRODUCTS: dict[tuple[int, int, int], str] = {
    (144, 96, 192): "ShiftViT stage-1 MLP in",
    (36, 192, 384): "ShiftViT stage-2 MLP in",
    (9, 384, 768): "ShiftViT stage-3 MLP in",
    (4, 768, 1536): "ShiftViT stage-4 MLP in",
    (144, 64, 256): "ViT-LSA query/key/value projection",
    (1, 9216, 2048): "ViT-LSA head, first layer",
}
PRECISIONS = ("fp32", "int8")


def _onnx_int8_as_exported(path: Path, shape: roofline.Shape) -> None:
    """The fp32 one-node MatMul quantized by the default `onnx-int8` recipe."""
    with tempfile.TemporaryDirectory(prefix="product-threads-") as work:
        graph = roofline.onnx_matmul(False, shape)
        quantize_int8(graph, np.empty((0,)), Path(work), path, ONNX_RECIPES[ONNX_INT8_RECIPE])


# the product of each runtime and precision, as that runtime's exported files compute it
KERNELS: dict[tuple[str, str], roofline.Kernel] = {
    ("litert", "fp32"): roofline.KERNELS["litert", "fp32"],
    ("litert", "int8"): roofline.KERNELS["litert", "int8"],
    ("ort-cpu", "fp32"): roofline.KERNELS["ort-cpu", "fp32"],
    ("ort-cpu", "int8"): roofline.Kernel(
        "ort-cpu", "int8", "matmul_onnx_int8_recipe.onnx", _onnx_int8_as_exported
    ),
}


def parse_shapes(text: str) -> list[roofline.Shape]:
    """'144x96x192,9x384x768' -> [(144, 96, 192), (9, 384, 768)]."""
    shapes = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        parts = item.lower().split("x")
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise UsageError(f"--shapes: '{item}' is not ROWSxDEPTHxCOLUMNS, e.g. 144x96x192")
        shapes.append(tuple(int(p) for p in parts))
    if not shapes:
        raise UsageError("--shapes: give at least one ROWSxDEPTHxCOLUMNS")
    return shapes


def measure(
    shapes: list[roofline.Shape], runtimes: list[str], threads: list[int], runs: int
) -> list[dict]:
    """One row per (shape, runtime, precision): p50 us per call at each thread count."""
    protocol = Protocol(warmup=50, runs=runs, seconds=None)
    cache = roofline.cache_dir()
    jobs = [(s, r, p) for s in shapes for r in runtimes for p in PRECISIONS]
    rows = []
    for i, (shape, runtime, precision) in enumerate(jobs, 1):
        kernel = dataclasses.replace(KERNELS[runtime, precision], shape=shape)
        what = f"{'x'.join(map(str, shape))} {precision} on {runtime}"
        progress("product", i, len(jobs), what)
        path = roofline.kernel_file(kernel, cache)
        row = {"shape": list(shape), "runtime": runtime, "precision": precision, "us": {}}
        for count in threads:
            result = run_worker(path, runtime, shape[0], protocol, count)
            ok = result.get("status") == "ok"
            row["us"][str(count)] = round(result["p50_ms"] * 1e3, 2) if ok else None
            if not ok:
                row["reason"] = result.get("reason")
        rows.append(row)
    return rows


def markdown(report: dict) -> str:
    """The report as a Markdown table with its command, date and machine."""
    threads = report["threads"]
    most = str(max(threads))
    lines = [
        *header_lines(report),
        f"- protocol: each product in a fresh worker per thread count, 50 warmup calls, then "
        f"{report['runs']} timed calls; p50 in microseconds",
        "",
        "| product (rows x depth x columns) | runtime | precision | "
        + " | ".join(f"us, {t} thread{'s' * (t > 1)}" for t in threads)
        + f" | {most} threads vs 1 |",
        "|---|---|---|" + "---:|" * (len(threads) + 1),
    ]
    for row in report["rows"]:
        shape = "x".join(map(str, row["shape"]))
        label = SEED_PRODUCTS.get(tuple(row["shape"]))
        us = row["us"]
        cells = ["failed" if us[str(t)] is None else f"{us[str(t)]:.1f}" for t in threads]
        one, many = us.get("1"), us.get(most)
        gain = f"{one / many:.2f}x" if one and many and most != "1" else "-"
        lines.append(
            f"| {shape}{f' ({label})' if label else ''} | {row['runtime']} | "
            f"{row['precision']} | " + " | ".join(cells) + f" | {gain} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(
        prog="python -m studies.product_threads", description=__doc__.splitlines()[0]
    )
    default_shapes = ",".join("x".join(map(str, s)) for s in SEED_PRODUCTS)
    parser.add_argument("--shapes", default=default_shapes, help="ROWSxDEPTHxCOLUMNS,...")
    parser.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    parser.add_argument("--runtimes", default="litert,ort-cpu", help="litert, ort-cpu or both")
    parser.add_argument("--runs", type=positive_int, default=2000, help="timed calls per worker")
    parser.add_argument("--json", type=Path, help="also write the report here")
    try:
        args = parser.parse_args(argv)
        shapes, threads = parse_shapes(args.shapes), positive_ints(args.threads, "--threads", "1,2")
        runtimes = [r.strip() for r in args.runtimes.split(",") if r.strip()]
        known = sorted({r for r, _ in KERNELS})
        if not runtimes or any(r not in known for r in runtimes):
            raise UsageError(f"--runtimes: '{args.runtimes}'; pick from {', '.join(known)}")
        if args.json is not None:
            check_writable(args.json, "--json")
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    machine = describe()
    started = datetime.now(UTC).isoformat(timespec="seconds")
    report = {
        "command": "python -m studies.product_threads " + shlex.join(argv or sys.argv[1:]),
        "date": started,
        "machine": machine,
        "threads": threads,
        "runs": args.runs,
        "rows": measure(shapes, runtimes, threads, args.runs),
    }
    return publish(report, markdown(report), args.json)


if __name__ == "__main__":
    sys.exit(main())
