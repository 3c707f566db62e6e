"""`toolkit verify RUN`: arguments, tables on the terminal, RUN/verify.json (and with --layers
verify_layers.png beside it), parity records in RUN/export/model.json, exit 0/1."""

from __future__ import annotations

import argparse

from toolkit.common import atomic
from toolkit.common.argtypes import ALL, finite_float, path_arg
from toolkit.common.errors import UsageError
from toolkit.common.scratch import remove_dead_scratch
from toolkit.runfiles import EXPORT_DIR, VERIFY_FILE, manifest_path
from toolkit.runfiles.folder import VERIFY_LAYERS_PLOT
from toolkit.runtimes import DEFAULT_VERIFIED, VERIFIED_RUNTIMES
from toolkit.verify import ATTRIBUTION_SAMPLES
from toolkit.verify.layers import LAYER_SAMPLES
from toolkit.verify.ops import OP_NAMES, SHAPE_SETS
from toolkit.verify.rules import ATOL_FP32, INT8_STEPS, Tolerances
from toolkit.verify.saving import manifest_writable, report_path, save_report
from toolkit.verify.terminal import print_report


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of `toolkit verify`."""
    p.add_argument("run", type=path_arg, metavar="RUN", help="run folder (exported for models)")
    p.add_argument(
        "--runtime",
        "--runtimes",
        dest="runtime",
        default=",".join(DEFAULT_VERIFIED),
        metavar="R[,R...]",
        help=f"runtimes to check (default {','.join(DEFAULT_VERIFIED)}; `all`: "
        f"{','.join(VERIFIED_RUNTIMES)}, the web-* ones in Chromium at the model level only)",
    )
    p.add_argument(
        "--samples",
        type=int,
        metavar="N",
        help="model level: first N test images of the run's data (default: the whole split); "
        f"the int8 attribution uses min(N, {ATTRIBUTION_SAMPLES}); --layers: default "
        f"{LAYER_SAMPLES}",
    )
    p.add_argument(
        "--format",
        "--formats",
        dest="format",
        metavar="F[,F...]",
        help="with --layers: exported formats to check (default: every one in model.json)",
    )
    p.add_argument(
        "--atol-fp32",
        type=finite_float,
        default=ATOL_FP32,
        metavar="X",
        help=f"float32 abs tolerance of SPT/LSA (blocks 10x, models 100x relative; "
        f"default {ATOL_FP32:g}; shift and patches stay bit-exact)",
    )
    p.add_argument(
        "--int8-steps",
        type=finite_float,
        default=INT8_STEPS,
        metavar="K",
        help="int8 op bound: max abs error <= K output quantization steps "
        f"(default {INT8_STEPS:g}; data-movement ops: 1)",
    )
    p.add_argument(
        "--shapes",
        choices=SHAPE_SETS,
        default="full",
        help="op shapes: full (seed presets' and odd ones, default) or quick (small odd ones)",
    )
    p.add_argument(
        "--ops",
        default=ALL,
        metavar="OP[,OP...]",
        help=f"ops to check (default all: {','.join(OP_NAMES)})",
    )
    p.add_argument(
        "--allow-modified",
        action="store_true",
        help="verify files changed after export (their sha256 is not model.json's) as they "
        "are, with a warning; without it they are refused",
    )
    p.add_argument(
        "--json", type=path_arg, metavar="FILE", help=f"report file (default RUN/{VERIFY_FILE})"
    )
    only = p.add_mutually_exclusive_group()
    only.add_argument("--ops-only", action="store_true", help="op level only")
    only.add_argument("--models-only", action="store_true", help="model level only")
    only.add_argument(
        "--layers",
        action="store_true",
        help="layer level only: each artifact's tensors at every block boundary vs Keras, the "
        f"first that leaves its tolerance, and {VERIFY_LAYERS_PLOT} beside the report",
    )


def _tolerances(args: argparse.Namespace) -> Tolerances:
    if not args.atol_fp32 >= 0:
        raise UsageError(f"--atol-fp32 must be >= 0, got {args.atol_fp32}")
    if not args.int8_steps > 0:
        raise UsageError(f"--int8-steps must be > 0, got {args.int8_steps}")
    return Tolerances(atol_fp32=args.atol_fp32, int8_steps=args.int8_steps)


def run(args: argparse.Namespace) -> int:
    """Verify, print the tables, write the JSON report (and the layer plot), record parity in
    model.json; 1 when a tolerance is exceeded."""
    tolerances = _tolerances(args)
    if args.format is not None and not args.layers:
        raise UsageError("--format applies to the layer level: add --layers, or drop --format")
    level = "ops" if args.ops_only else "models" if args.models_only else "all"
    record = False
    if args.run.is_dir():  # a bad --json fails before the work, not after it
        report_path(args.run, args.json, args.layers)
        record = args.layers and manifest_writable(args.run)  # verify_run checks its own
    remove_dead_scratch()  # what killed exports and verifies left in the temp folder, any level
    from toolkit.keras_setup import setup_keras

    setup_keras()  # TensorFlow imported quietly and the custom layers registered, before the levels
    from toolkit.verify.layers.level import verify_layers_run
    from toolkit.verify.verifier import verify_run

    try:
        if args.layers:
            report = verify_layers_run(
                args.run,
                formats=args.format,
                runtimes=args.runtime,
                samples=args.samples,
                tolerances=tolerances,
                allow_modified=args.allow_modified,
            )
            print_report(report)  # before writing: a full disk then loses no result
            saved = save_report(args.run, report, report_path(args.run, args.json), record)
        else:
            verified = verify_run(
                args.run,
                level=level,
                runtimes=args.runtime,
                samples=args.samples,
                tolerances=tolerances,
                shapes=args.shapes,
                ops=args.ops,
                allow_modified=args.allow_modified,
                json_path=args.json,
                quiet=False,  # printed before it is written
            )
            report, saved = verified.report, verified.saved
    except OSError as exc:  # one line; the report and model.json each whole, new or as they were
        fault = atomic.full_disk_error(exc)
        if fault is None:
            raise
        raise fault from None
    print(f"report: {saved.report}")
    if saved.plot is not None:
        print(f"plot: {saved.plot}")
    if saved.recorded:
        manifest = manifest_path(args.run / EXPORT_DIR)
        print(f"parity recorded in {manifest}: {', '.join(saved.recorded)}")
    return 0 if report["passed"] else 1
