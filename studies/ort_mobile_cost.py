"""What the onnx-mobile `.ort` costs on ONNX Runtime's CPU provider, and where it goes.

    python -m studies.ort_mobile_cost RUN [--threads N] [--segments N] [--calls N]
        [--warmup N] [--json FILE]

The `.ort` (toolkit/export/onnx_mobile.py) is built for NNAPI and CoreML: the graph at batch 1,
LayerNorm, GELU and the shifts' Pad spelled in ops those providers take, saved at ORT's basic
optimisation level (the extended level fuses into com.microsoft ops no mobile provider takes).
An app runs on the CPU provider whatever NNAPI or CoreML does not take. This study times, side
by side (`toolkit bench --interleaved`'s round robin, batch 1), RUN's `model.onnx` and
`model.ort` beside three files that separate the causes, built in a scratch folder from RUN's
model.keras: the batch-1 graph without the mobile rewrites (as `.onnx`, which ORT optimises
fully when it loads it, and as `.ort` at the basic level), and the mobile graph as `.onnx`.
Each row's `vs_fp32` is model.onnx's p50 over its own, per segment (median).
"""

from __future__ import annotations

import os
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path

import onnx

from studies.provenance import publish
from toolkit.bench import interleaved
from toolkit.bench.machine import describe
from toolkit.common.argtypes import OneLineParser, positive_int
from toolkit.common.atomic import check_writable
from toolkit.common.errors import UsageError
from toolkit.common.scratch import scratch_dir
from toolkit.runfiles.folder import open_run

RUNTIME = "ort-cpu"
BATCH = 1
# the rows, in the order timed: label -> what it separates
VARIANTS = {
    "onnx": "RUN/export/model.onnx (ORT optimises it fully at load)",
    "onnx-mobile": "RUN/export/model.ort as exported (mobile rewrites, basic level)",
    "batch-1 onnx": "model.onnx at batch 1, no rewrites: the batch fixing alone",
    "batch-1 ort basic": "the same saved as .ort at the basic level: the level alone",
    "mobile graph onnx": "the mobile rewrites as .onnx, fully optimised: the rewrites alone",
}


def build_variants(run_dir: Path, scratch: Path) -> dict[str, tuple[Path, str]]:
    """Label -> (file, runtime) of every VARIANTS row; the three made here go to `scratch`."""
    from toolkit.export.onnx import fp32_onnx_at
    from toolkit.export.onnx_mobile import MOBILE_OPSET, fix_batch, mobile_graph, optimized
    from toolkit.export.source import open_source
    from toolkit.runmodel import load_run_model

    run = open_run(run_dir)
    model = load_run_model(run)
    with open_source(run, model, opset=MOBILE_OPSET, calib_data=None, calib_samples=None) as src:
        dynamic = fp32_onnx_at(src, MOBILE_OPSET)
    fixed = onnx.ModelProto()
    fixed.CopyFrom(dynamic)
    fix_batch(fixed)
    onnx.save(fixed, str(scratch / "batch1.onnx"))
    optimized(scratch / "batch1.onnx", scratch / "batch1_basic.ort", "ORT")
    mobile, _ = mobile_graph(dynamic)
    onnx.save(mobile, str(scratch / "mobile.onnx"))
    files = {
        "onnx": run.export_dir / "model.onnx",
        "onnx-mobile": run.export_dir / "model.ort",
        "batch-1 onnx": scratch / "batch1.onnx",
        "batch-1 ort basic": scratch / "batch1_basic.ort",
        "mobile graph onnx": scratch / "mobile.onnx",
    }
    return {label: (path, RUNTIME) for label, path in files.items()}


def measure(run_dir: Path, threads: int, segments: int, calls: int, warmup: int) -> dict:
    """Build the variants, time them round-robin; the rows with their ratios to model.onnx."""
    with scratch_dir("ortcost") as scratch:
        files = build_variants(run_dir, scratch)
        report = interleaved.measure(files, threads, BATCH, warmup, segments, calls)
    for row in report["rows"]:
        row["what"] = VARIANTS[row["format"]]
    return report


def markdown(report: dict) -> str:
    """The table: each file's p50 and model.onnx's speed over it."""
    lines = [
        f"# onnx-mobile on ORT's CPU provider: {report['run']}",
        "",
        f"Batch 1, {report['threads']} threads, {report['segments']} round-robin segments of "
        f"{report['calls']} calls. {report['machine_text']}",
        "",
        "| file | what it separates | p50 ms | model.onnx / it |",
        "|---|---|---:|---:|",
    ]
    for r in report["rows"]:
        ratio = "-" if r["vs_fp32"] is None else f"{r['vs_fp32']:.2f}x"
        p50 = "-" if r["p50_ms"] is None else f"{r['p50_ms']:.3f}"
        lines.append(f"| `{r['format']}` | {r['what']} | {p50} | {ratio} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(
        prog="python -m studies.ort_mobile_cost", description=__doc__.splitlines()[0]
    )
    parser.add_argument("run", type=Path, help="a run folder exported with onnx and onnx-mobile")
    parser.add_argument("--threads", type=positive_int, default=os.cpu_count() or 1)
    parser.add_argument("--segments", type=positive_int, default=interleaved.DEFAULT_SEGMENTS)
    parser.add_argument("--calls", type=positive_int, default=interleaved.DEFAULT_CALLS)
    parser.add_argument("--warmup", type=positive_int, default=20, help="untimed calls per file")
    parser.add_argument("--json", type=Path, help="write the report here too")
    try:
        args = parser.parse_args(argv)
        if args.json is not None:
            check_writable(args.json, "--json")
        run = open_run(args.run)
        missing = [n for n in ("model.onnx", "model.ort") if not (run.export_dir / n).is_file()]
        if missing:
            raise UsageError(
                f"{run.export_dir} has no {' or '.join(missing)}: run `toolkit export "
                f"{args.run} --format onnx,onnx-mobile` first"
            )
        report = measure(args.run, args.threads, args.segments, args.calls, args.warmup)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    machine = describe()
    report |= {
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": "python -m studies.ort_mobile_cost " + shlex.join(argv or sys.argv[1:]),
        "run": str(args.run),
        "model": run.config.model,
        "preset": run.config.preset,
        "threads": args.threads,
        "segments": args.segments,
        "calls": args.calls,
        "machine": machine,
        "machine_text": f"{machine.get('cpu')} ({', '.join(machine.get('cpu_flags', []))})",
    }
    return publish(report, markdown(report), args.json)


if __name__ == "__main__":
    raise SystemExit(main())
