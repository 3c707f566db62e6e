"""`toolkit export RUN --format FMT[,FMT...]|all`: arguments and runner for the CLI table."""

from __future__ import annotations

import argparse
import sys

from toolkit.common.argtypes import ALL, finite_float, path_arg
from toolkit.export.conversion_error import ExportError
from toolkit.formats import (
    ATTENTION_OPSET,
    DEFAULT_CALIB_SAMPLES,
    DEFAULT_OPSET,
    FORMATS,
    MAX_OPSET,
    MIN_OPSET,
)
from toolkit.runfiles import EXPORT_DIR, Manifest


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of `toolkit export`."""
    p.add_argument(
        "run", type=path_arg, metavar="RUN", help="run folder written by `toolkit train`"
    )
    p.add_argument(
        "--format",
        required=True,
        metavar="FMT[,FMT...]|all",
        help=f"comma-separated: {', '.join(FORMATS)}; or {ALL}",
    )
    p.add_argument(
        "--calib-data",
        metavar="SPEC",
        help="int8 formats: data spec whose train split calibrates (default: the run's data)",
    )
    p.add_argument(
        "--calib-samples",
        type=int,
        metavar="N",
        help=f"int8 formats: calibration images (default {DEFAULT_CALIB_SAMPLES}, or all the "
        "training images where fewer)",
    )
    p.add_argument(
        "--opset",
        type=int,
        metavar="N",
        help=f"ONNX formats: opset {MIN_OPSET} to {MAX_OPSET} (default {DEFAULT_OPSET}; from "
        f"{ATTENTION_OPSET} each attention is one Attention node)",
    )
    p.add_argument(
        "--max-accuracy-drop",
        type=finite_float,
        metavar="P",
        help="tflite-int8, onnx-int8: search recipes on the validation split, keep the fastest "
        "whose top-1 drop vs the float model is <= P points (fails if none is)",
    )
    p.add_argument(
        "--out", type=path_arg, metavar="DIR", help=f"export folder (default RUN/{EXPORT_DIR})"
    )


def gpu_notes(manifest: Manifest, names: list[str]) -> list[str]:
    """One line per file LiteRT's GPU accelerator does not take whole, and one line when the
    check could not be made here (no GPU), naming why."""
    results = {n: manifest.artifacts[n].gpu_accelerator for n in names}
    results = {n: r for n, r in results.items() if r is not None}
    partly = [n for n, r in results.items() if r["checked"] and not r["fully_accelerated"]]
    lines = [
        f"{n}: LiteRT's GPU accelerator does not take every op (the rest runs on the CPU)"
        for n in partly
    ]
    unchecked = [r["reason"] for r in results.values() if not r["checked"]]
    if unchecked:
        lines.append(f"GPU accelerator: not checked for {len(unchecked)} file(s): {unchecked[0]}")
    return lines


def run(args: argparse.Namespace) -> int:
    """Export, then print one row per format written and the export folder."""
    from toolkit.keras_setup import setup_keras

    setup_keras()  # TensorFlow imported quietly and the custom layers registered, before converters
    from toolkit.export.exporter import export_run

    try:
        exported = export_run(
            args.run,
            args.format,
            calib_data=args.calib_data,
            calib_samples=args.calib_samples,
            opset=args.opset,
            out=args.out,
            max_accuracy_drop=args.max_accuracy_drop,
        )
    except ExportError as exc:
        print(f"toolkit: export failed: {exc}", file=sys.stderr)
        return 1
    rows = [("format", "file", "size (KB)", "seconds")]
    searched: list[str] = []
    for name, entry in exported.entries.items():
        size = f"{(entry.size_bytes or 0) / 1024:.1f}"
        rows.append((name, entry.file, size, f"{entry.export_seconds or 0:.1f}"))
        found = entry.quantization_search
        if found:
            searched.append(
                f"{name}: recipe {found['recipe']}, top-1 drop {found['drop_points']:.2f} points "
                f"(budget {found['max_accuracy_drop_points']:g}), p50 {found['p50_ms']:.2f} ms "
                f"at batch 1 on {found['latency']['runtime']} "
                f"({found['speedup_vs_fp32']:.2f}x its fp32's {found['fp32_p50_ms']:.2f} ms), "
                f"{len(found['candidates'])} recipes tried"
            )
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for row in rows:
        left = [cell.ljust(w) for cell, w in zip(row[:2], widths[:2], strict=True)]
        right = [cell.rjust(w) for cell, w in zip(row[2:], widths[2:], strict=True)]
        print("  ".join(left + right))
    for line in searched:
        print(line)
    for line in gpu_notes(exported.manifest, list(exported.formats)):
        print(line)
    print(f"export folder: {exported.folder} (model.json, labels.txt)")
    return 0
